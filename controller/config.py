"""Command-line flags, each with an environment-variable equivalent.

Every flag ``--some-flag`` can also be set as ``STATEFUL_JOBSET_SOME_FLAG``; the flag wins. Names
and defaults follow controller-runtime's where the concept is the same.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from controller import features
from controller import version as versionmod
from controller.features import DEFAULT as DEFAULT_GATES
from controller.features import FeatureGates
from controller.jobset.api import CONTROLLER_NAME as UPSTREAM_MANAGED_BY

ENV_PREFIX = "STATEFUL_JOBSET_"
EVENT_LOOPS = ("uvloop", "asyncio")
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The shape the CRD accepts for spec.managedBy (a DNS-1123 subdomain, "/", URL path characters;
# 63 characters in all): a flag value no JobSet could carry would serve nothing.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PATH = re.compile(r"[-A-Za-z0-9._~!$&'()*+,;=:%/]+")


class ConfigError(ValueError):
    """A flag or environment variable has a bad value; the message names it."""


class _VersionAction(argparse.Action):
    """``--version``: print the build (version, commit, Python) and exit. The commit is looked up
    only when asked for, not each time a parser is built."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and the git commit, and exit")  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(versionmod.build_info().describe())  # stdout, as argparse's own version action
        parser.exit()


@dataclass(frozen=True)
class Config:
    kubeconfig: str | None
    service_account_dir: str
    namespaces: tuple[str, ...]
    workers: int
    kube_api_qps: float
    kube_api_burst: int
    leader_elect: bool
    leader_election_id: str
    leader_election_namespace: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    metrics_bind_address: str
    health_probe_bind_address: str
    metrics_secure: bool
    metrics_cert_path: str
    metrics_cert_name: str
    metrics_cert_key: str
    metrics_auth: bool
    log_level: str
    identity: str
    shutdown_timeout: float
    status_progress_period: float
    # Seconds within which a JobSet's child events (Jobs, claims, its Service, Pod-scope pods)
    # are gathered into one pass: a Job's pods start, become ready and finish together, and
    # each step is an event of every one of its Jobs.
    child_event_batch_period: float
    # Seconds a snapshot that retention waits for may take before VolumeSnapshotsReady warns.
    snapshot_warn_after: float
    # The spec.managedBy value served; upstream's reserved one (UPSTREAM_MANAGED_BY) by default.
    managed_by: str
    feature_gates: FeatureGates = DEFAULT_GATES
    # "uvloop" or "asyncio": which event loop runs the controller (app.event_loop_factory).
    event_loop: str = "uvloop"

    def address(self, value: str) -> tuple[str, int] | None:
        """``host:port`` → (host, port); ``0`` or empty disables the endpoint."""
        if value in ("", "0"):
            return None
        host, _, port = value.rpartition(":")
        return (host or "0.0.0.0", int(port))


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def valid_managed_by(value: str) -> bool:
    """``value`` is a spec.managedBy the CRD would accept: ``<subdomain>/<path>``, at most 63
    characters."""
    prefix, slash, path = value.partition("/")
    return (
        len(value) <= 63
        and bool(slash)
        and len(prefix) <= 253
        and _DNS1123_SUBDOMAIN.fullmatch(prefix) is not None
        and _PATH.fullmatch(path) is not None
    )


def _default_namespace(service_account_dir: str) -> str:
    explicit = os.environ.get("POD_NAMESPACE")
    if explicit:
        return explicit
    try:
        return (Path(service_account_dir) / "namespace").read_text().strip() or "default"
    except OSError:
        return "default"


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(
        prog="python -m controller",
        description="Stateful JobSet controller: runs JobSets and manages their persistent "
        f"volumes. Every flag --x-y can also be set as the environment variable {ENV_PREFIX}X_Y.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )

    parser.add_argument("--version", action=_VersionAction)

    def flag(name: str, help_text: str, default: object, **kwargs: object) -> None:
        from_env = env.get(_env_name(name))
        parser.add_argument(
            name,
            help=f"{help_text} [env {_env_name(name)}]",
            default=from_env if from_env is not None else default,
            **kwargs,  # type: ignore[arg-type]
        )

    flag("--kubeconfig", "kubeconfig file; empty means in-cluster configuration "
         "(KUBERNETES_SERVICE_HOST/PORT and the service-account files)",
         env.get("KUBECONFIG", ""))  # fmt: skip
    flag("--service-account-dir", "where the in-cluster token, ca.crt and namespace files are",
         SERVICE_ACCOUNT_DIR)  # fmt: skip
    flag("--namespaces", "comma-separated namespaces to watch; empty means all", "")
    flag("--workers", "concurrent reconciles", 4, type=int)
    # Upstream JobSet's limits: a JobSet of many Jobs is created in one pass, and at 50 QPS a
    # thousand JobSets waited minutes in the client's own bucket (bench/HISTORY.md, "The first
    # run (before the cuts)"). The API
    # server's priority and fairness protects it; this bucket only smooths bursts.
    flag("--kube-api-qps", "client-side limit of API requests per second", 500.0, type=float)
    flag("--kube-api-burst", "client-side burst of API requests", 500, type=int)
    flag("--leader-elect", "use leader election (one active replica)", True, type=_bool)
    flag("--leader-election-id", "name of the leader election Lease", "stateful-jobset-controller")
    flag("--leader-election-namespace", "namespace of the Lease (default: the pod's namespace)", "")
    flag("--lease-duration", "seconds a standby waits before taking an unrenewed lease", 15.0,
         type=float)  # fmt: skip
    flag("--renew-deadline", "seconds the leader keeps trying to renew before giving up", 10.0,
         type=float)  # fmt: skip
    flag("--retry-period", "seconds between lease acquire/renew attempts", 2.0, type=float)
    flag("--metrics-bind-address", "host:port for /metrics; 0 disables", ":8080")
    flag("--health-probe-bind-address", "host:port for /healthz and /readyz; 0 disables", ":8081")
    flag("--metrics-secure", "serve /metrics over HTTPS with the certificate in "
         "--metrics-cert-path (re-read when it changes; no self-signed certificate is generated)",
         False,
         type=_bool)  # fmt: skip
    flag("--metrics-cert-path", "directory holding the metrics serving certificate and key",
         "")  # fmt: skip
    flag("--metrics-cert-name", "certificate file (PEM, chain) in --metrics-cert-path", "tls.crt")
    flag("--metrics-cert-key", "private key file (PEM) in --metrics-cert-path", "tls.key")
    flag("--metrics-auth", "require a bearer token on /metrics, authenticated with a TokenReview "
         "and authorized (get on the non-resource URL /metrics) with a SubjectAccessReview, as "
         "upstream's secure metrics endpoint; answers cached (token 1 min, allowed 5 min, denied "
         "30 s). Needs create on tokenreviews and subjectaccessreviews", False,
         type=_bool)  # fmt: skip
    flag("--log-level", "debug, info, warning or error", "info")
    flag("--identity", "this replica's name in the Lease (default: hostname + random suffix)", "")
    flag("--status-progress-period", "the longest hold: the most seconds a change of status "
         "counters alone (replicatedJobsStatus, volumes) waits before it is written, from the "
         "reconcile that sees it; the changes within it go out in one write, or sooner with a "
         "condition; conditions, and what Kueue reads off the counters, are written at once; 0 "
         "writes every change", 5.0, type=float)  # fmt: skip
    flag("--child-event-batch-period", "seconds within which the events of a JobSet's Jobs, "
         "claims, Service and Pod-scope pods are gathered into one reconcile (as the Job "
         "controller batches pod events), as are changes of the JobSet's status alone (mostly the "
         "echo of its own status write); changes to its spec or metadata are acted on at once; "
         "0 reconciles on every event", 0.25, type=float)  # fmt: skip
    flag("--snapshot-warn-after", "seconds a VolumeSnapshot (or group) that retention "
         "Snapshot waits for may take to become ready before VolumeSnapshotsReady says "
         "SnapshotNotReady with a Warning Event; the claim is kept either way (large volumes on "
         "cloud storage take many minutes)", 1800.0, type=float)  # fmt: skip
    flag("--managed-by", "the spec.managedBy value this controller serves; JobSets with another "
         "value are left alone, and JobSets without the field are served only with the default "
         "(upstream's reserved value, so this controller replaces upstream JobSet). Another value "
         "(e.g. example.com/canary) runs it beside upstream for the JobSets that name it",
         UPSTREAM_MANAGED_BY)  # fmt: skip
    flag("--feature-gates", "upstream JobSet's alpha features, e.g. RestartJob=true,"
         "ElasticJobSet=true (both off by default, as upstream); the installed CRD must be the "
         "one generated with the same gates (components/alpha-features has every gate on)",
         "")  # fmt: skip
    flag("--event-loop", "uvloop (libuv's event loop: less CPU for the same work, "
         "bench/HISTORY.md) or asyncio (the standard library's)", "uvloop",
         choices=EVENT_LOOPS)  # fmt: skip
    flag("--shutdown-timeout", "seconds to let in-flight reconciles finish on SIGTERM", 20.0,
         type=float)  # fmt: skip
    return parser


def parse(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    parser = build_parser(env)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        if exit_.code == 0:
            raise
        raise ConfigError("invalid command line (see the message above)") from exit_
    return from_args(args)


def from_args(args: argparse.Namespace) -> Config:
    def positive(name: str, value: float) -> None:
        if value <= 0:
            raise ConfigError(f"--{name} must be positive, got {value}")

    workers = int(args.workers)
    positive("workers", workers)
    positive("kube-api-qps", float(args.kube_api_qps))
    positive("kube-api-burst", int(args.kube_api_burst))
    leader_elect = (
        args.leader_elect if isinstance(args.leader_elect, bool) else _bool(args.leader_elect)
    )
    lease, renew, retry = (
        float(args.lease_duration),
        float(args.renew_deadline),
        float(args.retry_period),
    )
    if leader_elect and not lease > renew > retry * 1.2 > 0:
        raise ConfigError(
            "leader election needs --lease-duration > --renew-deadline > 1.2 x --retry-period "
            f"(got {lease}, {renew}, {retry})"
        )
    if args.log_level not in ("debug", "info", "warning", "error"):
        raise ConfigError(
            f"--log-level must be debug, info, warning or error, got {args.log_level!r}"
        )
    event_loop = str(args.event_loop)
    if event_loop not in EVENT_LOOPS:  # a value from the environment skips argparse's check
        raise ConfigError(f"--event-loop must be uvloop or asyncio, got {event_loop!r}")
    progress = float(args.status_progress_period)
    if not progress >= 0:  # also rejects NaN
        raise ConfigError(f"--status-progress-period must be 0 or more seconds, got {progress}")
    kubeconfig = args.kubeconfig or None
    if kubeconfig and not Path(kubeconfig).is_file():
        raise ConfigError(
            f"--kubeconfig {kubeconfig!r} does not exist or is not a file "
            "(leave it empty to use the in-cluster configuration)"
        )
    for name in ("metrics_bind_address", "health_probe_bind_address"):
        value = str(getattr(args, name))
        if value not in ("", "0") and not value.rpartition(":")[2].isdigit():
            raise ConfigError(f"--{name.replace('_', '-')} must be host:port or 0, got {value!r}")
    metrics_secure, metrics_auth = (
        value if isinstance(value, bool) else _bool(value)
        for value in (args.metrics_secure, args.metrics_auth)
    )
    cert_dir = str(args.metrics_cert_path)
    if metrics_secure:
        if not cert_dir:
            raise ConfigError(
                "--metrics-secure needs --metrics-cert-path: a directory with the serving "
                f"certificate ({args.metrics_cert_name}) and key ({args.metrics_cert_key}); "
                "this controller does not generate a self-signed certificate"
            )
        for flag_name, file_name in (
            ("--metrics-cert-name", args.metrics_cert_name),
            ("--metrics-cert-key", args.metrics_cert_key),
        ):
            if not (Path(cert_dir) / str(file_name)).is_file():
                raise ConfigError(
                    f"--metrics-secure: {Path(cert_dir) / str(file_name)} does not exist or is "
                    f"not a file (--metrics-cert-path, {flag_name})"
                )
        metrics_at = str(args.metrics_bind_address)
        if metrics_at not in ("", "0") and metrics_at == str(args.health_probe_bind_address):
            raise ConfigError(
                "--metrics-secure needs a --metrics-bind-address other than "
                "--health-probe-bind-address: health probes stay plain HTTP"
            )
    batch_period = float(args.child_event_batch_period)
    if not 0 <= batch_period <= 60:  # also rejects NaN
        raise ConfigError(
            f"--child-event-batch-period must be between 0 and 60 seconds, got {batch_period}"
        )
    snapshot_warn_after = float(args.snapshot_warn_after)
    if not snapshot_warn_after > 0:  # also rejects NaN
        raise ConfigError(
            f"--snapshot-warn-after must be more than 0 seconds, got {snapshot_warn_after}"
        )
    managed_by = str(args.managed_by)
    if not valid_managed_by(managed_by):
        raise ConfigError(
            "--managed-by must be a domain-prefixed path (e.g. example.com/canary) of at most 63 "
            f"characters, as spec.managedBy, got {managed_by!r}"
        )
    try:
        feature_gates = features.parse(str(args.feature_gates))
    except features.FeatureGateError as error:
        raise ConfigError(f"--feature-gates: {error}") from None
    identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    namespaces = tuple(n.strip() for n in str(args.namespaces).split(",") if n.strip())
    return Config(
        kubeconfig=kubeconfig,
        service_account_dir=str(args.service_account_dir),
        namespaces=namespaces,
        workers=workers,
        kube_api_qps=float(args.kube_api_qps),
        kube_api_burst=int(args.kube_api_burst),
        leader_elect=leader_elect,
        leader_election_id=str(args.leader_election_id),
        leader_election_namespace=str(args.leader_election_namespace)
        or _default_namespace(str(args.service_account_dir)),
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        metrics_bind_address=str(args.metrics_bind_address),
        health_probe_bind_address=str(args.health_probe_bind_address),
        metrics_secure=metrics_secure,
        metrics_cert_path=cert_dir,
        metrics_cert_name=str(args.metrics_cert_name),
        metrics_cert_key=str(args.metrics_cert_key),
        metrics_auth=metrics_auth,
        log_level=str(args.log_level),
        identity=identity,
        shutdown_timeout=float(args.shutdown_timeout),
        status_progress_period=progress,
        child_event_batch_period=batch_period,
        snapshot_warn_after=snapshot_warn_after,
        managed_by=managed_by,
        feature_gates=feature_gates,
        event_loop=event_loop,
    )
