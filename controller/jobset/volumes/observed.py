"""Typed, frozen views of what exists: claims, storage classes and the VolumeSnapshots the
controller took, each read once per object version."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from controller.jobset import api
from controller.jobset.quantity import quantity
from controller.jobset.volumes.model import (
    CLAIM_TEMPLATE_LABEL,
    COLOCATE_ANNOTATION,
    GROUP_OF_JOBSET_ANNOTATION,
    OWNER_UID_ANNOTATION,
    RESTORED_FROM_GROUP_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    SNAPSHOT_OF_UID_ANNOTATION,
    Colocate,
    as_dict,
    as_list,
    colocate_mode,
    storage_of,
)
from controller.runtime.store import Obj, stable_metadata


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_dict(value).items() if v is not None}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class ClaimView:
    """A PersistentVolumeClaim as the volume logic sees it; ``raw`` is the cached object."""

    name: str
    uid: str
    # The version judged: a delete carries it (and the uid) as preconditions (``ClaimDelete``).
    resource_version: str = field(hash=False, compare=False)
    phase: str  # Pending | Bound | Lost | "" (not reported yet)
    labels: Mapping[str, str] = field(hash=False)
    annotations: Mapping[str, str] = field(hash=False)
    owner_references: tuple[Obj, ...] = field(hash=False)
    storage: Decimal | None  # the storage request, as a number
    storage_text: str | None  # ... as written
    storage_class: str | None  # spec.storageClassName; None when not set
    terminating: bool
    spec: Obj = field(hash=False, repr=False)
    raw: Obj = field(hash=False, repr=False, compare=False)

    @classmethod
    def of(cls, obj: Obj) -> ClaimView:
        meta = as_dict(obj.get("metadata"))
        spec = as_dict(obj.get("spec"))
        storage = storage_of(spec)
        storage_class = spec.get("storageClassName")
        phase = as_dict(obj.get("status")).get("phase")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            phase=phase if isinstance(phase, str) else "",
            labels=_strings(meta.get("labels")),
            annotations=_strings(meta.get("annotations")),
            owner_references=tuple(
                r for r in as_list(meta.get("ownerReferences")) if isinstance(r, dict)
            ),
            storage=quantity(storage),
            storage_text=None if storage is None else str(storage),
            storage_class=storage_class if isinstance(storage_class, str) else None,
            terminating=bool(meta.get("deletionTimestamp")),
            spec=spec,
            raw=obj,
        )

    @property
    def jobset_name(self) -> str | None:
        return self.labels.get(api.JOBSET_NAME)

    @property
    def owner_uid(self) -> str | None:
        """The JobSet instance the claim was made for or adopted by (our annotation)."""
        return self.annotations.get(OWNER_UID_ANNOTATION)

    @property
    def retained_from(self) -> str | None:
        return self.annotations.get(RETAINED_FROM_ANNOTATION)

    @property
    def node_selected(self) -> bool:
        return SELECTED_NODE_ANNOTATION in self.annotations

    @property
    def restored_from_group(self) -> str | None:
        """The VolumeGroupSnapshot whose member the claim was restored from, if so."""
        return self.annotations.get(RESTORED_FROM_GROUP_ANNOTATION)

    @property
    def restored_from(self) -> str | None:
        """The VolumeSnapshot the claim's data came from (``spec.dataSourceRef``), if any."""
        ref = as_dict(self.spec.get("dataSourceRef")) or as_dict(self.spec.get("dataSource"))
        if ref.get("kind") != "VolumeSnapshot" or ref.get("apiGroup") != SNAPSHOT_GROUP:
            return None
        name = ref.get("name")
        return name if isinstance(name, str) and name else None


# Written on a claim by Kubernetes' volume controllers as they provision and bind it; no decision
# of this controller reads them (unless a claim template names one, which nothing sensible does:
# a pass for another reason still sees the claim whole).
_BINDING_ANNOTATIONS = frozenset(
    {
        "pv.kubernetes.io/bind-completed",
        "pv.kubernetes.io/bound-by-controller",
        "volume.kubernetes.io/storage-provisioner",
        "volume.beta.kubernetes.io/storage-provisioner",
    }
)


def _read_part(obj: Obj) -> tuple[Obj, Obj, object]:
    meta = stable_metadata(obj)
    annotations = as_dict(meta.get("annotations"))
    if _BINDING_ANNOTATIONS.intersection(annotations):
        meta["annotations"] = {
            k: v for k, v in annotations.items() if k not in _BINDING_ANNOTATIONS
        }
    spec = as_dict(obj.get("spec"))
    if "volumeName" in spec:
        spec = {k: v for k, v in spec.items() if k != "volumeName"}
    return meta, spec, as_dict(obj.get("status")).get("phase")


def claim_changed(old: Obj, new: Obj) -> bool:
    """Whether a claim's update changes what this controller reads of it, and so is worth a
    pass of the JobSets it concerns.

    Of the six updates a dynamically provisioned claim gets (measured on the local control
    plane: the provisioner's annotations; the binding, ``spec.volumeName`` with two more
    annotations; ``status.phase`` Bound; three of the ``Unused`` condition as pods come and
    go), only the phase is read. What is left out of the comparison is a short deny list, the
    rest all counts: ``resourceVersion`` and ``managedFields``, the volume controllers'
    bookkeeping annotations, ``spec.volumeName`` and the status other than its phase (capacity,
    access modes, conditions): nothing in ``ClaimView``, the storage metrics or the ownership
    proof reads them. Pure.
    """
    return _read_part(old) != _read_part(new)


def views(claims: Iterable[Obj]) -> dict[str, ClaimView]:
    """Claim name → view."""
    result = {}
    for obj in claims:
        view = ClaimView.of(obj)
        result[view.name] = view
    return result


DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",  # still honoured by Kubernetes
)


@dataclass(frozen=True)
class StorageClasses:
    """What the controller needs to know of the cluster's storage: the StorageClasses (from its
    cache), the CSIDrivers' ``attachRequired`` and the cluster-wide ``--colocate-claims``
    (whether pods that share a ReadWriteOnce claim are kept on one node: ``attach``)."""

    wait_for_first_consumer: frozenset[str] = frozenset()
    expandable: frozenset[str] = frozenset()
    # Every class that exists; None when unknown (no cache), so that no class is called missing.
    names: frozenset[str] | None = None
    # Each class's provisioner, and its colocate-claims annotation where it has one.
    provisioners: Mapping[str, str] = field(default_factory=dict)
    colocate: Mapping[str, str] = field(default_factory=dict)
    # The class a claim without storageClassName gets (Kubernetes' choice among the defaults).
    default_class: str | None = None
    # Each CSIDriver object's spec.attachRequired (absent: True); None when they cannot be read.
    attach_required: Mapping[str, bool] | None = None
    colocate_claims: Colocate = "auto"

    @staticmethod
    def of(
        objects: Iterable[Obj] | None,
        drivers: Iterable[Obj] | None,
        colocate_claims: str = "auto",
    ) -> StorageClasses:
        """From StorageClass objects and CSIDriver objects (None: not known) and a
        ``--colocate-claims`` mode (``render``, from a cluster's objects as kubectl prints them)."""
        return replace(
            StorageClasses() if objects is None else storage_classes(objects),
            attach_required=None if drivers is None else attach_required(drivers),
            colocate_claims=colocate_mode(colocate_claims),
        )

    def missing(self, name: str | None) -> bool:
        """Whether ``name`` (a claim's storageClassName) names a class that does not exist.

        No class (None: the default class, or none when there is no default) and "" (no class:
        static binding) are never missing."""
        return bool(name) and self.names is not None and name not in self.names


def _is_default(annotations: Mapping[str, str]) -> bool:
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def storage_classes(objects: Iterable[Obj]) -> StorageClasses:
    """What the volume logic needs of the StorageClasses that exist (the informer's objects)."""
    wffc, expandable, names = set(), set(), set()
    provisioners, colocate = {}, {}
    defaults: list[tuple[str, str]] = []  # (creationTimestamp, name)
    for sc in objects:
        meta = as_dict(sc.get("metadata"))
        name = str(meta.get("name", ""))
        names.add(name)
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer":
            wffc.add(name)
        if sc.get("allowVolumeExpansion") is True:
            expandable.add(name)
        provisioners[name] = _text(sc.get("provisioner"))
        annotations = _strings(meta.get("annotations"))
        if COLOCATE_ANNOTATION in annotations:
            colocate[name] = annotations[COLOCATE_ANNOTATION]
        if _is_default(annotations):
            defaults.append((_text(meta.get("creationTimestamp")), name))
    # Of several default classes Kubernetes gives a claim the newest, then the first by name
    # (RFC 3339 timestamps of the API server compare as text).
    newest = max((stamp for stamp, _ in defaults), default=None)
    default = min((n for stamp, n in defaults if stamp == newest), default=None)
    return StorageClasses(
        frozenset(wffc),
        frozenset(expandable),
        frozenset(names),
        provisioners,
        colocate,
        default,
    )


def attach_required(objects: Iterable[Obj]) -> dict[str, bool]:
    """Each CSIDriver object's ``spec.attachRequired`` by its name (the driver's): absent counts
    as True, as the API server's default and the kubelet read it."""
    return {
        str(as_dict(d.get("metadata")).get("name", "")): as_dict(d.get("spec")).get(
            "attachRequired"
        )
        is not False
        for d in objects
    }


SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


@dataclass(frozen=True)
class SnapshotView:
    """A VolumeSnapshot as the volume logic sees it (the controller watches those labelled with
    a JobSet's name). ``of_claim_uid``: our annotation, the uid of the claim it was taken of:
    without it the snapshot is not the controller's (never restored from, never pruned)."""

    name: str
    labels: Mapping[str, str] = field(hash=False)
    source_claim: str  # spec.source.persistentVolumeClaimName ("" for a pre-provisioned one)
    of_claim_uid: str | None
    ready: bool  # status.readyToUse
    error: str  # status.error.message, "" when none
    # status.creationTime (RFC 3339, comparable as text) or, before it is set, the object's
    created: str
    deleting: bool
    # A member of a VolumeGroupSnapshot (the snapshot controller makes one per claim of the
    # group, owned by it): the group's uid.
    group_uid: str | None = None
    # metadata.creationTimestamp: when it was asked for (how long a wait for it has lasted).
    requested: str = ""

    @classmethod
    def of(cls, obj: Obj) -> SnapshotView:
        meta = as_dict(obj.get("metadata"))
        status = as_dict(obj.get("status"))
        source = as_dict(as_dict(obj.get("spec")).get("source"))
        claim = source.get("persistentVolumeClaimName")
        error = as_dict(status.get("error")).get("message")
        created = status.get("creationTime") or meta.get("creationTimestamp")
        return cls(
            name=str(meta.get("name") or ""),
            labels=_strings(meta.get("labels")),
            source_claim=claim if isinstance(claim, str) else "",
            of_claim_uid=_strings(meta.get("annotations")).get(SNAPSHOT_OF_UID_ANNOTATION),
            ready=status.get("readyToUse") is True,
            error=error if isinstance(error, str) else "",
            created=created if isinstance(created, str) else "",
            deleting=bool(meta.get("deletionTimestamp")),
            group_uid=group_of(obj),
            requested=_text(meta.get("creationTimestamp")),
        )

    @property
    def ours(self) -> bool:
        return bool(self.of_claim_uid) and bool(self.source_claim)

    @property
    def template(self) -> str | None:
        return self.labels.get(CLAIM_TEMPLATE_LABEL)


def group_of(obj: Obj) -> str | None:
    """The uid of the VolumeGroupSnapshot owning a member VolumeSnapshot, if any."""
    for ref in as_list(as_dict(obj.get("metadata")).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("kind") == "VolumeGroupSnapshot" and ref.get("uid"):
            return str(ref["uid"])
    return None


GROUP_INDEX = "volume-group-snapshot"


def by_group(obj: Obj) -> list[str]:
    """Cache indexer: a member VolumeSnapshot by its group's uid."""
    found = group_of(obj)
    return [found] if found else []


@dataclass(frozen=True)
class GroupView:
    """A VolumeGroupSnapshot the controller took (labelled with a JobSet's name and a policy's
    first template, annotated with the JobSet's uid)."""

    name: str
    uid: str
    labels: Mapping[str, str] = field(hash=False)
    of_jobset_uid: str | None
    ready: bool
    error: str
    created: str
    deleting: bool
    requested: str = ""  # metadata.creationTimestamp

    @classmethod
    def of(cls, obj: Obj) -> GroupView:
        meta = as_dict(obj.get("metadata"))
        status = as_dict(obj.get("status"))
        error = as_dict(status.get("error")).get("message")
        created = status.get("creationTime") or meta.get("creationTimestamp")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=_strings(meta.get("labels")),
            of_jobset_uid=_strings(meta.get("annotations")).get(GROUP_OF_JOBSET_ANNOTATION),
            ready=status.get("readyToUse") is True,
            error=error if isinstance(error, str) else "",
            created=created if isinstance(created, str) else "",
            deleting=bool(meta.get("deletionTimestamp")),
            requested=_text(meta.get("creationTimestamp")),
        )

    @property
    def template(self) -> str | None:
        return self.labels.get(CLAIM_TEMPLATE_LABEL)
