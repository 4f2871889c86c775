"""Pure parts of the local control plane harness: certificates, volumes, stages, build errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from localcluster import build, pki
from localcluster.cluster import STAGES_FILE, LocalCluster
from localcluster.processes import LaunchError
from localcluster.provisioner import _quantity_bytes, desired_volume, owned_directory


def test_certificates_chain_to_the_ca_with_component_identities(tmp_path: Path) -> None:
    material = pki.generate(tmp_path, "https://127.0.0.1:6443")
    ca = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(material.serving_cert.read_bytes())
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    admin = x509.load_pem_x509_certificate(material.client_cert(pki.ADMIN).read_bytes())
    admin.verify_directly_issued_by(ca)
    orgs = [a.value for a in admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    kcm = x509.load_pem_x509_certificate(material.client_cert(pki.CONTROLLER_MANAGER).read_bytes())
    cn = kcm.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert cn == "system:kube-controller-manager"
    kubeconfig = yaml.safe_load(material.kubeconfig(pki.ADMIN).read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert oct(material.client_key(pki.ADMIN).stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [("1Gi", 2**30), ("500Mi", 500 * 2**20), ("2G", 2 * 10**9), ("1000", 1000), ("1.5Ki", 1536)],
)
def test_quantity_bytes(quantity: str, expected: int) -> None:
    assert _quantity_bytes(quantity) == expected


def _claim(annotations: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "u-1",
            "annotations": annotations or {},
        },
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "3Gi"}}},
    }


def test_immediate_volume_matches_the_claim() -> None:
    storage_class = {"metadata": {"name": "standard"}, "volumeBindingMode": "Immediate"}
    volume = desired_volume(_claim(), storage_class, Path("/v"))
    assert volume is not None
    assert volume["metadata"]["name"] == "pvc-u-1"
    assert volume["spec"]["capacity"] == {"storage": "3Gi"}
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["claimRef"]["uid"] == "u-1"
    assert volume["spec"]["hostPath"] == {"path": "/v/u-1", "type": "Directory"}
    assert "nodeAffinity" not in volume["spec"]


def test_wait_for_first_consumer_waits_for_a_node() -> None:
    storage_class = {"metadata": {"name": "wffc"}, "volumeBindingMode": "WaitForFirstConsumer"}
    assert desired_volume(_claim(), storage_class, Path("/v")) is None
    selected = _claim({"volume.kubernetes.io/selected-node": "kwok-node-2"})
    volume = desired_volume(selected, storage_class, Path("/v"))
    assert volume is not None
    term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0]["values"] == ["kwok-node-2"]


def test_kwok_stages_cover_the_pod_lifecycle() -> None:
    stages = list(yaml.safe_load_all(STAGES_FILE.read_text()))
    names = {s["metadata"]["name"] for s in stages}
    assert names == {"node-initialize", "pod-start", "pod-succeed", "pod-fail", "pod-delete"}
    assert all(s["kind"] == "Stage" for s in stages)


def test_cache_key_follows_the_pins(tmp_path: Path) -> None:
    module = tmp_path / "thing"
    module.mkdir()
    (module / "go.mod").write_text("module thing\n")
    (module / "go.sum").write_text("")
    component = build.Component("thing", (("thing", "thing"),), root=tmp_path)
    first = build.cache_key(component, "go1.26.8")
    assert first == build.cache_key(component, "go1.26.8")
    assert first != build.cache_key(component, "go1.27.0")
    (module / "go.sum").write_text("x v1.0.0 h1:abc\n")
    assert first != build.cache_key(component, "go1.26.8")


def test_pinned_versions_are_recorded() -> None:
    kubernetes = next(c for c in build.COMPONENTS if c.name == "kubernetes")
    versions = build.required_versions(kubernetes)
    assert versions["k8s.io/kubernetes"].startswith("v1.")


def test_real_node_components_are_built_only_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI and the KWOK tiers call ensure_binaries: it must not build containerd, the kubelet or
    any other real-node component, and the kubelet must not live in the control plane's wrapper
    (adding it there changes the control plane's cache key)."""
    built: list[str] = []

    def fake_build(component: build.Component, goversion: str, report: object) -> Path:
        built.append(component.name)
        return Path("/nowhere") / component.name

    monkeypatch.setattr(build, "go_version", lambda: "go1.26.8")
    monkeypatch.setattr(build, "build_component", fake_build)
    build.ensure_binaries(lambda _: None)
    assert built == ["etcd", "kubernetes", "kwok"]
    control_plane = {b for c in build.COMPONENTS for b in c.binaries}
    assert not control_plane & {"kubelet", "containerd", "containerd-shim-runc-v2", "ctr"}
    built.clear()
    directories = build.ensure_node_binaries(("containerd", "kubelet"), lambda _: None)
    assert built == ["containerd", "kubelet"]
    assert set(directories) == {"containerd", "kubelet"}
    node = {c.name for c in build.NODE_COMPONENTS}
    assert node == {"coredns", "containerd", "kubelet"}
    kubelet = next(c for c in build.NODE_COMPONENTS if c.name == "kubelet")
    kubernetes = next(c for c in build.COMPONENTS if c.name == "kubernetes")
    assert build.required_versions(kubelet) == build.required_versions(kubernetes)


def test_the_oldest_apiserver_is_a_component_of_its_own() -> None:
    """Its wrapper module is not the suite's (their cache keys are independent), it is never
    built by ensure_binaries, and it is an older release than the suite's."""
    oldest = build.MIN_KUBERNETES
    assert oldest not in build.COMPONENTS + build.NODE_COMPONENTS
    assert oldest.binaries == ("kube-apiserver",)
    kubernetes = next(c for c in build.COMPONENTS if c.name == "kubernetes")
    assert oldest.module_dir != kubernetes.module_dir
    old = build.required_versions(oldest)["k8s.io/kubernetes"]
    suite = build.required_versions(kubernetes)["k8s.io/kubernetes"]
    assert _minor(old) < _minor(suite), (old, suite)


def test_the_docs_claim_the_tested_minimum() -> None:
    """README's and docs/operations.md's minimum is the release the oldest-apiserver test runs."""
    old = build.required_versions(build.MIN_KUBERNETES)["k8s.io/kubernetes"]
    repo = Path(__file__).resolve().parents[2]
    readme = (repo / "README.md").read_text()
    operations = (repo / "docs" / "operations.md").read_text()
    minor = f"1.{_minor(old)}"
    assert f"Kubernetes **{minor}** or later" in readme
    assert f"Tested on {old}" in readme
    assert f"| minimum (CRD, controller, JobSet and Job scope volumes) | **{minor}** | {old} " in (
        operations
    )


def _minor(version: str) -> int:
    return int(version.removeprefix("v").split(".")[1])


def test_another_apiserver_only_with_the_apiserver_profile(tmp_path: Path) -> None:
    """The other profiles' controller-manager, scheduler and kubelet are the suite's release,
    which Kubernetes does not support against an older API server."""
    cluster = LocalCluster(tmp_path, profile="full", kube_apiserver=tmp_path / "kube-apiserver")
    with pytest.raises(LaunchError, match="apiserver profile only"):
        cluster.start()
    assert cluster.processes == []


def test_missing_go_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.BuildError, match="Go toolchain not found on PATH"):
        build.ensure_binaries(lambda _: None)


def test_failed_build_names_the_component_and_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STATEFUL_JOBSET_CACHE", str(tmp_path / "cache"))
    module = tmp_path / "mods" / "broken"
    module.mkdir(parents=True)
    (module / "go.mod").write_text("module broken\n\ngo 1.21\n")
    (module / "go.sum").write_text("")
    (module / "main.go").write_text("package main\n\nfunc main() { undefined() }\n")
    component = build.Component("broken", (("broken", "broken"),), root=tmp_path / "mods")
    messages: list[str] = []
    with pytest.raises(build.BuildError) as raised:
        build.build_component(component, build.go_version(), messages.append)
    text = str(raised.value)
    assert "building broken failed" in text
    assert "undefined" in text
    assert str(tmp_path / "cache" / "logs" / "build-broken.log") in text
    assert not build.component_dir(component, build.go_version()).exists()
    assert os.listdir(tmp_path / "cache" / "bin") == []


def test_a_build_published_meanwhile_by_another_process_is_kept(tmp_path: Path) -> None:
    # Two processes (a test run and a `make binaries`) built kwok at once: the second one's
    # rename failed with "Directory not empty" and its `make` stopped.
    component = build.Component("tool", (("./cmd/tool", "tool"),), root=tmp_path / "mods")
    target = tmp_path / "bin" / "tool-key"
    target.mkdir(parents=True)
    (target / "tool").write_text("theirs")
    staging = tmp_path / "bin" / ".tool-key.partial-1"
    staging.mkdir()
    (staging / "tool").write_text("ours")
    build._publish(staging, target, component)
    assert (target / "tool").read_text() == "theirs"


def test_a_half_published_entry_is_not_taken_for_a_build(tmp_path: Path) -> None:
    component = build.Component("tool", (("./cmd/tool", "tool"),), root=tmp_path / "mods")
    target = tmp_path / "bin" / "tool-key"
    target.mkdir(parents=True)
    (target / "stray").write_text("")
    staging = tmp_path / "bin" / ".tool-key.partial-1"
    staging.mkdir()
    (staging / "tool").write_text("ours")
    with pytest.raises(OSError):
        build._publish(staging, target, component)


def test_only_a_directory_inside_the_volumes_dir_is_ever_removed() -> None:
    def volume(path: str) -> dict[str, object]:
        return {"spec": {"hostPath": {"path": path}}}

    assert owned_directory(volume("/v/u-1"), Path("/v")) == Path("/v/u-1")
    assert owned_directory(volume("/v/../etc"), Path("/v")) is None
    assert owned_directory(volume("/v"), Path("/v")) is None
    assert owned_directory(volume("/v/a/b"), Path("/v")) is None
    assert owned_directory({"spec": {"nfs": {}}}, Path("/v")) is None


def test_helm_is_built_only_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    """helm has its own wrapper module and is built by ensure_helm alone: adding it to a control
    plane or node wrapper would change their cache keys (20+ minute rebuilds)."""
    built: list[str] = []

    def fake_build(component: build.Component, goversion: str, report: object) -> Path:
        built.append(component.name)
        return Path("/nowhere") / component.name

    monkeypatch.setattr(build, "go_version", lambda: "go1.26.8")
    monkeypatch.setattr(build, "build_component", fake_build)
    assert build.ensure_helm(lambda _: None) == Path("/nowhere/helm/helm")
    assert built == ["helm"]
    others = {c.module_dir for c in build.COMPONENTS + build.NODE_COMPONENTS}
    assert build.HELM.module_dir not in others
    assert build.required_versions(build.HELM) == {"helm.sh/helm/v4": "v4.3.1"}


def test_an_apply_the_api_server_timed_out_is_sent_again_and_other_failures_are_not(
    tmp_path: Path,
) -> None:
    from localcluster.processes import SERVER_TIMEOUT, LaunchError, run_apply

    count = tmp_path / "count"
    # Fails with the API server's timeout twice, then succeeds (each run appends a line).
    script = (
        f'echo x >> {count}; [ "$(wc -l < {count})" -ge 3 ] && echo applied && exit 0; '
        f'echo "Error from server (Timeout): Timeout: {SERVER_TIMEOUT}" >&2; exit 1'
    )
    assert run_apply(["sh", "-c", script], what="apply", timeout=10) == "applied\n"
    assert count.read_text().count("x") == 3
    with pytest.raises(LaunchError, match="forbidden"):
        run_apply(["sh", "-c", "echo forbidden >&2; exit 1"], what="apply", timeout=10)
