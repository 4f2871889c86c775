"""The volume model's data: names of the labels and annotations it writes, and the parsed policies.

Everything here is plain frozen data. ``spec`` parses a JobSet into it (once per reconcile),
``desired`` turns it into claims and pod volumes, ``observed`` views the claims that exist,
``ownership`` says which of them are this JobSet's, ``lifecycle`` plans the writes and
``status`` reports the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from controller.jobset import api
from controller.runtime.store import Obj

Scope = Literal["JobSet", "Job", "Pod"]
# Retain: keep the claim. Delete: delete it. Snapshot: take a VolumeSnapshot of it, and delete
# the claim only once that snapshot is readyToUse (snapshots.py).
Keep = Literal["Retain", "Delete", "Snapshot"]
# retentionPolicy.whenSuspended: keep the claims of a suspended JobSet, or let each go through a
# snapshot of it while the JobSet waits (suspension.py) and make it again from that on resume.
KeepWhenSuspended = Literal["Retain", "Snapshot"]
# restorePolicy.source: each new claim starts from the newest ready snapshot of its name, or from
# one named VolumeSnapshot.
RestoreSource = Literal["NewestSnapshot", "VolumeSnapshot"]
# restorePolicy.whenMissing: no snapshot to start from (a snapshot that exists but is not ready
# yet is always waited for).
WhenMissing = Literal["Wait", "CreateEmpty"]
# creationPolicy.whenSuspended: a suspended JobSet (queued by Kueue, say) creates and adopts its
# missing claims only once resumed (WaitForResume), or at once (Create).
WhenSuspended = Literal["WaitForResume", "Create"]

# Labels on the claims we create (besides api.JOBSET_NAME, and for Job and Pod scope
# api.REPLICATED_JOB_NAME and api.JOB_INDEX).
CLAIM_TEMPLATE_LABEL = "jobset.sigs.k8s.io/volume-template"
CLAIM_SCOPE_LABEL = "jobset.sigs.k8s.io/volume-scope"
# On a Pod-scope claim: the completion index of the pod that mounts it. Ours, next to upstream's
# job-index, rather than Kubernetes' batch.kubernetes.io/job-completion-index (the pods' label):
# keys under kubernetes.io are the Kubernetes project's, and the claim is not a pod.
CLAIM_POD_INDEX_LABEL = "jobset.sigs.k8s.io/pod-index"
# On the pod template of a Pod-scope replicated job: selects its pods for the admission policy
# that resolves their placeholder claim names (podscope.py, manifests/pod-scope/).
POD_SCOPE_LABEL = "jobset.sigs.k8s.io/pod-scope-volumes"
# On the pod template of a Job whose pods share a ReadWriteOnce claim with pods that run at the
# same time: the group of claims they share, which a required pod affinity keeps on one node
# (singlenode.py).
SINGLE_NODE_LABEL = "jobset.sigs.k8s.io/single-node-claims"
# On the JobSet: "false" turns that off, "true" turns it on whatever the storage; absent, the
# controller's --colocate-claims decides (by default from the storage: singlenode.py, attach.py).
# On a StorageClass: "false" says several nodes can mount its ReadWriteOnce volumes (an NFS
# provisioner that is no CSI driver), "true" that they attach (whatever its CSIDriver says).
COLOCATE_ANNOTATION = "jobset.sigs.k8s.io/colocate-claims"
# The controller's cluster-wide switch (--colocate-claims): keep the pods that share a
# ReadWriteOnce claim on one node where its storage attaches volumes to nodes (auto), always, or
# never. The JobSet's annotation overrides it.
Colocate = Literal["auto", "always", "never"]
COLOCATE_MODES: tuple[Colocate, ...] = ("auto", "always", "never")


def colocate_mode(value: str) -> Colocate:
    """``value`` as a ``--colocate-claims`` mode; raises ValueError for another value."""
    for mode in COLOCATE_MODES:
        if value == mode:
            return mode
    raise ValueError(f"--colocate-claims must be auto, always or never, got {value!r}")


# The uid of the JobSet instance that currently owns the claim.
OWNER_UID_ANNOTATION = "jobset.sigs.k8s.io/jobset-uid"
# Set when a JobSet with ``whenDeleted: Retain`` went away: the uid it was retained from. The only
# proof (besides the owner uid) that a claim was this controller's: labels are copied by charts.
RETAINED_FROM_ANNOTATION = "jobset.sigs.k8s.io/retained-from-uid"
# On a claim restored from a member of a VolumeGroupSnapshot: the group (its dataSourceRef names
# only the member), so the status can say every rank came from the same group.
RESTORED_FROM_GROUP_ANNOTATION = "jobset.sigs.k8s.io/restored-from-group"
# On the JobSet: the explicit, one-shot acceptance of an empty replacement for Lost claims,
# ``<claim name>@<uid prefix of the lost claim>`` separated by commas (lifecycle.py).
REPLACE_LOST_ANNOTATION = "jobset.sigs.k8s.io/replace-lost-claims"
FINALIZER = "jobset.x-k8s.io/volume-retention"
# On the VolumeSnapshots the controller takes (retention Snapshot): the uid of the claim it was
# taken of (the proof that it is ours to restore from and to prune), and, when it fits in a
# label value, the claim's name (the JobSet name and template are labelled too).
SNAPSHOT_OF_UID_ANNOTATION = "jobset.sigs.k8s.io/snapshot-of-claim-uid"
SNAPSHOT_CLAIM_LABEL = "jobset.sigs.k8s.io/volume-claim"
# On the VolumeGroupSnapshots it takes (snapshotPolicy.volumeGroupSnapshotClassName): the uid of
# the JobSet whose claims it holds (labelled with its name and the policy's first template).
GROUP_OF_JOBSET_ANNOTATION = "jobset.sigs.k8s.io/group-snapshot-of-jobset-uid"
# Set by the scheduler on a WaitForFirstConsumer claim once a pod using it was placed.
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"

# Claims one JobSet may ask for, as many as child Jobs (api.MAX_CHILD_JOBS): every reconcile lists
# every desired claim several times; 10,000 claims and Jobs plan in 1.5-2.5 s on a 2-core machine.
MAX_CLAIMS = api.MAX_CHILD_JOBS


@dataclass(frozen=True)
class Retention:
    when_deleted: Keep = api.DEFAULT_WHEN_DELETED
    when_completed: Keep = api.DEFAULT_WHEN_COMPLETED
    when_failed: Keep = api.DEFAULT_WHEN_FAILED
    when_scaled: Keep = api.DEFAULT_WHEN_SCALED
    when_suspended: KeepWhenSuspended = api.DEFAULT_WHEN_SUSPENDED

    @property
    def snapshots(self) -> bool:
        """Some case lets claims go through a snapshot."""
        return "Snapshot" in (
            self.when_deleted,
            self.when_completed,
            self.when_failed,
            self.when_scaled,
            self.when_suspended,
        )


@dataclass(frozen=True)
class SnapshotPolicy:
    """How retention's snapshots are taken and how many are kept (``snapshotPolicy``)."""

    # None: the cluster's default VolumeSnapshotClass for the claim's driver.
    class_name: str | None = None
    # Per claim name, the newest ``history_limit`` ready snapshots are kept; older ones go (with
    # groups: per policy, the newest groups).
    history_limit: int = 1
    # Set: the claims one case lets go at once are snapshotted together, in a VolumeGroupSnapshot.
    group_class_name: str | None = None


@dataclass(frozen=True)
class RestorePolicy:
    """Where a new claim's data comes from (``restorePolicy``)."""

    source: RestoreSource
    snapshot_name: str = ""  # with source VolumeSnapshot
    when_missing: WhenMissing = "Wait"
    # With source NewestSnapshot: the JobSet (a previous run) whose claims' snapshots to take,
    # the claim in the same slot; "": this JobSet's own.
    from_jobset: str = ""


@dataclass(frozen=True)
class ClaimTemplate:
    name: str
    labels: dict[str, str] = field(hash=False)
    annotations: dict[str, str] = field(hash=False)
    spec: Obj = field(hash=False)  # PersistentVolumeClaimSpec; never mutate


@dataclass(frozen=True)
class VolumePolicy:
    templates: tuple[ClaimTemplate, ...]
    retention: Retention
    targets: tuple[str, ...] | None  # None: every replicated job that mounts a template's name
    scope: Scope
    where: str = ""  # the field it came from, for messages: spec.volumeClaimPolicies[0], ...
    when_suspended: WhenSuspended = "WaitForResume"
    snapshots: SnapshotPolicy = SnapshotPolicy()
    restore: RestorePolicy | None = None  # None: new claims start empty
    # Fields the volume policy annotations set over another value of the spec's, each as the
    # condition VolumePolicyOverridden says it (``metadata.Override``).
    overrides: tuple[str, ...] = ()
    # The volume policy annotations that set a field of it (``metadata.Overlaid.applied``): a
    # refusal of what only the controller checks names them, as the rules' refusals do.
    declared_by: tuple[str, ...] = ()


def as_dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def storage_of(spec: Any) -> Any:
    """``spec.resources.requests.storage`` of a claim spec, as written (None when absent)."""
    return as_dict(as_dict(as_dict(spec).get("resources")).get("requests")).get("storage")


_SHOWN = 5  # names listed in a message before "and N more"


def listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    more = len(names) - _SHOWN
    return shown if more <= 0 else f"{shown} and {more} more"
