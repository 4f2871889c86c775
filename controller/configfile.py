"""Upstream JobSet's Configuration file (``--config``), read as flag values.

Upstream's manager reads a ``config.jobset.x-k8s.io/v1alpha1`` ``Configuration`` (its chart
mounts one from a ConfigMap), and its command-line flags override the file. This controller reads
the same file. Each field with a meaning here becomes the value of the flag with that meaning
(``leaderElection.leaseDuration`` is ``--lease-duration``); ``config.py`` applies it unless the
flag or its environment variable is set. Fields about parts upstream has and this controller does
not (its webhook server, the certificates it makes for it) are accepted and reported as ignored.
Any other field is refused, naming it, as upstream's strict decoding refuses unknown fields.

Pure: text in, settings out (``load`` only reads the file).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "config.jobset.x-k8s.io/v1alpha1"
KIND = "Configuration"
# Upstream's gate for its ``tls`` section (beta, on by default): off, the section is not used.
TLS_GATE = "TLSOptions"


class ConfigFileError(ValueError):
    """The file cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Setting:
    """One flag's value from the file: ``dest`` is the flag's (``lease_duration``)."""

    dest: str
    value: object
    field: str  # where in the file: leaderElection.leaseDuration


@dataclass(frozen=True)
class Ignored:
    field: str
    reason: str


@dataclass(frozen=True)
class FileConfig:
    settings: tuple[Setting, ...]
    ignored: tuple[Ignored, ...]

    def get(self, dest: str) -> Setting | None:
        return next((s for s in self.settings if s.dest == dest), None)


# Go's time.ParseDuration units (metav1.Duration is written as one: "15s", "1m30s", "500ms").
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
          "h": 3600.0}  # fmt: skip
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(text: str) -> float:
    """Seconds of a Go duration string; ValueError if it is not one."""
    rest, sign = text, 1.0
    if rest[:1] in ("+", "-"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total, position = 0.0, 0
    while position < len(rest):
        found = _DURATION_PART.match(rest, position)
        if found is None or found.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}")
        total += float(found.group(1)) * _UNITS[found.group(2)]
        position = found.end()
    return sign * total


class _StrictLoader(yaml.SafeLoader):
    """YAML whose mappings refuse a key given twice (upstream's strict decoding does)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            line = key_node.start_mark.line + 1
            raise ConfigFileError(f"the field {key!r} is given twice (line {line})")
        seen.add(key)
    return dict(loader.construct_pairs(node))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


class _Reader:
    """Walks the document; collects settings and ignored fields; errors name the field."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.settings: list[Setting] = []
        self.ignored: list[Ignored] = []

    def error(self, field: str, message: str) -> ConfigFileError:
        return ConfigFileError(f"{self.source}: {field}: {message}")

    def section(self, obj: Any, field: str, known: tuple[str, ...]) -> dict[str, Any]:
        """``obj`` as a mapping with only ``known`` fields; null reads as empty."""
        if obj is None:
            return {}
        if not isinstance(obj, dict):
            raise self.error(field, f"must be a mapping, got {_kind(obj)}")
        unknown = sorted(str(k) for k in obj if k not in known)
        if unknown:
            names = ", ".join(f"{field}.{k}" if field else k for k in unknown)
            raise ConfigFileError(
                f"{self.source}: unknown field{'s' if len(unknown) > 1 else ''} {names} "
                f"(known{' in ' + field if field else ''}: {', '.join(known)})"
            )
        return {k: v for k, v in obj.items() if v is not None}

    def typed(self, value: Any, field: str, kind: str) -> Any:
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.error(field, f"must be true or false, got {value!r}")
            return value
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(field, f"must be an integer, got {value!r}")
            return value
        if kind == "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.error(field, f"must be a number, got {value!r}")
            return float(value)
        if kind == "duration":
            if not isinstance(value, str):
                raise self.error(field, f'must be a duration such as "15s", got {value!r}')
            try:
                return go_duration(value)
            except ValueError:
                raise self.error(
                    field, f"invalid duration {value!r} (a Go duration such as 15s, 1m30s, 500ms)"
                ) from None
        if kind == "string":
            if not isinstance(value, str):
                raise self.error(field, f"must be a string, got {value!r}")
            return value
        if kind == "strings":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.error(field, f"must be a list of strings, got {value!r}")
            return list(value)
        raise AssertionError(kind)

    def flag(
        self, obj: dict[str, Any], key: str, parent: str, kind: str, dest: str,
        convert: Callable[[Any], object] = lambda v: v,
    ) -> None:  # fmt: skip
        """The field ``key`` of ``obj`` as the flag ``dest``. An empty string or a zero
        duration is upstream's "unset" (its defaults fill them): the flag's default stays."""
        if key not in obj:
            return
        field = f"{parent}.{key}"
        value = self.typed(obj[key], field, kind)
        if value == "" or (kind == "duration" and value == 0.0):
            return
        self.settings.append(Setting(dest, convert(value), field))

    def ignore(self, obj: dict[str, Any], parent: str, kinds: Mapping[str, str], why: str) -> None:
        """The section ``parent`` is checked (types, known fields) and reported once."""
        for key, kind in kinds.items():
            if key in obj:
                self.typed(obj[key], f"{parent}.{key}", kind)
        if obj:
            self.ignored.append(Ignored(parent, why))


def _kind(value: Any) -> str:
    return "a list" if isinstance(value, list) else repr(value)


_LEADER_ELECTION = {
    "leaderElect": ("bool", "leader_elect"),
    "leaseDuration": ("duration", "lease_duration"),
    "renewDeadline": ("duration", "renew_deadline"),
    "retryPeriod": ("duration", "retry_period"),
    "resourceName": ("string", "leader_election_id"),
    "resourceNamespace": ("string", "leader_election_namespace"),
}
_WEBHOOK = {"port": "int", "host": "string", "certDir": "string"}
_INTERNAL_CERTS = {"enable": "bool", "webhookServiceName": "string", "webhookSecretName": "string"}
_NO_WEBHOOK = (
    "this controller serves no webhooks (the CRD's schema and a ValidatingAdmissionPolicy check "
    "JobSets in the API server)"
)
_TOP = ("apiVersion", "kind", "leaderElection", "metrics", "health", "clientConnection",
        "featureGates", "webhook", "internalCertManagement", "tls")  # fmt: skip


def parse(text: str, source: str = "the configuration file") -> FileConfig:
    """The settings of a Configuration document; ConfigFileError names what is wrong."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except ConfigFileError as error:
        raise ConfigFileError(f"{source}: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigFileError(f"{source}: not YAML or JSON: {error}") from None
    reader = _Reader(source)
    if not isinstance(document, dict):
        raise ConfigFileError(
            f"{source}: must be a {KIND} object (apiVersion {API_VERSION}), got {_kind(document)}"
        )
    top = reader.section(document, "", _TOP)
    if top.get("apiVersion") != API_VERSION or top.get("kind") != KIND:
        raise ConfigFileError(
            f"{source}: must be apiVersion {API_VERSION}, kind {KIND} (upstream JobSet's "
            f"manager configuration), got apiVersion {top.get('apiVersion')!r}, kind "
            f"{top.get('kind')!r}"
        )

    election = reader.section(
        top.get("leaderElection"), "leaderElection", (*_LEADER_ELECTION, "resourceLock")
    )
    for key, (kind, dest) in _LEADER_ELECTION.items():
        reader.flag(election, key, "leaderElection", kind, dest)
    if "resourceLock" in election:
        lock = reader.typed(election["resourceLock"], "leaderElection.resourceLock", "string")
        if lock not in ("", "leases"):
            raise reader.error(
                "leaderElection.resourceLock",
                f"only 'leases' is supported (a coordination.k8s.io Lease), got {lock!r}",
            )

    metrics = reader.section(top.get("metrics"), "metrics", ("bindAddress", "certDir"))
    reader.flag(metrics, "bindAddress", "metrics", "string", "metrics_bind_address")
    reader.flag(metrics, "certDir", "metrics", "string", "metrics_cert_path")

    health = reader.section(
        top.get("health"),
        "health",
        ("healthProbeBindAddress", "readinessEndpointName", "livenessEndpointName"),
    )
    reader.flag(health, "healthProbeBindAddress", "health", "string", "health_probe_bind_address")
    for key, path in (("readinessEndpointName", "readyz"), ("livenessEndpointName", "healthz")):
        if key in health:
            name = reader.typed(health[key], f"health.{key}", "string")
            if name.strip("/") not in ("", path):
                raise reader.error(
                    f"health.{key}",
                    f"this controller serves /{path} only (its probes are fixed), got {name!r}",
                )

    client = reader.section(top.get("clientConnection"), "clientConnection", ("qps", "burst"))
    reader.flag(client, "qps", "clientConnection", "number", "kube_api_qps")
    reader.flag(client, "burst", "clientConnection", "int", "kube_api_burst")

    gates = top.get("featureGates") or {}
    if not isinstance(gates, dict):
        raise reader.error(
            "featureGates", f"must be a mapping of gate names to true or false, got {_kind(gates)}"
        )
    values = {str(k): reader.typed(v, f"featureGates.{k}", "bool") for k, v in gates.items()}
    tls_gate = values.pop(TLS_GATE, True)
    if values:
        rendered = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(values.items()))
        reader.settings.append(Setting("feature_gates", rendered, "featureGates"))

    tls = reader.section(top.get("tls"), "tls", ("minVersion", "cipherSuites"))
    if not tls_gate:
        tls_kinds = {"minVersion": "string", "cipherSuites": "strings"}
        reader.ignore(tls, "tls", tls_kinds, f"the feature gate {TLS_GATE} is off")
    else:
        reader.flag(tls, "minVersion", "tls", "string", "tls_min_version")
        if "cipherSuites" in tls:
            suites = reader.typed(tls["cipherSuites"], "tls.cipherSuites", "strings")
            if suites:
                reader.settings.append(
                    Setting("tls_cipher_suites", ",".join(suites), "tls.cipherSuites")
                )

    webhook = reader.section(top.get("webhook"), "webhook", tuple(_WEBHOOK))
    reader.ignore(webhook, "webhook", _WEBHOOK, _NO_WEBHOOK)
    certs = reader.section(
        top.get("internalCertManagement"), "internalCertManagement", tuple(_INTERNAL_CERTS)
    )
    reader.ignore(certs, "internalCertManagement", _INTERNAL_CERTS, _NO_WEBHOOK)
    return FileConfig(tuple(reader.settings), tuple(reader.ignored))


def load(path: str) -> FileConfig:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ConfigFileError(f"{path}: cannot be read: {error.strerror or error}") from None
    return parse(text, path)
