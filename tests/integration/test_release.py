"""A release (``make release``: localcluster/release.py) installed as docs/operations.md's
"Install from a release" says, on an API server of its own.

The release is made once into a temporary ``dist/``: its SHA256SUMS verify with ``sha256sum -c``;
the install manifest applies server-side and creates the CRD, namespace, RBAC, Deployment (the
image pinned to the version), PDB and Service, re-applies as a no-op, and ``kubectl delete -f``
removes every object; the Pod-scope manifest applies and deletes likewise; ``helm install`` of the
packaged chart installs the same release, with the chart's version and appVersion the release's;
the image archive is an OCI archive that skopeo reads and copies (what ``skopeo copy
oci-archive:...`` to a registry starts with; no registry here). The control plane has
kube-controller-manager (namespace deletion) and KWOK nodes, where pods run nothing: the image
itself runs as the Deployment's pods in tests/node/test_manifests_in_cluster.py.

The image is built as ``make image`` builds it into a cache folder (reused while its inputs,
``controllerimage.inputs_digest``, stay the same: a new commit builds it again, ~50 s).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controller.runtime.store import Obj
from localcluster import build, release
from localcluster.cluster import LocalCluster
from tests.support.helm import NAMESPACE, RELEASE, Helm, Key, by_key, kubectl, parse
from tests.support.release import VERSION, make_release

CRD_NAME = "jobsets.jobset.x-k8s.io"
FILES = {
    f"stateful-jobset-{VERSION}.yaml",
    f"stateful-jobset-pod-scope-{VERSION}.yaml",
    f"stateful-jobset-{VERSION}.tgz",
    f"stateful-jobset-image-{VERSION}.tar",
    "SHA256SUMS",
}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("release") / "dist"
    return make_release(output)


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A control plane of its own: the session's has the CRD installed by the tests, and this
    module deletes it. With kube-controller-manager (the "full" profile): its namespace
    controller is what finishes deleting the namespace. Its API server reports its release as
    its version: the chart's kubeVersion refuses v0.0.0-master."""
    with LocalCluster(
        tmp_path_factory.mktemp("release-cluster"), profile="full", versioned_apiserver=True
    ) as cluster:
        yield cluster


def _kubectl(cluster: LocalCluster, *args: str) -> str:
    done = subprocess.run(
        [str(kubectl()), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def _present(cluster: LocalCluster, manifest: Path) -> set[Key]:
    text = _kubectl(cluster, "get", "-f", str(manifest), "--ignore-not-found", "-o", "json")
    if not text.strip():  # nothing found: kubectl prints nothing at all
        return set()
    out = json.loads(text)
    items = out["items"] if out.get("kind") == "List" else [out]
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in items}


def _applied(cluster: LocalCluster, manifest: Path) -> dict[str, Obj]:
    """Each object without its status and what other writers than appliers keep of it (their
    managedFields, the resourceVersion): the metadata, spec and the appliers' managedFields with
    their times, which an apply that changes nothing leaves as they are. Not the whole object:
    the Deployment's and the PodDisruptionBudget's controllers write their status whenever they
    get to it (on a loaded machine, after the first read)."""
    shown = _kubectl(cluster, "get", "-f", str(manifest), "-o", "json", "--show-managed-fields")
    out = json.loads(shown)
    found = {}
    for o in out["items"]:
        meta = dict(o["metadata"])
        del meta["resourceVersion"]
        meta["managedFields"] = [
            f for f in meta.get("managedFields") or [] if f.get("operation") == "Apply"
        ]
        found[f"{o['kind']}/{meta['name']}"] = {
            **{k: v for k, v in o.items() if k != "status"},
            "metadata": meta,
        }
    return found


def test_the_release_has_its_files_and_their_sums_verify(dist: Path) -> None:
    assert {p.name for p in dist.iterdir()} == FILES
    done = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(line.split(": ")[0] for line in done.stdout.splitlines()) == sorted(
        FILES - {"SHA256SUMS"}
    )


def test_the_chart_and_manifests_are_reproducible(dist: Path, tmp_path: Path) -> None:
    """The same inputs give the same bytes (the image's reproducibility is controllerimage's)."""
    helm = build.ensure_helm(lambda _: None)
    again = release.package_chart(helm, VERSION, "stateful-jobset", tmp_path)
    assert again.read_bytes() == (dist / again.name).read_bytes()
    manifest = release.install_manifest(
        build.ensure_binaries(lambda _: None).path("kubectl"), VERSION, f"stateful-jobset:{VERSION}"
    )
    assert manifest == (dist / f"stateful-jobset-{VERSION}.yaml").read_text()


def test_install_manifest_applies_and_deletes_cleanly(
    dist: Path, own_cluster: LocalCluster
) -> None:
    manifest = dist / f"stateful-jobset-{VERSION}.yaml"
    objects = by_key(parse(manifest.read_text()))
    kinds = {k[0] for k in objects}
    assert {
        "Namespace", "CustomResourceDefinition", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "ServiceAccount", "ClusterRole",
        "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget",
        "Service",
    } <= kinds  # fmt: skip

    _kubectl(own_cluster, "apply", "--server-side", "-f", str(manifest))
    try:
        assert _present(own_cluster, manifest) == set(objects)
        _kubectl(own_cluster, "wait", "--for=condition=Established", f"crd/{CRD_NAME}")
        deployment = json.loads(
            _kubectl(own_cluster, "get", "deployment", "stateful-jobset-controller",
                     "-n", NAMESPACE, "-o", "json")
        )  # fmt: skip
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"stateful-jobset:{VERSION}"
        assert deployment["spec"]["replicas"] == 2
        # The users' roles are aggregated into the built-in ones.
        editor = objects[("ClusterRole", "", "stateful-jobset-editor")]
        assert "rbac.authorization.k8s.io/aggregate-to-edit" in editor["metadata"]["labels"]
        # Re-applying is a no-op: no object's spec or applied fields change.
        before = _applied(own_cluster, manifest)
        assert all(o["metadata"]["managedFields"] for o in before.values()), before
        _kubectl(own_cluster, "apply", "--server-side", "-f", str(manifest))
        assert _applied(own_cluster, manifest) == before
    finally:
        # Whatever failed above: the other tests of the module install on this control plane.
        _kubectl(own_cluster, "delete", "-f", str(manifest), "--wait=true", "--timeout=120s")
    assert _present(own_cluster, manifest) == set()


def test_pod_scope_manifest_applies_and_deletes(dist: Path, own_cluster: LocalCluster) -> None:
    manifest = dist / f"stateful-jobset-pod-scope-{VERSION}.yaml"
    objects = by_key(parse(manifest.read_text()))
    assert {k[0] for k in objects} == {
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    }
    _kubectl(own_cluster, "apply", "--server-side", "-f", str(manifest))
    assert _present(own_cluster, manifest) == set(objects)
    _kubectl(own_cluster, "delete", "-f", str(manifest), "--wait=true")
    assert _present(own_cluster, manifest) == set()


def test_helm_install_from_the_packaged_chart(
    dist: Path, own_cluster: LocalCluster, tmp_path: Path
) -> None:
    helm = Helm(tmp_path / "helm-home", own_cluster.kubeconfig)
    chart = str(dist / f"stateful-jobset-{VERSION}.tgz")
    shown = yaml.safe_load(helm.run("show", "chart", chart).stdout)
    assert (shown["version"], shown["appVersion"]) == (VERSION, VERSION)

    helm.run("install", RELEASE, chart, "-n", NAMESPACE, "--create-namespace", "--wait=false")
    manifest = tmp_path / "release.yaml"
    manifest.write_text(helm.run("get", "manifest", RELEASE, "-n", NAMESPACE).stdout)
    objects = by_key(parse(manifest.read_text()))
    assert _present(own_cluster, manifest) == set(objects)
    deployment = objects[("Deployment", NAMESPACE, "stateful-jobset-controller")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"stateful-jobset:{VERSION}"

    # The chart keeps the CRD on uninstall (not its admission policy); removing it is the
    # documented last step.
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert _present(own_cluster, manifest) == {("CustomResourceDefinition", "", CRD_NAME)}
    _kubectl(own_cluster, "delete", "crd", CRD_NAME, "--wait=true")
    assert _present(own_cluster, manifest) == set()


def test_the_image_archive_is_what_skopeo_copies(dist: Path, tmp_path: Path) -> None:
    archive = dist / f"stateful-jobset-image-{VERSION}.tar"
    with tarfile.open(archive) as tar:
        index_file = tar.extractfile("index.json")
        assert index_file is not None
        index = json.load(index_file)
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == (
        f"docker.io/library/stateful-jobset:{VERSION}"
    )
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is missing: make tools (Debian's skopeo)"
    inspected = json.loads(
        subprocess.run(
            [skopeo, "inspect", f"oci-archive:{archive}"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout
    )  # fmt: skip
    assert inspected["Digest"] == entry["digest"]
    assert inspected["Labels"]["org.opencontainers.image.version"] == VERSION
    # A copy, layer by layer with digests checked, as to a registry (here into a folder).
    target = tmp_path / "copied"
    subprocess.run(
        [skopeo, "copy", "--quiet", f"oci-archive:{archive}", f"oci:{target}:{VERSION}"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    copied = json.loads((target / "index.json").read_text())
    assert [m["digest"] for m in copied["manifests"]] == [entry["digest"]]


def test_the_install_manifest_takes_an_image_override(dist: Path, tmp_path: Path) -> None:
    """The documented overlay on a downloaded release: its image moved to your registry."""
    shutil.copy(dist / f"stateful-jobset-{VERSION}.yaml", tmp_path)
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"stateful-jobset-{VERSION}.yaml"],
        "images": [{"name": "stateful-jobset", "newName": "registry.example.com/stateful-jobset"}],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    objects = by_key(parse(done.stdout))
    assert set(objects) == set(
        by_key(parse((dist / f"stateful-jobset-{VERSION}.yaml").read_text()))
    )
    deployment = objects[("Deployment", NAMESPACE, "stateful-jobset-controller")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"registry.example.com/stateful-jobset:{VERSION}"
