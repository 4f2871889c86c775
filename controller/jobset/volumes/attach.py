"""Whether a claim's storage attaches its volumes to a node, read from its class (pure).

``ReadWriteOnce`` holds a volume on one node only where Kubernetes attaches it: the
attach/detach controller attaches volumes of attachable plugins only, and refuses a second node
(``Multi-Attach``) only to those. A CSI volume is attached unless its driver's CSIDriver object
says ``attachRequired: false``; a CSI driver without a CSIDriver object is attached (the kubelet
and the attach/detach controller both read a missing object so). A driver that attaches nothing
(NFS-style CSI drivers advertise ``ReadWriteOnce`` this way) mounts one ``ReadWriteOnce`` volume
on as many nodes as its pods run on, and keeping those pods on one node only strands them.

Jobs are made before their pods' volumes are attached, often before they exist (and a Job's
pod template cannot change once it runs), so the answer is read from the claim's class (the
claim's own once it exists, else its template's ``storageClassName``; none: the cluster's
default class), the class's provisioner (the CSI driver's name; an in-tree name migrated to CSI
stands for its driver), that driver's CSIDriver object. What cannot be known (a class that does
not exist yet, an external provisioner that is no CSI driver, CSIDrivers the controller may not
read) is taken to attach, as Kubernetes does, and the reason says so: a platform team annotates
such a class with ``jobset.sigs.k8s.io/colocate-claims: "false"`` once, and its claims are
never pinned.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.jobset.volumes.model import COLOCATE_ANNOTATION
from controller.jobset.volumes.observed import StorageClasses

# In-tree provisioners whose volumes Kubernetes hands to a CSI driver (CSI migration, GA): their
# attach is that driver's (k8s.io/csi-translation-lib, plugins/*.go).
MIGRATED = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
}
_OPT_OUT = (
    f'annotate the class {COLOCATE_ANNOTATION}: "false" if several nodes can mount its volumes'
)


@dataclass(frozen=True)
class Attach:
    """Whether the storage attaches each volume to one node (so the pods that share a
    ReadWriteOnce claim of it must share that node), and why, for the condition's message:
    class, then provisioner and CSIDriver. ``assumed``: not known, taken to attach."""

    attaches: bool
    why: str
    assumed: bool = False


def attaches(storage_class: str | None, classes: StorageClasses) -> Attach:
    """The storage of a claim whose template asks for ``storage_class`` (None: the default)."""
    if classes.names is None:
        return Attach(True, "the storage classes are not known: assumed to attach", True)
    if storage_class == "":
        return Attach(
            True,
            'no storage class (storageClassName: ""), so no CSIDriver: assumed to attach',
            True,
        )
    name, label = storage_class, f"class {storage_class}"
    if name is None:
        if classes.default_class is None:
            return Attach(
                True, "no storage class given and no default class: assumed to attach", True
            )
        name = classes.default_class
        label = f"class {name} (the default)"
    if name not in classes.names:
        return Attach(True, f"{label} does not exist (yet): assumed to attach", True)
    said = classes.colocate.get(name)
    if said == "false":
        return Attach(False, f'{label} is annotated {COLOCATE_ANNOTATION}: "false"')
    if said == "true":
        return Attach(True, f'{label} is annotated {COLOCATE_ANNOTATION}: "true"')
    ignored = (
        ""
        if said is None
        else f' ({COLOCATE_ANNOTATION}: "{said}" on the class is not "true" or "false")'
    )
    provisioner = classes.provisioners.get(name, "")
    driver = MIGRATED.get(provisioner, provisioner)
    via = f"{label}, provisioner {provisioner}" + (
        "" if driver == provisioner else f" (CSI driver {driver})"
    )
    if classes.attach_required is None:
        return Attach(
            True, f"{via}: the CSIDrivers cannot be read, assumed to attach{ignored}", True
        )
    required = classes.attach_required.get(driver)
    if required is None:
        return Attach(
            True,
            f"{via}: no CSIDriver {driver}, so its volumes are taken to attach, as Kubernetes "
            f"does ({_OPT_OUT}){ignored}",
            True,
        )
    if required:
        return Attach(True, f"{via}: CSIDriver {driver} has attachRequired: true{ignored}")
    return Attach(
        False,
        f"{via}: CSIDriver {driver} has attachRequired: false, its volumes are never attached"
        f"{ignored}",
    )
