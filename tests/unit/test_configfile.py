"""Upstream's Configuration file: what it sets, what is ignored, what is refused and how."""

from __future__ import annotations

import pytest

from controller.configfile import ConfigFileError, go_duration, parse

HEAD = "apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n"


def _settings(body: str) -> dict[str, object]:
    return {s.dest: s.value for s in parse(HEAD + body, "f.yaml").settings}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("2us", 2e-6),
        ("3µs", 3e-6),
        ("10ns", 1e-8),
        ("0", 0.0),
        ("-2s", -2.0),
        ("+2s", 2.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1x", ".s", "1s2", "1 s", "-"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        go_duration(text)


def test_fields_become_flag_values() -> None:
    assert _settings(
        "leaderElection: {leaderElect: false, leaseDuration: 1m, resourceName: x}\n"
        "metrics: {bindAddress: '0'}\nhealth: {healthProbeBindAddress: ':1'}\n"
        "clientConnection: {qps: 7, burst: 9}\nfeatureGates: {ElasticJobSet: true}\n"
        "tls: {minVersion: VersionTLS13}\n"
    ) == {
        "leader_elect": False,
        "lease_duration": 60.0,
        "leader_election_id": "x",
        "metrics_bind_address": "0",
        "health_probe_bind_address": ":1",
        "kube_api_qps": 7.0,
        "kube_api_burst": 9,
        "feature_gates": "ElasticJobSet=true",
        "tls_min_version": "VersionTLS13",
    }


def test_upstreams_unset_values_leave_the_default() -> None:
    """Empty strings and zero durations are "unset" upstream (its defaulting fills them)."""
    assert (
        _settings(
            "leaderElection: {resourceName: '', leaseDuration: 0s, resourceLock: ''}\n"
            "metrics: {bindAddress: '', certDir: ''}\nhealth: {}\nwebhook: {}\ntls: null\n"
        )
        == {}
    )


def test_tls_follows_its_gate() -> None:
    off = parse(HEAD + "featureGates: {TLSOptions: false}\ntls: {minVersion: VersionTLS13}\n")
    assert off.settings == ()
    assert [(i.field, i.reason) for i in off.ignored] == [
        ("tls", "the feature gate TLSOptions is off")
    ]
    on = _settings("featureGates: {TLSOptions: true}\ntls: {cipherSuites: [A, B]}\n")
    assert on == {"tls_cipher_suites": "A,B"}  # checked with the flag (metricstls)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("bogus: 1\n", r"f\.yaml: unknown field bogus \(known: apiVersion, kind, "),
        ("metrics: {bindAddres: ':1', x: 2}\n", r"unknown fields metrics\.bindAddres, metrics\.x"),
        ("leaderElection: {leaseDuration: 15}\n", r"leaderElection\.leaseDuration: must be a "),
        ("leaderElection: {leaseDuration: 15sec}\n", r"invalid duration '15sec'"),
        ("leaderElection: {leaderElect: 'yes'}\n", r"leaderElect: must be true or false"),
        ("leaderElection: {resourceLock: configmaps}\n", r"only 'leases' is supported"),
        ("clientConnection: {burst: 1.5}\n", r"clientConnection\.burst: must be an integer"),
        ("clientConnection: {qps: fast}\n", r"clientConnection\.qps: must be a number"),
        ("clientConnection: [1]\n", r"clientConnection: must be a mapping, got a list"),
        ("featureGates: {RestartJob: 'on'}\n", r"featureGates\.RestartJob: must be true"),
        ("featureGates: [RestartJob]\n", r"featureGates: must be a mapping"),
        ("health: {readinessEndpointName: ready}\n", r"serves /readyz only"),
        ("health: {livenessEndpointName: /live}\n", r"serves /healthz only"),
        ("webhook: {port: '9443'}\n", r"webhook\.port: must be an integer"),
        ("webhook: {tls: {}}\n", r"unknown field webhook\.tls"),
        ("internalCertManagement: {enable: 1}\n", r"internalCertManagement\.enable: must be"),
        ("tls: {cipherSuites: TLS_X}\n", r"tls\.cipherSuites: must be a list of strings"),
        (
            "metrics: {bindAddress: ':1'}\nmetrics: {bindAddress: ':2'}\n",
            r"'metrics' is given twice",
        ),
    ],
)
def test_bad_files_are_refused_naming_the_field(body: str, message: str) -> None:
    with pytest.raises(ConfigFileError, match=message):
        parse(HEAD + body, "f.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Configuration\n", r"must be apiVersion config\.jobset\.x-k8s\.io/v1alpha1"),
        ("apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Other\n", r"got apiVersion"),
        ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Configuration\n", r"kind 'Configuration'"),
        ("- a\n", r"must be a Configuration object"),
        ("a: [\n", r"not YAML or JSON"),
        ("", r"must be a Configuration object"),
    ],
)
def test_other_documents_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigFileError, match=message):
        parse(text, "f.yaml")


def test_json_is_read_too() -> None:
    text = '{"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",'
    text += ' "clientConnection": {"burst": 3}}'
    assert [(s.dest, s.value, s.field) for s in parse(text).settings] == [
        ("kube_api_burst", 3, "clientConnection.burst")
    ]
