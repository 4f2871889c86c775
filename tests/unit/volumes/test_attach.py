"""Whether a claim's storage attaches its volumes to a node (volumes/attach.py), and what the
controller reads of StorageClasses and CSIDrivers for it (volumes/observed.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset.volumes.attach import attaches
from controller.jobset.volumes.model import COLOCATE_ANNOTATION
from controller.jobset.volumes.observed import StorageClasses, attach_required, storage_classes

Obj = dict[str, Any]


def storage_class(
    name: str,
    provisioner: str,
    *,
    default: bool = False,
    created: str = "2025-01-01T00:00:00Z",
    annotations: dict[str, str] | None = None,
    beta: bool = False,
) -> Obj:
    notes = dict(annotations or {})
    if default:
        key = "storageclass.beta.kubernetes.io" if beta else "storageclass.kubernetes.io"
        notes[f"{key}/is-default-class"] = "true"
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": notes, "creationTimestamp": created},
        "provisioner": provisioner,
    }


def csi_driver(name: str, attach: bool | None) -> Obj:
    spec: Obj = {} if attach is None else {"attachRequired": attach}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


# A cluster of block storage (attaches), NFS by CSI (attaches nothing), NFS by an external
# provisioner that is no CSI driver, a CSI driver without a CSIDriver object, a migrated in-tree
# class, and classes annotated by a platform team.
CLASSES = [
    storage_class("block", "ebs.csi.aws.com", default=True),
    storage_class("nfs", "nfs.csi.k8s.io"),
    storage_class("nfs-subdir", "k8s-sigs.io/nfs-subdir-external-provisioner"),
    storage_class("no-object", "example.csi.io"),
    storage_class("azure-file", "kubernetes.io/azure-file"),
    storage_class("azure-disk", "kubernetes.io/azure-disk"),
    storage_class("nfs-marked", "k8s-sigs.io/nfs-subdir-external-provisioner",
                  annotations={COLOCATE_ANNOTATION: "false"}),
    storage_class("nfs-forced", "nfs.csi.k8s.io", annotations={COLOCATE_ANNOTATION: "true"}),
    storage_class("nfs-typo", "nfs.csi.k8s.io", annotations={COLOCATE_ANNOTATION: "no"}),
]  # fmt: skip
DRIVERS = [
    csi_driver("ebs.csi.aws.com", True),
    csi_driver("nfs.csi.k8s.io", False),
    csi_driver("file.csi.azure.com", False),
    csi_driver("disk.csi.azure.com", None),  # attachRequired absent: required
]
CLUSTER = StorageClasses.of(CLASSES, DRIVERS)


@pytest.mark.parametrize(
    ("asked", "classes", "expected"),
    [
        pytest.param("block", CLUSTER, (True, False, "class block, provisioner ebs.csi.aws.com: "
                     "CSIDriver ebs.csi.aws.com has attachRequired: true"), id="block-attaches"),
        pytest.param(None, CLUSTER, (True, False, "class block (the default), provisioner "
                     "ebs.csi.aws.com: CSIDriver ebs.csi.aws.com has attachRequired: true"),
                     id="no-class-is-the-default-class"),
        pytest.param("nfs", CLUSTER, (False, False, "class nfs, provisioner nfs.csi.k8s.io: "
                     "CSIDriver nfs.csi.k8s.io has attachRequired: false, its volumes are never "
                     "attached"), id="csi-driver-that-attaches-nothing"),
        pytest.param("nfs-subdir", CLUSTER, (True, True, "class nfs-subdir, provisioner "
                     "k8s-sigs.io/nfs-subdir-external-provisioner: no CSIDriver "
                     "k8s-sigs.io/nfs-subdir-external-provisioner, so its volumes are taken to "
                     "attach, as Kubernetes does (annotate the class "
                     f'{COLOCATE_ANNOTATION}: "false" if several nodes can mount its volumes)'),
                     id="external-provisioner-without-csidriver-assumed"),
        pytest.param("no-object", CLUSTER, (True, True, "class no-object, provisioner "
                     "example.csi.io: no CSIDriver example.csi.io, so its volumes are taken to "
                     "attach, as Kubernetes does (annotate the class "
                     f'{COLOCATE_ANNOTATION}: "false" if several nodes can mount its volumes)'),
                     id="csi-driver-without-object-attaches-as-kubernetes-reads-it"),
        pytest.param("azure-file", CLUSTER, (False, False, "class azure-file, provisioner "
                     "kubernetes.io/azure-file (CSI driver file.csi.azure.com): CSIDriver "
                     "file.csi.azure.com has attachRequired: false, its volumes are never "
                     "attached"), id="migrated-in-tree-class-reads-its-csi-driver"),
        pytest.param("azure-disk", CLUSTER, (True, False, "class azure-disk, provisioner "
                     "kubernetes.io/azure-disk (CSI driver disk.csi.azure.com): CSIDriver "
                     "disk.csi.azure.com has attachRequired: true"),
                     id="attach-required-absent-is-true"),
        pytest.param("nfs-marked", CLUSTER, (False, False, "class nfs-marked is annotated "
                     f'{COLOCATE_ANNOTATION}: "false"'), id="class-annotated-false"),
        pytest.param("nfs-forced", CLUSTER, (True, False, "class nfs-forced is annotated "
                     f'{COLOCATE_ANNOTATION}: "true"'), id="class-annotated-true-wins"),
        pytest.param("nfs-typo", CLUSTER, (False, False, "class nfs-typo, provisioner "
                     "nfs.csi.k8s.io: CSIDriver nfs.csi.k8s.io has attachRequired: false, its "
                     f'volumes are never attached ({COLOCATE_ANNOTATION}: "no" on the class is '
                     'not "true" or "false")'), id="class-annotation-unread-is-said"),
        pytest.param("gone", CLUSTER, (True, True, "class gone does not exist (yet): assumed to "
                     "attach"), id="missing-class-assumed"),
        pytest.param("", CLUSTER, (True, True, 'no storage class (storageClassName: ""), so no '
                     "CSIDriver: assumed to attach"), id="no-class-static-binding-assumed"),
        pytest.param(None, StorageClasses.of([storage_class("nfs", "nfs.csi.k8s.io")], DRIVERS),
                     (True, True, "no storage class given and no default class: assumed to "
                      "attach"), id="no-default-class-assumed"),
        pytest.param("nfs", StorageClasses.of(CLASSES, None), (True, True, "class nfs, "
                     "provisioner nfs.csi.k8s.io: the CSIDrivers cannot be read, assumed to "
                     "attach"), id="csidrivers-unreadable-assumed"),
        pytest.param("nfs", StorageClasses(), (True, True, "the storage classes are not known: "
                     "assumed to attach"), id="classes-unknown-assumed"),
    ],
)  # fmt: skip
def test_attaches(
    asked: str | None, classes: StorageClasses, expected: tuple[bool, bool, str]
) -> None:
    found = attaches(asked, classes)
    assert (found.attaches, found.assumed, found.why) == expected


def test_the_default_class_is_the_newest_then_the_first_by_name() -> None:
    """As Kubernetes picks among several default classes (pkg/volume/util GetDefaultClass),
    the beta annotation counted too."""
    older = storage_class("older", "a", default=True, created="2024-01-01T00:00:00Z")
    newest_b = storage_class("b", "a", default=True, created="2025-06-01T00:00:00Z", beta=True)
    newest_a = storage_class("a", "a", default=True, created="2025-06-01T00:00:00Z")
    plain = storage_class("plain", "a", created="2026-01-01T00:00:00Z")
    assert storage_classes([older, newest_b, newest_a, plain]).default_class == "a"
    assert storage_classes([older, newest_b, plain]).default_class == "b"
    assert storage_classes([plain]).default_class is None


def test_csidrivers_attach_unless_they_say_false() -> None:
    assert attach_required(DRIVERS) == {
        "ebs.csi.aws.com": True,
        "nfs.csi.k8s.io": False,
        "file.csi.azure.com": False,
        "disk.csi.azure.com": True,
    }


def test_a_mode_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="--colocate-claims must be auto, always or never"):
        StorageClasses.of(None, None, "sometimes")
    assert StorageClasses.of(None, None, "never").colocate_claims == "never"
    assert StorageClasses.of(None, None).names is None  # not known
