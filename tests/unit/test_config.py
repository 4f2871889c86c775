"""Flags, environment variables, and clear errors for bad values."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller import app
from controller.config import ConfigError, parse
from controller.jobset import api


def test_defaults_follow_controller_runtime() -> None:
    config = parse([], env={})
    # Upstream's: HTTPS on 8443, with authentication and authorization.
    assert config.metrics_bind_address == ":8443"
    assert (config.metrics_secure, config.metrics_auth) == (True, True)
    assert config.health_probe_bind_address == ":8081"
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)
    assert config.leader_elect is True
    assert config.namespaces == ()
    assert config.address(":8080") == ("0.0.0.0", 8080)
    assert config.address("0") is None
    # As the Job controller gathers pod events, a JobSet's child events are gathered briefly.
    assert config.child_event_batch_period == 0.25
    # Snapshots of large cloud volumes take many minutes: a warning only after half an hour.
    assert config.snapshot_warn_after == 1800


def test_environment_variables_set_flags_and_flags_win(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    env = {
        "STATEFUL_JOBSET_WORKERS": "9",
        "STATEFUL_JOBSET_NAMESPACES": "a, b",
        "STATEFUL_JOBSET_LEADER_ELECT": "false",
        "KUBECONFIG": str(kubeconfig),
    }
    config = parse(["--workers=3"], env=env)
    assert config.workers == 3
    assert config.namespaces == ("a", "b")
    assert config.leader_elect is False
    assert config.kubeconfig == str(kubeconfig)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kubeconfig=/does/not/exist"], "does not exist"),
        (["--workers=0"], "--workers must be positive"),
        (["--lease-duration=5", "--renew-deadline=10"], "--lease-duration > --renew-deadline"),
        (["--log-level=loud"], "--log-level must be"),
        (["--status-progress-period=-1"], "--status-progress-period must be 0 or more"),
        (["--status-progress-period=nan"], "--status-progress-period must be 0 or more"),
        (["--child-event-batch-period=-0.1"], "--child-event-batch-period must be between 0"),
        (["--child-event-batch-period=61"], "--child-event-batch-period must be between 0"),
        (["--child-event-batch-period=nan"], "--child-event-batch-period must be between 0"),
        (["--snapshot-warn-after=0"], "--snapshot-warn-after must be more than 0 seconds"),
        (["--snapshot-warn-after=nan"], "--snapshot-warn-after must be more than 0 seconds"),
        (["--metrics-bind-address=nonsense"], "must be host:port or 0"),
        (["--event-loop=trio"], "invalid command line"),
        (["--tls-min-version=VersionTLS11"], "--tls-min-version: VersionTLS11 is not supported"),
        (["--tls-min-version=1.3"], "--tls-min-version: unknown TLS version '1.3'"),
        (["--tls-cipher-suites=TLS_NOPE"], "--tls-cipher-suites: unknown cipher suite TLS_NOPE"),
        (
            ["--tls-min-version=VersionTLS13", "--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA"],
            "--tls-cipher-suites: cipher suites may not be given with VersionTLS13",
        ),
        (["--zap-log-level=loud"], "--zap-log-level: invalid log level 'loud'"),
        (["--zap-log-level=0"], "--zap-log-level: invalid log level '0'"),
        (["--zap-encoder=xml"], "--zap-encoder: invalid encoder value 'xml'"),
        (["--zap-stacktrace-level=debug"], "--zap-stacktrace-level: invalid stacktrace level"),
        (["--zap-time-encoding=nano"], "--zap-time-encoding: invalid time-encoding value 'nano'"),
        (["--log-level=info", "--zap-log-level=error"], "--log-level says info, --zap-log-"),
        (["--zap-devel=maybe"], "invalid command line"),
        (["--managed-by=canary"], "--managed-by must be a domain-prefixed path"),
        (["--managed-by="], "--managed-by must be a domain-prefixed path"),
        (["--managed-by=/canary"], "--managed-by must be a domain-prefixed path"),
        (["--managed-by=Example.com/canary"], "--managed-by must be a domain-prefixed path"),
        (["--managed-by=example.com/"], "--managed-by must be a domain-prefixed path"),
        (["--managed-by=example.com/a b"], "--managed-by must be a domain-prefixed path"),
        (["--managed-by=example.com/" + "x" * 52], "--managed-by must be a domain-prefixed path"),
    ],
)
def test_bad_values_are_named(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(argv, env={})


def test_managed_by_defaults_to_upstream_and_reads_flag_and_environment() -> None:
    assert parse([], env={}).managed_by == api.CONTROLLER_NAME
    assert parse(["--managed-by=example.com/canary"], env={}).managed_by == "example.com/canary"
    env = {"STATEFUL_JOBSET_MANAGED_BY": "example.com/from-env"}
    assert parse([], env=env).managed_by == "example.com/from-env"
    assert parse(["--managed-by=example.com/flag"], env=env).managed_by == "example.com/flag"
    # The longest the CRD accepts, and the path characters it allows.
    longest = "example.com/" + "x" * 51
    assert parse([f"--managed-by={longest}"], env={}).managed_by == longest
    odd = "kueue.x-k8s.io/multi~kueue/a:b=c"
    assert parse([f"--managed-by={odd}"], env={}).managed_by == odd


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"STATEFUL_JOBSET_WORKERS": "x"},
            "STATEFUL_JOBSET_WORKERS (--workers): invalid value 'x'",
        ),
        ({"STATEFUL_JOBSET_WORKERS": "0"}, "STATEFUL_JOBSET_WORKERS (--workers) must be positive"),
        (
            {"STATEFUL_JOBSET_KUBE_API_QPS": "fast"},
            "STATEFUL_JOBSET_KUBE_API_QPS (--kube-api-qps): invalid value 'fast': not a number",
        ),
        (
            {"STATEFUL_JOBSET_LEADER_ELECT": "maybe"},
            "STATEFUL_JOBSET_LEADER_ELECT (--leader-elect): invalid value 'maybe'",
        ),
        (
            {"STATEFUL_JOBSET_LEASE_DURATION": "5"},
            "leader election needs STATEFUL_JOBSET_LEASE_DURATION (--lease-duration) > "
            "--renew-deadline",
        ),
        (
            {"STATEFUL_JOBSET_EVENT_LOOP": "trio"},
            "STATEFUL_JOBSET_EVENT_LOOP (--event-loop): 'trio' is not one of uvloop, asyncio",
        ),
        (
            {"STATEFUL_JOBSET_MANAGED_BY": "canary"},
            "STATEFUL_JOBSET_MANAGED_BY (--managed-by) must be a domain-prefixed path",
        ),
        (
            {"STATEFUL_JOBSET_FEATURE_GATES": "Nope=true"},
            "STATEFUL_JOBSET_FEATURE_GATES (--feature-gates): unknown feature gate 'Nope'",
        ),
        (
            {"STATEFUL_JOBSET_ZAP_LOG_LEVEL": "loud"},
            "STATEFUL_JOBSET_ZAP_LOG_LEVEL (--zap-log-level): invalid log level 'loud'",
        ),
        (
            {"STATEFUL_JOBSET_METRICS_BIND_ADDRESS": "nonsense"},
            "STATEFUL_JOBSET_METRICS_BIND_ADDRESS (--metrics-bind-address) must be host:port",
        ),
        (
            {"KUBECONFIG": "/does/not/exist"},
            "KUBECONFIG (--kubeconfig) '/does/not/exist' does not exist",
        ),
    ],
)
def test_bad_environment_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse([], env=env)
    assert message in str(raised.value)


def test_a_bad_variable_is_refused_even_when_the_flag_is_given() -> None:
    """A wrong variable in the pod's environment is a mistake to fix, not to shadow."""
    with pytest.raises(ConfigError, match="STATEFUL_JOBSET_WORKERS"):
        parse(["--workers=3"], env={"STATEFUL_JOBSET_WORKERS": "three"})


def test_secure_metrics_are_on_and_plain_http_is_an_opt_out() -> None:
    config = parse([], env={})
    assert (config.metrics_secure, config.metrics_auth, config.metrics_cert_path) == (
        True,
        True,
        "",  # no certificate given: self-signed (metricstls.certificate_source)
    )
    assert (config.metrics_cert_name, config.metrics_cert_key) == ("tls.crt", "tls.key")
    plain = parse(["--metrics-secure=false"], env={})
    assert (plain.metrics_secure, plain.metrics_auth) == (False, False)  # auth follows
    tokens_in_clear = parse(["--metrics-secure=false", "--metrics-auth"], env={})
    assert (tokens_in_clear.metrics_secure, tokens_in_clear.metrics_auth) == (False, True)
    no_auth = parse(["--metrics-auth=false"], env={})
    assert (no_auth.metrics_secure, no_auth.metrics_auth) == (True, False)


def test_secure_metrics_flags_and_environment(tmp_path: Path) -> None:
    (tmp_path / "serving.pem").write_text("cert")
    (tmp_path / "tls.key").write_text("key")
    env = {
        "STATEFUL_JOBSET_METRICS_SECURE": "true",
        "STATEFUL_JOBSET_METRICS_CERT_PATH": str(tmp_path),
        "STATEFUL_JOBSET_METRICS_AUTH": "yes",
    }
    config = parse(["--metrics-cert-name=serving.pem"], env=env)
    assert config.metrics_secure and config.metrics_auth
    assert config.metrics_cert_path == str(tmp_path)
    assert config.metrics_cert_name == "serving.pem"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metrics-cert-path={dir}/none"], r"--metrics-cert-path: .*none/tls\.crt does not"),
        (
            ["--metrics-secure=true", "--metrics-cert-path={dir}", "--metrics-cert-key=k.pem"],
            r"k\.pem does not exist",
        ),
        (
            [
                "--metrics-secure=true",
                "--metrics-cert-path={dir}",
                "--metrics-bind-address=:9000",
                "--health-probe-bind-address=:9000",
            ],
            "HTTPS metrics .* need a --metrics-bind-address other than",
        ),
        (["--metrics-auth=maybe"], "invalid command line"),
    ],
)
def test_bad_secure_metrics_settings_are_named(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    (tmp_path / "tls.crt").write_text("cert")
    (tmp_path / "tls.key").write_text("key")
    with pytest.raises(ConfigError, match=message):
        parse([a.format(dir=tmp_path) for a in argv], env={})


def test_event_loop_is_uvloop_unless_asked_otherwise() -> None:
    assert parse([], env={}).event_loop == "uvloop"
    assert parse(["--event-loop=asyncio"], env={}).event_loop == "asyncio"
    assert parse([], env={"STATEFUL_JOBSET_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"
    with pytest.raises(ConfigError, match="STATEFUL_JOBSET_EVENT_LOOP \\(--event-loop\\)"):
        parse([], env={"STATEFUL_JOBSET_EVENT_LOOP": "trio"})


@pytest.mark.parametrize("name", ["uvloop", "asyncio"])
def test_the_controller_runs_on_the_event_loop_named(name: str) -> None:
    async def running_loop() -> str:
        return app.loop_name(asyncio.get_running_loop())

    with asyncio.Runner(loop_factory=app.event_loop_factory(name)) as runner:
        assert runner.run(running_loop()) == name


async def test_async_tests_run_on_the_controllers_default_loop() -> None:
    # tests/conftest.py: the in-process controllers of the integration tier run where it does.
    assert app.loop_name(asyncio.get_running_loop()) == "uvloop"


def test_colocate_claims_is_auto_unless_asked_otherwise() -> None:
    assert parse([], env={}).colocate_claims == "auto"
    assert parse(["--colocate-claims=never"], env={}).colocate_claims == "never"
    env = {"STATEFUL_JOBSET_COLOCATE_CLAIMS": "always"}
    assert parse([], env=env).colocate_claims == "always"
    assert parse(["--colocate-claims=auto"], env=env).colocate_claims == "auto"
    with pytest.raises(
        ConfigError,
        match=r"STATEFUL_JOBSET_COLOCATE_CLAIMS \(--colocate-claims\): 'sometimes' is not one of "
        "auto, always, never",
    ):
        parse([], env={"STATEFUL_JOBSET_COLOCATE_CLAIMS": "sometimes"})


def test_colocate_claims_modes_are_the_volumes_own() -> None:
    from controller.config import COLOCATE_CLAIMS
    from controller.jobset.volumes.model import COLOCATE_MODES

    assert COLOCATE_CLAIMS == COLOCATE_MODES
