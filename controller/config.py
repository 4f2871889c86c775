"""Command-line flags, each with an environment-variable equivalent.

Every flag ``--some-flag`` can also be set as ``STATEFUL_JOBSET_SOME_FLAG``; the flag wins. Names
and defaults follow controller-runtime's where the concept is the same. Upstream JobSet's
manager's command line works too: its flags, boolean flags without a value, one dash or two
(flagorigins.py), ``--config`` with its Configuration file (configfile.py; the flags and variables
win over it) and controller-runtime's ``--zap-*`` logging flags (zapflags.py).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from controller import configfile, features, flagorigins, zapflags
from controller import version as versionmod
from controller.features import DEFAULT as DEFAULT_GATES
from controller.features import FeatureGates
from controller.jobset.api import CONTROLLER_NAME as UPSTREAM_MANAGED_BY
from controller.runtime import metricstls
from controller.runtime.logs import LogFormat

DEFAULT_LOG_FORMAT = LogFormat()

ENV_PREFIX = "STATEFUL_JOBSET_"
EVENT_LOOPS = ("uvloop", "asyncio")
COLOCATE_CLAIMS = ("auto", "always", "never")
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
    # Start even while upstream JobSet's controller runs and serves managed_by too.
    share_upstream_managed_by: bool = False
    feature_gates: FeatureGates = DEFAULT_GATES
    # "uvloop" or "asyncio": which event loop runs the controller (app.event_loop_factory).
    event_loop: str = "uvloop"
    # Whether pods that share a ReadWriteOnce claim are kept on one node: "auto" (where the
    # storage attaches volumes to nodes), "always" or "never"; a JobSet's annotation overrides.
    colocate_claims: str = "auto"
    # The metrics server's TLS (upstream's tls settings): VersionTLS12/13, Go's suite names.
    tls_min_version: str = "VersionTLS12"
    tls_cipher_suites: tuple[str, ...] = ()
    # Line format, time format, call stacks (--zap-* flags).
    log_format: LogFormat = DEFAULT_LOG_FORMAT
    # Upstream's Configuration file read (--config), and what in it was ignored (logged at start).
    config_file: str = ""
    ignored_settings: tuple[configfile.Ignored, ...] = ()

    def address(self, value: str) -> tuple[str, int] | None:
        """``host:port`` → (host, port); ``0`` or empty disables the endpoint."""
        if value in ("", "0"):
            return None
        host, _, port = value.rpartition(":")
        return (host or "0.0.0.0", int(port))


def _env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def _bool(value: str | bool) -> bool:
    """Go's strconv.ParseBool values (1, t, true, 0, f, false, any case), and yes/no, on/off."""
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in ("1", "t", "true", "yes", "on"):
        return True
    if lowered in ("0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


class _Parser(argparse.ArgumentParser):
    """The flags, and the environment variables that set them (dest → (variable, value))."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.from_env: dict[str, tuple[str, str]] = {}


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


def build_parser(env: Mapping[str, str] | None = None) -> _Parser:
    env = os.environ if env is None else env
    parser = _Parser(
        prog="python -m controller",
        description="Stateful JobSet controller: runs JobSets and manages their persistent "
        f"volumes. Every flag --x-y can also be set as the environment variable {ENV_PREFIX}X_Y.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )

    parser.add_argument("--version", action=_VersionAction)

    def flag(name: str, help_text: str, default: object, **kwargs: object) -> None:
        from_env = env.get(_env_name(name))
        if kwargs.get("type") is _bool:
            # A boolean flag alone means true (--leader-elect), as Go's flag package has it.
            kwargs = {"nargs": "?", "const": True, "metavar": "true|false", **kwargs}
        action = parser.add_argument(
            name,
            help=f"{help_text} [env {_env_name(name)}]",
            default=from_env if from_env is not None else default,
            **kwargs,  # type: ignore[arg-type]
        )
        if from_env is not None:
            parser.from_env[action.dest] = (_env_name(name), from_env)

    flag("--config", "upstream JobSet's Configuration file (config.jobset.x-k8s.io/v1alpha1, "
         "what upstream's --config reads): its settings apply unless a flag or environment "
         "variable sets them; its webhook and internalCertManagement are ignored", "")  # fmt: skip
    flag("--kubeconfig", "kubeconfig file; empty means in-cluster configuration "
         "(KUBERNETES_SERVICE_HOST/PORT and the service-account files)",
         env.get("KUBECONFIG", ""))  # fmt: skip
    if _env_name("--kubeconfig") not in env and env.get("KUBECONFIG"):
        parser.from_env["kubeconfig"] = ("KUBECONFIG", env["KUBECONFIG"])
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
    flag("--metrics-bind-address", "host:port for /metrics; 0 disables", ":8443")
    flag("--health-probe-bind-address", "host:port for /healthz and /readyz; 0 disables", ":8081")
    flag("--metrics-secure", "serve /metrics over HTTPS: with the certificate in "
         "--metrics-cert-path (re-read when it changes), else the one in "
         f"{metricstls.DEFAULT_CERT_DIR_HELP} if there, else a self-signed one made at start (as "
         "upstream); false serves plain HTTP", True,
         type=_bool)  # fmt: skip
    flag("--metrics-cert-path", "directory holding the metrics serving certificate and key "
         "(e.g. a mounted Secret)", "")  # fmt: skip
    flag("--metrics-cert-name", "certificate file (PEM, chain) in --metrics-cert-path", "tls.crt")
    flag("--metrics-cert-key", "private key file (PEM) in --metrics-cert-path", "tls.key")
    flag("--metrics-auth", "require a bearer token on /metrics, authenticated with a TokenReview "
         "and authorized (get on the non-resource URL /metrics) with a SubjectAccessReview, as "
         "upstream's secure metrics endpoint; answers cached (token 1 min, allowed 5 min, denied "
         "30 s). Needs create on tokenreviews and subjectaccessreviews. Unset: as "
         "--metrics-secure", None,
         type=_bool)  # fmt: skip
    flag("--tls-min-version", "oldest TLS version /metrics accepts: VersionTLS12 or "
         "VersionTLS13 (upstream's tls.minVersion)", "VersionTLS12")  # fmt: skip
    flag("--tls-cipher-suites", "comma-separated TLS 1.2 cipher suites /metrics offers, by Go's "
         "names (upstream's tls.cipherSuites); empty: the TLS library's defaults", "")  # fmt: skip
    flag("--log-level", "debug, info, warning or error", "info")
    # controller-runtime's zap flags (upstream's manager takes them); zapflags.py maps them.
    flag("--zap-devel", "zap's development defaults: console lines, debug, call stacks from "
         "warning (false: JSON, info, stacks from error)", None, type=_bool)  # fmt: skip
    flag("--zap-encoder", "json or console", None)
    flag("--zap-log-level", "debug, info, error, panic, or an integer > 0 (debug); as "
         "--log-level", None)  # fmt: skip
    flag("--zap-stacktrace-level", "info, error or panic: lines at that level and above carry "
         "their call stack", None)  # fmt: skip
    flag("--zap-time-encoding", "epoch, millis, nanos, iso8601, rfc3339 or rfc3339nano "
         "(default: ISO 8601 in UTC, microseconds)", None)  # fmt: skip
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
    flag("--share-upstream-managed-by", "start even while upstream JobSet's controller runs in "
         "the cluster (its Lease, Deployment or webhooks found at start-up) and serves the same "
         "--managed-by value (its reserved one): both then run the same JobSets. Without it the "
         "controller refuses to start, naming what it found", False,
         type=_bool)  # fmt: skip
    flag("--feature-gates", "upstream JobSet's alpha features, e.g. RestartJob=true,"
         "ElasticJobSet=true (both off by default, as upstream); the installed CRD must be the "
         "one generated with the same gates (components/alpha-features has every gate on)",
         "")  # fmt: skip
    flag("--event-loop", "uvloop (libuv's event loop: less CPU for the same work, "
         "bench/HISTORY.md) or asyncio (the standard library's)", "uvloop",
         choices=EVENT_LOOPS)  # fmt: skip
    flag("--colocate-claims", "keep the pods that share a ReadWriteOnce claim at once on one node "
         "(a required pod affinity of the Jobs created): auto where the claim's storage attaches "
         "its volumes to a node (its class's CSIDriver, attachRequired; a driver without one, "
         "or a class that cannot be read, is taken to attach), always, or never. The JobSet "
         "annotation jobset.sigs.k8s.io/colocate-claims (true, false) overrides it", "auto",
         choices=COLOCATE_CLAIMS)  # fmt: skip
    flag("--shutdown-timeout", "seconds to let in-flight reconciles finish on SIGTERM", 20.0,
         type=float)  # fmt: skip
    return parser


def _check_environment(parser: _Parser) -> None:
    """An environment variable's value is checked as the flag's would be, and a bad one named:
    argparse would name only the flag."""
    actions = {action.dest: action for action in parser._actions}
    for dest, (variable, raw) in parser.from_env.items():
        action = actions[dest]
        flag = action.option_strings[0]
        value: object = raw
        if callable(action.type):
            try:
                value = action.type(raw)
            except (argparse.ArgumentTypeError, TypeError, ValueError) as error:
                detail = str(error) if isinstance(error, argparse.ArgumentTypeError) else (
                    f"not {'an integer' if action.type is int else 'a number'}"
                )  # fmt: skip
                raise ConfigError(f"{variable} ({flag}): invalid value {raw!r}: {detail}") from None
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(str(c) for c in action.choices)
            raise ConfigError(f"{variable} ({flag}): {raw!r} is not one of {choices}")


def parse(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    parser = build_parser(env)
    _check_environment(parser)
    args_in = flagorigins.single_dash(sys.argv[1:] if argv is None else argv, parser)
    try:
        args = parser.parse_args(args_in)
    except SystemExit as exit_:
        if exit_.code == 0:
            raise
        raise ConfigError("invalid command line (see the message above)") from exit_
    origins = flagorigins.Origins.of(parser)
    for dest, (variable, _) in parser.from_env.items():
        origins.set(dest, flagorigins.ENVIRONMENT, variable)
    for dest in flagorigins.given_on_command_line(parser, args_in):
        origins.set(dest, flagorigins.COMMAND_LINE)
    ignored: tuple[configfile.Ignored, ...] = ()
    if args.config:
        try:
            from_file = configfile.load(str(args.config))
        except configfile.ConfigFileError as error:
            raise ConfigError(f"{origins.name('config')}: {error}") from None
        for setting in from_file.settings:
            if origins.rank(setting.dest) < flagorigins.FILE:
                setattr(args, setting.dest, setting.value)
                origins.set(setting.dest, flagorigins.FILE, f"{setting.field} in {args.config}")
        ignored = from_file.ignored
    return from_args(args, origins, ignored)


def from_args(
    args: argparse.Namespace,
    origins: flagorigins.Origins | None = None,
    ignored: tuple[configfile.Ignored, ...] = (),
) -> Config:
    """``args`` checked; ``origins`` say where each value came from, for the messages."""
    origins = origins or flagorigins.Origins()
    named = origins.name

    def positive(name: str, value: float) -> None:
        if value <= 0:
            raise ConfigError(f"{named(name.replace('-', '_'))} must be positive, got {value}")

    workers = int(args.workers)
    positive("workers", workers)
    positive("kube-api-qps", float(args.kube_api_qps))
    positive("kube-api-burst", int(args.kube_api_burst))
    leader_elect = _bool(args.leader_elect)
    lease, renew, retry = (
        float(args.lease_duration),
        float(args.renew_deadline),
        float(args.retry_period),
    )
    if leader_elect and not lease > renew > retry * 1.2 > 0:
        raise ConfigError(
            f"leader election needs {named('lease_duration')} > {named('renew_deadline')} > "
            f"1.2 x {named('retry_period')} (got {lease}, {renew}, {retry})"
        )
    log_level, log_format = _logging(args, origins)
    event_loop = str(args.event_loop)
    if event_loop not in EVENT_LOOPS:
        raise ConfigError(f"{named('event_loop')} must be uvloop or asyncio, got {event_loop!r}")
    progress = float(args.status_progress_period)
    if not progress >= 0:  # also rejects NaN
        raise ConfigError(
            f"{named('status_progress_period')} must be 0 or more seconds, got {progress}"
        )
    kubeconfig = args.kubeconfig or None
    if kubeconfig and not Path(kubeconfig).is_file():
        raise ConfigError(
            f"{named('kubeconfig')} {kubeconfig!r} does not exist or is not a file "
            "(leave it empty to use the in-cluster configuration)"
        )
    for name in ("metrics_bind_address", "health_probe_bind_address"):
        value = str(getattr(args, name))
        if value not in ("", "0") and not value.rpartition(":")[2].isdigit():
            raise ConfigError(f"{named(name)} must be host:port or 0, got {value!r}")
    metrics_secure = _bool(args.metrics_secure)
    # Unset, authentication follows HTTPS, as in kubebuilder's scaffold (secure: both on).
    metrics_auth = metrics_secure if args.metrics_auth is None else _bool(args.metrics_auth)
    cert_dir = str(args.metrics_cert_path)
    if metrics_secure:
        if cert_dir:
            for dest, file_name in (
                ("metrics_cert_name", args.metrics_cert_name),
                ("metrics_cert_key", args.metrics_cert_key),
            ):
                if not (Path(cert_dir) / str(file_name)).is_file():
                    raise ConfigError(
                        f"{named('metrics_cert_path')}: {Path(cert_dir) / str(file_name)} does "
                        f"not exist or is not a file ({origins.flag(dest)})"
                    )
        metrics_at = str(args.metrics_bind_address)
        if metrics_at not in ("", "0") and metrics_at == str(args.health_probe_bind_address):
            raise ConfigError(
                f"HTTPS metrics ({named('metrics_secure')}) need a "
                f"{named('metrics_bind_address')} other than "
                f"{named('health_probe_bind_address')}: health probes stay plain HTTP"
            )
    colocate_claims = str(args.colocate_claims)
    if colocate_claims not in COLOCATE_CLAIMS:  # a value from the environment skips argparse's
        raise ConfigError(
            f"{named('colocate_claims')} must be auto, always or never, got {colocate_claims!r}"
        )
    tls_suites = tuple(s.strip() for s in str(args.tls_cipher_suites).split(",") if s.strip())
    try:
        tls = metricstls.tls_options(str(args.tls_min_version), tls_suites)
    except metricstls.TlsOptionsError as error:
        raise ConfigError(f"{named(error.setting)}: {error}") from None
    batch_period = float(args.child_event_batch_period)
    if not 0 <= batch_period <= 60:  # also rejects NaN
        raise ConfigError(
            f"{named('child_event_batch_period')} must be between 0 and 60 seconds, "
            f"got {batch_period}"
        )
    snapshot_warn_after = float(args.snapshot_warn_after)
    if not snapshot_warn_after > 0:  # also rejects NaN
        raise ConfigError(
            f"{named('snapshot_warn_after')} must be more than 0 seconds, got {snapshot_warn_after}"
        )
    managed_by = str(args.managed_by)
    share = args.share_upstream_managed_by
    share_upstream_managed_by = share if isinstance(share, bool) else _bool(share)
    if not valid_managed_by(managed_by):
        raise ConfigError(
            f"{named('managed_by')} must be a domain-prefixed path (e.g. example.com/canary) of "
            f"at most 63 characters, as spec.managedBy, got {managed_by!r}"
        )
    try:
        feature_gates = features.parse(str(args.feature_gates))
    except features.FeatureGateError as error:
        raise ConfigError(f"{named('feature_gates')}: {error}") from None
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
        log_level=log_level,
        identity=identity,
        shutdown_timeout=float(args.shutdown_timeout),
        status_progress_period=progress,
        child_event_batch_period=batch_period,
        snapshot_warn_after=snapshot_warn_after,
        managed_by=managed_by,
        share_upstream_managed_by=share_upstream_managed_by,
        feature_gates=feature_gates,
        event_loop=event_loop,
        colocate_claims=colocate_claims,
        tls_min_version=tls.min_version,
        tls_cipher_suites=tls.cipher_suites,
        log_format=log_format,
        config_file=str(args.config),
        ignored_settings=ignored,
    )


def _logging(args: argparse.Namespace, origins: flagorigins.Origins) -> tuple[str, LogFormat]:
    """The level and format from --log-level and the --zap-* flags. Where both --log-level and
    --zap-log-level are set, the one from the stronger origin (command line, environment, file)
    wins; from the same one, they must agree."""
    zap = zapflags.ZapFlags(
        devel=None if args.zap_devel is None else _bool(args.zap_devel),
        encoder=args.zap_encoder,
        log_level=args.zap_log_level,
        stacktrace_level=args.zap_stacktrace_level,
        time_encoding=args.zap_time_encoding,
    )
    try:
        zap_level, log_format = zapflags.resolve(zap)
    except zapflags.ZapFlagError as error:
        raise ConfigError(f"{origins.name(error.flag[2:].replace('-', '_'))}: {error}") from None
    level = str(args.log_level)
    if level not in ("debug", "info", "warning", "error"):
        raise ConfigError(
            f"{origins.name('log_level')} must be debug, info, warning or error, got {level!r}"
        )
    if zap_level is not None:
        # --zap-log-level's level, or the one --zap-devel implies (which an explicit
        # --log-level of the same origin overrides, as --zap-log-level would).
        source = "zap_log_level" if args.zap_log_level is not None else "zap_devel"
        own, theirs = origins.rank("log_level"), origins.rank(source)
        if theirs > own:
            level = zap_level
        elif theirs == own and source == "zap_log_level" and zap_level != level:
            raise ConfigError(
                f"{origins.name('log_level')} says {level}, {origins.name(source)} says "
                f"{args.zap_log_level}: set one of them"
            )
    return level, log_format
