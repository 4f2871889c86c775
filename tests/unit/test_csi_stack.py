"""The real node's CSI stack, without a cluster: what ``localcluster/csi.py`` installs, how the
CSI components are built and cached, and the driver's own Go tests (``go test``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from localcluster import build, csi
from localcluster.cluster import _storage_classes

RELEASE_RBAC: list[dict[str, Any] | None] = [
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "csi-resizer"}},
    {
        "kind": "ClusterRole",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": "external-resizer-runner"},
        "rules": [{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["patch"]}],
    },
    {
        "kind": "ClusterRoleBinding",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": "csi-resizer-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "csi-resizer", "namespace": "default"}],
        "roleRef": {
            "kind": "ClusterRole",
            "name": "external-resizer-runner",
            "apiGroup": "rbac.authorization.k8s.io",
        },
    },
    {"kind": "Role", "metadata": {"name": "external-resizer-cfg", "namespace": "default"}},
    {"kind": "RoleBinding", "metadata": {"name": "csi-resizer-role-cfg"}},
    None,  # an empty document (a trailing ---)
]


def test_the_release_rbac_is_bound_to_the_sidecars_user() -> None:
    """The ClusterRoles as the release ships them, the binding's subject our user; the
    ServiceAccount and the leader-election Role and RoleBinding are left out."""
    kept = csi.cluster_rbac(RELEASE_RBAC, "localcluster:csi-resizer")
    assert [o["kind"] for o in kept] == ["ClusterRole", "ClusterRoleBinding"]
    assert kept[0] == RELEASE_RBAC[1]
    binding = kept[1]
    assert binding["subjects"] == [
        {
            "kind": "User",
            "name": "localcluster:csi-resizer",
            "apiGroup": "rbac.authorization.k8s.io",
        }
    ]
    assert binding["roleRef"]["name"] == "external-resizer-runner"
    original = RELEASE_RBAC[2]
    assert original is not None
    assert original["subjects"][0]["kind"] == "ServiceAccount", "the input is not changed"


def test_each_sidecar_runs_as_a_user_of_its_own() -> None:
    users = [s.identity.user for s in csi.SIDECARS]
    assert len(set(users)) == len(csi.SIDECARS)
    assert not any(u.startswith("system:") for u in users), users
    assert all(g != "system:masters" for s in csi.SIDECARS for g in s.identity.groups)


def test_the_classes_are_the_drivers_and_expandable() -> None:
    classes = {c["metadata"]["name"]: c for c in csi.storage_classes()}
    assert {n: c["volumeBindingMode"] for n, c in classes.items()} == {
        csi.IMMEDIATE_CLASS: "Immediate",
        csi.WFFC_CLASS: "WaitForFirstConsumer",
    }
    assert all(c["provisioner"] == csi.DRIVER_NAME for c in classes.values())
    assert all(c["allowVolumeExpansion"] is True for c in classes.values())
    # Beside the test provisioner's classes, never instead of one, and never the default.
    hostpath = {m["name"] for c in _storage_classes() if isinstance(m := c["metadata"], dict)}
    assert "standard" in hostpath
    assert not hostpath & set(classes)
    assert all(not c["metadata"].get("annotations") for c in classes.values())
    snapshot, failing, group = csi.snapshot_classes()
    assert (snapshot["kind"], snapshot["driver"]) == ("VolumeSnapshotClass", csi.DRIVER_NAME)
    assert (group["kind"], group["driver"]) == ("VolumeGroupSnapshotClass", csi.DRIVER_NAME)
    # The failing class is the driver's too, and only it carries the knob.
    assert (failing["metadata"]["name"], failing["driver"]) == (
        csi.FAILING_SNAPSHOT_CLASS,
        csi.DRIVER_NAME,
    )
    assert failing["parameters"] == {csi.FAIL_SNAPSHOTS_PARAMETER: "true"}
    assert "parameters" not in snapshot and "parameters" not in group
    # The driver's Go source names the same parameter.
    source = (Path(csi.__file__).parent / "csidriver" / "controller.go").read_text()
    assert f'FailSnapshotsParameter = "{csi.FAIL_SNAPSHOTS_PARAMETER}"' in source
    # None is a default class: a claim's snapshot never gets the failing one by accident.
    assert all(not c["metadata"].get("annotations") for c in (snapshot, failing, group))
    driver = csi.csi_driver()["spec"]
    assert driver["attachRequired"] is False, "no external-attacher runs"


def test_the_csi_components_are_built_only_on_demand() -> None:
    """Neither the control plane's nor the node's build builds them (their cache keys stay as
    they were); each sidecar links in its release's version."""
    names = {c.name for c in build.CSI_COMPONENTS}
    assert names == {"csi-provisioner", "csi-resizer", "csi-snapshotter", "csi-driver"}
    others = {c.name for c in build.COMPONENTS + build.NODE_COMPONENTS}
    assert not names & others
    provisioner = next(c for c in build.CSI_COMPONENTS if c.name == "csi-provisioner")
    assert provisioner.extra_ldflags == "-X main.version=v5.3.0"
    snapshotter = next(c for c in build.CSI_COMPONENTS if c.name == "csi-snapshotter")
    assert snapshotter.binaries == ("csi-snapshotter", "snapshot-controller")


def test_the_drivers_cache_key_follows_its_source(tmp_path: Path) -> None:
    """The driver is a module of this repository: an edit of any of its Go files rebuilds it,
    which a wrapper's key (go.mod and go.sum only) would not."""
    driver = next(c for c in build.CSI_COMPONENTS if c.local_source)
    copy = tmp_path / "csidriver"
    shutil.copytree(driver.module_dir, copy)
    moved = build.Component(
        driver.name, driver.targets, root=tmp_path, module=copy.name, local_source=True
    )
    # The same module as a wrapper would be keyed: its go.mod and go.sum only.
    wrapper = build.Component(driver.name, driver.targets, root=tmp_path, module=copy.name)
    first, wrapped = build.cache_key(moved, "go1.26.8"), build.cache_key(wrapper, "go1.26.8")
    assert first == build.cache_key(moved, "go1.26.8")
    main = copy / "main.go"
    main.write_text(main.read_text() + "\n// an edit\n")
    assert build.cache_key(moved, "go1.26.8") != first
    assert build.cache_key(wrapper, "go1.26.8") == wrapped


def test_the_drivers_go_tests_pass() -> None:
    """``go test`` of localcluster/csidriver: its Controller and GroupController services against
    a temporary state directory (driver_test.go). The first run compiles gRPC (about 35 s on 2
    cores); later runs come from Go's build cache."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("Go is not on PATH: it builds and tests the CSI driver", pytrace=False)
    driver = next(c for c in build.CSI_COMPONENTS if c.local_source)
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=readonly")
    done = subprocess.run(
        [go, "test", "-count=1", "./..."],
        cwd=driver.module_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in done.stdout
