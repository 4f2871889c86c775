"""Upstream JobSet's manager command lines and Configuration files parse to the Config they mean
here: every install method of upstream v0.12.0 (its chart, its kustomize manifests, its e2e
setup), upstream's own flags, one dash or two, and every field of its Configuration file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.config import Config, ConfigError, parse
from controller.runtime.logs import LogFormat
from tests.support import upstreamcli

NO_WEBHOOK = (
    "this controller serves no webhooks (the CRD's schema and a ValidatingAdmissionPolicy check "
    "JobSets in the API server)"
)


def _parse(tmp_path: Path, args: tuple[str, ...], config: str | None) -> Config:
    """``args`` with upstream's config path replaced by a file holding ``config``."""
    path = tmp_path / "controller_manager_config.yaml"
    if config is not None:
        path.write_text(config)
    argv = [a.replace("/controller_manager_config.yaml", str(path)) for a in args]
    return parse(argv, env={})


# (upstream's args, its config file, the Config's fields expected; ignored fields)
CASES: dict[str, tuple[tuple[str, ...], str | None, dict[str, Any], tuple[str, ...]]] = {
    "chart (default values)": (
        upstreamcli.CHART_ARGS,
        upstreamcli.CHART_CONFIG,
        {
            "leader_elect": True,
            "kube_api_qps": 500.0,
            "kube_api_burst": 500,
            "log_level": "debug",  # --zap-log-level=2: a debug verbosity
            "log_format": LogFormat(),
            "metrics_bind_address": ":8443",
            "metrics_secure": True,
            "metrics_auth": True,
        },
        ("internalCertManagement",),
    ),
    "chart (cert-manager, no leader election, lower QPS)": (
        upstreamcli.CHART_ARGS,
        upstreamcli.CHART_CONFIG_CERT_MANAGER,
        {"leader_elect": False, "kube_api_qps": 50.0, "kube_api_burst": 100, "log_level": "debug"},
        ("internalCertManagement",),
    ),
    "kustomize base (manager.yaml)": (
        upstreamcli.KUSTOMIZE_BASE_ARGS,
        None,
        {"leader_elect": True, "log_level": "info", "config_file": ""},
        (),
    ),
    "kustomize release (config patch)": (
        upstreamcli.KUSTOMIZE_DEFAULT_ARGS,
        upstreamcli.KUSTOMIZE_CONFIG,
        {"leader_elect": True, "log_level": "debug", "kube_api_qps": 500.0},
        ("internalCertManagement",),
    ),
    "upstream's e2e setup (tls)": (
        ("--config=/controller_manager_config.yaml",),
        upstreamcli.E2E_CONFIG,
        {
            "tls_min_version": "VersionTLS12",
            "tls_cipher_suites": (
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            ),
        },
        ("internalCertManagement",),
    ),
    "every field of the Configuration": (
        ("--config=/controller_manager_config.yaml",),
        upstreamcli.FULL_CONFIG,
        {
            "leader_elect": True,
            "lease_duration": 30.0,
            "renew_deadline": 20.0,
            "retry_period": 5.0,
            "leader_election_id": "my-lease",
            "leader_election_namespace": "jobset-system",
            "metrics_bind_address": ":9443",
            "metrics_cert_path": "/etc/metrics-certs",
            "health_probe_bind_address": ":9081",
            "kube_api_qps": 100.5,
            "kube_api_burst": 200,
            "tls_min_version": "VersionTLS13",
        },
        ("webhook", "internalCertManagement"),
    ),
    "upstream's main.go flags": (
        (
            "--metrics-bind-address=:8443",
            "--health-probe-bind-address=:8081",
            "--leader-elect=false",
            "--kube-api-qps=50",
            "--kube-api-burst=100",
            "--zap-devel",
            "--zap-encoder=json",
            "--zap-log-level=info",
            "--zap-stacktrace-level=error",
            "--zap-time-encoding=rfc3339nano",
        ),
        None,
        {
            "leader_elect": False,
            "kube_api_qps": 50.0,
            "kube_api_burst": 100,
            "log_level": "info",
            "log_format": LogFormat("json", "rfc3339nano", "error"),
        },
        (),
    ),
    "Go's single dash": (
        ("-leader-elect=false", "-zap-log-level", "error", "-kube-api-burst=7"),
        None,
        {"leader_elect": False, "log_level": "error", "kube_api_burst": 7},
        (),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_upstreams_command_lines_and_files_mean_the_same_here(tmp_path: Path, case: str) -> None:
    args, config, expected, ignored = CASES[case]
    if "metrics_cert_path" in expected:
        # The folder must hold the certificate: made where the file says, under tmp_path.
        folder = tmp_path / "etc-metrics-certs"
        folder.mkdir()
        (folder / "tls.crt").write_text("cert")
        (folder / "tls.key").write_text("key")
        config = (config or "").replace("/etc/metrics-certs", str(folder))
        expected = {**expected, "metrics_cert_path": str(folder)}
    found = _parse(tmp_path, args, config)
    assert {name: getattr(found, name) for name in expected} == expected
    assert tuple(i.field for i in found.ignored_settings) == ignored
    for setting in found.ignored_settings:
        assert setting.reason == NO_WEBHOOK
    if config is not None:
        assert found.config_file.endswith("controller_manager_config.yaml")


def test_the_file_turns_on_gates(tmp_path: Path) -> None:
    config = upstreamcli.FULL_CONFIG.replace("  certDir: /etc/metrics-certs\n", "")
    found = _parse(tmp_path, ("--config=/controller_manager_config.yaml",), config)
    assert found.feature_gates.enabled("RestartJob")
    assert not found.feature_gates.enabled("ElasticJobSet")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--leader-elect"], True),
        (["--leader-elect=true"], True),
        (["--leader-elect=false"], False),
        (["--leader-elect", "false"], False),
        (["--leader-elect=f"], False),
        (["--leader-elect=T"], True),
        (["--leader-elect=0"], False),
        (["--leader-elect=1"], True),
        (["--leader-elect=FALSE"], False),
        (["-leader-elect"], True),
        (["--leader-elect", "--workers=2"], True),
        ([], True),
    ],
)
def test_boolean_flags_alone_mean_true(argv: list[str], expected: bool) -> None:
    assert parse(argv, env={}).leader_elect is expected


def test_every_boolean_flag_takes_no_value() -> None:
    bare = parse(["--metrics-secure", "--metrics-auth", "--zap-devel"], env={})
    assert bare.metrics_secure and bare.metrics_auth
    assert bare.log_format.encoder == "console"


@pytest.mark.parametrize(
    ("argv", "env", "config", "expected"),
    [
        # A flag beats the file; an environment variable does too.
        (["--leader-elect=false"], {}, "leaderElection: {leaderElect: true}", False),
        (
            [],
            {"STATEFUL_JOBSET_LEADER_ELECT": "false"},
            "leaderElection: {leaderElect: true}",
            False,
        ),
        # Set to its default value, the flag still wins (upstream tracks the flags given).
        (["--leader-elect=true"], {}, "leaderElection: {leaderElect: false}", True),
        ([], {}, "leaderElection: {leaderElect: false}", False),
    ],
)
def test_flags_and_variables_override_the_file(
    tmp_path: Path, argv: list[str], env: dict[str, str], config: str, expected: bool
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n{config}\n")
    assert parse([*argv, f"--config={path}"], env=env).leader_elect is expected


def test_a_file_value_is_named_by_its_field(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n"
        "clientConnection: {qps: 0}\n"
    )
    with pytest.raises(
        ConfigError, match=rf"clientConnection\.qps in {path} \(--kube-api-qps\) must be positive"
    ):
        parse([f"--config={path}"], env={})


def test_a_certificate_folder_without_the_certificate_is_refused(tmp_path: Path) -> None:
    """controller-runtime would serve a self-signed certificate instead; a folder named on
    purpose and found empty is more likely a mistake (a Secret not mounted) than a wish."""
    with pytest.raises(
        ConfigError, match=r"metrics\.certDir in .* \(--metrics-cert-path\): .*tls\.crt does not"
    ):
        _parse(tmp_path, ("--config=/controller_manager_config.yaml",), upstreamcli.FULL_CONFIG)


def test_the_config_file_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(upstreamcli.CHART_CONFIG_CERT_MANAGER)
    found = parse([], env={"STATEFUL_JOBSET_CONFIG": str(path)})
    assert (found.kube_api_qps, found.leader_elect) == (50.0, False)
    with pytest.raises(ConfigError, match=r"STATEFUL_JOBSET_CONFIG \(--config\): .*cannot be read"):
        parse([], env={"STATEFUL_JOBSET_CONFIG": str(tmp_path / "missing.yaml")})
