"""The JobSet's own scalar fields, one typed record each: the single definition of a field's
type, bounds, allowed values, default and description.

From a :class:`Field` come both

- its node in the CRD's structural schema (:meth:`Field.schema`, placed by ``schema.Builder``),
  so also the field tables of docs/api.md (``fielddocs``, read from the CRD) and the
  contract's checks (``validation``, read from the CRD); and
- the controller's reading of it (:meth:`Field.read`, used by the parsers ``jobset.model`` and
  ``jobset.volumes.spec``): the value, or what leaving it out means, checked against the same
  type, bounds and allowed values.

So a changed bound, default or allowed value changes the CRD, the docs, the contract and the
parser together (tests/unit/test_fields.py). The parser reads a stored object, which the API
server has already checked against the schema; it checks again because the object may have been
stored under an older CRD, or under upstream JobSet's.

The objects and lists around these fields, and the rules across fields, are ``schema``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from controller.jobset import api

Schema = dict[str, Any]
T = TypeVar("T", str, int, bool)

# Bounds of names (also the CEL rules' cost bounds: schema.py).
MAX_NAME: Final = 63  # replicated job, template, volume, container and volumeMount names
MAX_OBJECT_NAME: Final = 253
MAX_RULE_NAME: Final = 128
MAX_CHILD_JOBS: Final = api.MAX_CHILD_JOBS
# The rule name a failure policy rule gets when it has none: this prefix and its index.
DEFAULT_RULE_NAME_PREFIX: Final = "failurePolicyRule"
RULE_NAME_REGEX: Final = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class FieldInvalid(ValueError):
    """A field's value is not one the schema admits; the message names the field."""


def _one_of(values: tuple[str, ...]) -> str:
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


@dataclass(frozen=True)
class Field(Generic[T]):
    """One scalar field. ``default`` is written into the object by the API server (the schema's
    ``default``); ``implied`` is what leaving the field out means when the schema writes no
    default of its own (the object around it is defaulted instead, or the controller decides)."""

    path: str  # as docs/api.md and messages name it: spec.replicatedJobs[].replicas
    type: type[T]
    description: str
    default: T | None = None
    implied: T | None = None
    enum: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None

    @property
    def name(self) -> str:
        """The field's key in the object that holds it."""
        return self.path.rsplit(".", 1)[-1]

    @property
    def when_absent(self) -> T | None:
        """What the field is when left out."""
        return self.default if self.default is not None else self.implied

    def schema(self) -> Schema:
        """The field's node in the CRD's structural schema."""
        if self.type is bool:
            node: Schema = {"type": "boolean", "description": self.description}
        elif self.type is int:
            node = {"type": "integer", "format": "int32", "description": self.description}
        else:
            node = {"type": "string", "description": self.description}
        if self.enum:
            node["enum"] = list(self.enum)
        if self.minimum is not None:
            node["minimum"] = self.minimum
        if self.maximum is not None:
            node["maximum"] = self.maximum
        if self.max_length is not None:
            node["maxLength"] = self.max_length
        if self.default is not None:
            node["default"] = self.default
        return node

    def read(self, value: Any, where: str) -> T | None:
        """``value`` (the field at ``where`` of a stored object), or what leaving it out means;
        raises :class:`FieldInvalid` for a value the schema does not admit. An empty string is
        left out for a field that has a meaning when left out (as upstream reads it)."""
        if value is None or (value == "" and self.type is str and self.when_absent is not None):
            return self.when_absent
        if self.type is bool:
            if not isinstance(value, bool):
                raise FieldInvalid(f"{where} must be true or false, got {value!r}")
        elif self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise FieldInvalid(f"{where} must be an integer, got {value!r}")
            if self.minimum is not None and value < self.minimum:
                raise FieldInvalid(f"{where} must be at least {self.minimum}, got {value}")
            if self.maximum is not None and value > self.maximum:
                raise FieldInvalid(f"{where} must be at most {self.maximum}, got {value}")
        else:
            if not isinstance(value, str):
                raise FieldInvalid(f"{where} must be a string, got {value!r}")
            if self.enum and value not in self.enum:
                raise FieldInvalid(f"{where} must be {_one_of(self.enum)}, got {value!r}")
            if self.max_length is not None and len(value) > self.max_length:
                raise FieldInvalid(
                    f"{where} must be at most {self.max_length} characters, got {len(value)}"
                )
        return value  # type: ignore[no-any-return]


# ------------------------------------------------------------------------ replicated jobs

REPLICATED_JOB_NAME: Final = Field(
    "spec.replicatedJobs[].name",
    str,
    "Name of the replicated job, unique in the JobSet, also ignoring case. Child Jobs are named "
    "<jobSet>-<name>-<jobIndex> (the name in lower case).",
    max_length=MAX_NAME,
)
GROUP_NAME: Final = Field(
    "spec.replicatedJobs[].groupName",
    str,
    "The group of the replicated job, in the jobset.sigs.k8s.io/group-name label of its Jobs "
    "and pods. A DNS-1035 label. Defaults to default.",
    default=api.DEFAULT_GROUP_NAME,
    max_length=MAX_OBJECT_NAME,
)
REPLICAS: Final = Field(
    "spec.replicatedJobs[].replicas",
    int,
    "Number of child Jobs made from the template; replicas times the template's parallelism is "
    "at most 2147483647. May change at any time, also while the JobSet runs (an extension over "
    "upstream): lowering it deletes the Jobs whose index is replicas or more, raising it adds "
    "Jobs. Defaults to 1.",
    default=api.DEFAULT_REPLICAS,
    minimum=0,
    maximum=MAX_CHILD_JOBS,
)
DEPENDENCY_NAME: Final = Field(
    "spec.replicatedJobs[].dependsOn[].name",
    str,
    "Name of an earlier replicated job.",
    max_length=MAX_NAME,
)
DEPENDENCY_STATUS: Final = Field(
    "spec.replicatedJobs[].dependsOn[].status",
    str,
    "Ready or Complete.",
    enum=("Ready", "Complete"),
)

# -------------------------------------------------------------------------------- network

ENABLE_DNS_HOSTNAMES: Final = Field(
    "spec.network.enableDNSHostnames",
    bool,
    "Give every pod the hostname <jobSet>-<replicatedJob>-<jobIndex>-<podIndex>, resolvable "
    "through the headless Service. Defaults to true.",
    default=api.DEFAULT_ENABLE_DNS_HOSTNAMES,
)
SUBDOMAIN: Final = Field(
    "spec.network.subdomain",
    str,
    "Name of the headless Service, the pods' DNS subdomain. Defaults to the JobSet's name. A "
    "DNS-1035 label (at most 63 characters).",
    max_length=MAX_OBJECT_NAME,
)
PUBLISH_NOT_READY_ADDRESSES: Final = Field(
    "spec.network.publishNotReadyAddresses",
    bool,
    "Publish DNS records of pods before they are ready. Defaults to true.",
    default=api.DEFAULT_PUBLISH_NOT_READY_ADDRESSES,
)

# ---------------------------------------------------------------------- success and failure

SUCCESS_OPERATOR: Final = Field(
    "spec.successPolicy.operator",
    str,
    "All: every Job of the target replicated jobs must succeed. Any: one succeeded Job of the "
    "target replicated jobs is enough. Required when successPolicy is given.",
    implied=api.DEFAULT_SUCCESS_OPERATOR,  # successPolicy's own default
    enum=("All", "Any"),
)
MAX_RESTARTS: Final = Field(
    "spec.failurePolicy.maxRestarts",
    int,
    "How many times the JobSet may restart (recreate its child Jobs) before a further failure "
    "fails it. Defaults to 0.",
    implied=0,  # no schema default, as upstream
)
RESTART_STRATEGY: Final = Field(
    "spec.failurePolicy.restartStrategy",
    str,
    "Recreate: recreate each Job as soon as its previous incarnation is gone. "
    "BlockingRecreate: recreate Jobs only when every Job of the previous attempt, and its pods, "
    "are gone. Defaults to Recreate.",
    default=api.DEFAULT_RESTART_STRATEGY,
    enum=("Recreate", "BlockingRecreate"),
)
FAILURE_RULE_NAME: Final = Field(
    "spec.failurePolicy.rules[].name",
    str,
    f"Name of the rule, unique in the policy. Left out or empty: {DEFAULT_RULE_NAME_PREFIX}"
    f"<index>. Matches {RULE_NAME_REGEX}.",
    max_length=MAX_RULE_NAME,
)
FAILURE_ACTION: Final = Field(
    "spec.failurePolicy.rules[].action",
    str,
    "FailJobSet: fail the JobSet at once. RestartJobSet: recreate every child Job, counting "
    "towards maxRestarts (the JobSet fails when they are used up). "
    "RestartJobSetAndIgnoreMaxRestarts: recreate without counting. RestartJob (alpha, "
    "RestartJob feature gate): recreate only the failed Job, counting towards maxRestarts. "
    "RestartJobAndIgnoreMaxRestarts (alpha, same gate): recreate only the failed Job without "
    "counting.",
    enum=(
        api.FAIL_JOBSET,
        api.RESTART_JOBSET,
        api.RESTART_JOBSET_IGNORE_MAX,
        *api.RESTART_JOB_ACTIONS,
    ),
)

# ------------------------------------------------------------------ startup, the rest of spec

STARTUP_ORDER: Final = Field(
    "spec.startupPolicy.startupPolicyOrder",
    str,
    "AnyOrder: start all at once. InOrder: start a replicated job when every Job of the one "
    "before it is ready.",
    implied=api.DEFAULT_STARTUP_ORDER,  # startupPolicy's own default
    enum=("AnyOrder", "InOrder"),
)
COORDINATOR_REPLICATED_JOB: Final = Field(
    "spec.coordinator.replicatedJob",
    str,
    "The replicated job of the coordinator pod; its Jobs must be Indexed.",
    max_length=MAX_NAME,
)
COORDINATOR_JOB_INDEX: Final = Field(
    "spec.coordinator.jobIndex",
    int,
    "The job index of the coordinator's Job, less than that replicated job's replicas. "
    "Defaults to 0.",
    implied=0,
    minimum=0,
)
COORDINATOR_POD_INDEX: Final = Field(
    "spec.coordinator.podIndex",
    int,
    "The completion index of the coordinator pod in its Job, less than its completions (when "
    "set). Defaults to 0.",
    implied=0,
    minimum=0,
)
SUSPEND: Final = Field(
    "spec.suspend",
    bool,
    "Suspend the JobSet: its child Jobs are suspended (their pods deleted) until this is false "
    "again.",
    implied=False,
)
TTL_SECONDS_AFTER_FINISHED: Final = Field(
    "spec.ttlSecondsAfterFinished",
    int,
    "Delete the JobSet this many seconds after it finished (from the lastTransitionTime of its "
    "Completed or Failed condition). As upstream, with foreground propagation: the JobSet shows "
    "a deletionTimestamp while the garbage collector deletes its Jobs, and goes after them; "
    "volume retention still runs. Left out: never.",
    minimum=0,
)

# ---------------------------------------------------------------------------------- volumes

VOLUME_SCOPE: Final = Field(
    "spec.volumeClaimPolicies[].scope",
    str,
    "JobSet (default): one claim per template, shared by every pod, named <template>-<jobSet>. "
    "Job: one claim per child Job, named <template>-<jobSet>-<replicatedJob>-<jobIndex>, kept "
    "across restarts. Pod: one claim per child Job and pod completion index, named "
    "<template>-<jobSet>-<replicatedJob>-<jobIndex>-<podIndex> (Indexed Jobs only; needs the "
    "admission policy of manifests/pod-scope, Kubernetes 1.36+).",
    default=api.DEFAULT_VOLUME_SCOPE,
    enum=("JobSet", "Job", "Pod"),
)
KEEP_CHOICES: Final = ("Retain", "Delete", "Snapshot")
# What Snapshot means, in each retention field's description.
_SNAPSHOT = (
    "Snapshot (an extension): each claim is deleted only once a VolumeSnapshot of it "
    "(snapshotPolicy) is readyToUse; a snapshot that fails or never becomes ready keeps the "
    "claim, and a condition and an Event say why."
)
WHEN_DELETED: Final = Field(
    "retentionPolicy.whenDeleted",
    str,
    "When the JobSet is deleted: Delete the claims (default), Retain them for a later JobSet "
    "of the same name to adopt, or Snapshot them. " + _SNAPSHOT,
    default=api.DEFAULT_WHEN_DELETED,
    enum=KEEP_CHOICES,
)
WHEN_COMPLETED: Final = Field(
    "retentionPolicy.whenCompleted",
    str,
    "When the JobSet has completed: Retain the claims (default), Delete them, or Snapshot "
    "them. " + _SNAPSHOT,
    default=api.DEFAULT_WHEN_COMPLETED,
    enum=KEEP_CHOICES,
)
WHEN_FAILED: Final = Field(
    "retentionPolicy.whenFailed",
    str,
    "When the JobSet has failed: Retain the claims (default), Delete them, or Snapshot them. "
    + _SNAPSHOT,
    default=api.DEFAULT_WHEN_FAILED,
    enum=KEEP_CHOICES,
)
WHEN_SCALED: Final = Field(
    "retentionPolicy.whenScaled",
    str,
    "Job and Pod scope: what happens to the claims of child Jobs (Pod scope: and completion "
    "indexes) that no longer exist after replicas (or, ElasticJobSet, completions) went down: "
    "Retain them (default), Delete them, or Snapshot them. " + _SNAPSHOT,
    default=api.DEFAULT_WHEN_SCALED,
    enum=KEEP_CHOICES,
)
RETAIN_WHEN_SUSPENDED: Final = Field(
    "retentionPolicy.whenSuspended",
    str,
    "When the JobSet is suspended after it ran (Kueue preempts it, or spec.suspend: true) and "
    "none of its pods runs any more: Retain the claims (default), or Snapshot them (an "
    "extension): each Bound claim is deleted once a VolumeSnapshot of it (snapshotPolicy) is "
    "readyToUse, and made again from the newest snapshot when the JobSet is resumed, before the "
    "Jobs that mount it resume; a snapshot that fails keeps the claim, and a condition and an "
    "Event say why. Snapshot requires restorePolicy.source: NewestSnapshot, and not "
    "creationPolicy.whenSuspended: Create.",
    default=api.DEFAULT_WHEN_SUSPENDED,
    enum=("Retain", "Snapshot"),
)
CREATE_WHEN_SUSPENDED: Final = Field(
    "creationPolicy.whenSuspended",
    str,
    "While the JobSet is suspended (queued by Kueue, say): WaitForResume (default) creates, or "
    "adopts, the claims it does not have yet only once it is resumed; Create makes them at "
    "once, so that storage that binds Immediately is ready when it starts. Claims that exist "
    "are kept either way.",
    implied="WaitForResume",
    enum=("WaitForResume", "Create"),
)

SNAPSHOT_CLASS_NAME: Final = Field(
    "snapshotPolicy.volumeSnapshotClassName",
    str,
    "The VolumeSnapshotClass of the snapshots the controller takes (retention Snapshot), a "
    "DNS subdomain. Left out: the cluster's default VolumeSnapshotClass for the claim's CSI "
    "driver.",
    max_length=MAX_OBJECT_NAME,
)
GROUP_SNAPSHOT_CLASS_NAME: Final = Field(
    "snapshotPolicy.volumeGroupSnapshotClassName",
    str,
    "A VolumeGroupSnapshotClass: the claims of this policy that one retention case lets go at "
    "once (the JobSet completed, failed or deleted; not a scale-down) are snapshotted together, "
    "in one VolumeGroupSnapshot, so that every rank's checkpoint is from the same moment; a new "
    "claim restored from the newest snapshot takes it from the newest such group. Left out: a "
    "VolumeSnapshot per claim.",
    max_length=MAX_OBJECT_NAME,
)
MAX_SNAPSHOT_HISTORY: Final = 100
SNAPSHOT_HISTORY_LIMIT: Final = Field(
    "snapshotPolicy.historyLimit",
    int,
    "Per claim, how many ready snapshots the controller took are kept: the newest historyLimit; "
    "the controller deletes older ones. Defaults to 1.",
    implied=1,
    minimum=1,
    maximum=MAX_SNAPSHOT_HISTORY,
)
RESTORE_SOURCE: Final = Field(
    "restorePolicy.source",
    str,
    "Where each claim the controller creates gets its data. NewestSnapshot: the newest ready "
    "snapshot the controller took of a claim of the same name (claim names are deterministic, "
    "so a JobSet applied again finds its own). VolumeSnapshot: every claim of the policy's "
    "templates starts from the VolumeSnapshot named in volumeSnapshotName. Required when "
    "restorePolicy is given.",
    enum=("NewestSnapshot", "VolumeSnapshot"),
)
RESTORE_SNAPSHOT_NAME: Final = Field(
    "restorePolicy.volumeSnapshotName",
    str,
    "The VolumeSnapshot, in the JobSet's namespace, that every claim of the policy's templates "
    "starts from. Required with source VolumeSnapshot, and only then.",
    max_length=MAX_OBJECT_NAME,
)
RESTORE_WHEN_MISSING: Final = Field(
    "restorePolicy.whenMissing",
    str,
    "When there is no snapshot to restore a claim from: Wait (default) does not create the "
    "claim, and the Jobs that mount it wait, with a condition saying so; CreateEmpty creates "
    "it empty. A snapshot that exists but is not ready yet is always waited for.",
    implied="Wait",
    enum=("Wait", "CreateEmpty"),
)
# The rules of retentionPolicy.whenSuspended: Snapshot (schema.py's suspend-snapshot-restores
# and suspend-snapshot-not-created), in the words the admission policy and the parser both use.
SUSPEND_SNAPSHOT_RESTORE_RULE: Final = (
    "retentionPolicy.whenSuspended: Snapshot requires restorePolicy.source: NewestSnapshot (the "
    "claims it deletes are made again from their snapshots when the JobSet is resumed)"
)
SUSPEND_SNAPSHOT_CREATE_RULE: Final = (
    "retentionPolicy.whenSuspended: Snapshot cannot be used with creationPolicy.whenSuspended: "
    "Create (the claims it deletes would be made again at once, while the JobSet is suspended)"
)
# The rule across restorePolicy's fields (schema.py's restore-snapshot-name), in the words the
# admission policy and the parser both use.
RESTORE_SNAPSHOT_NAME_RULE: Final = (
    "restorePolicy.volumeSnapshotName is required when restorePolicy.source is VolumeSnapshot, "
    "and must be left out otherwise"
)

ALL: Final[tuple[Field[Any], ...]] = (
    REPLICATED_JOB_NAME,
    GROUP_NAME,
    REPLICAS,
    DEPENDENCY_NAME,
    DEPENDENCY_STATUS,
    ENABLE_DNS_HOSTNAMES,
    SUBDOMAIN,
    PUBLISH_NOT_READY_ADDRESSES,
    SUCCESS_OPERATOR,
    MAX_RESTARTS,
    RESTART_STRATEGY,
    FAILURE_RULE_NAME,
    FAILURE_ACTION,
    STARTUP_ORDER,
    COORDINATOR_REPLICATED_JOB,
    COORDINATOR_JOB_INDEX,
    COORDINATOR_POD_INDEX,
    SUSPEND,
    TTL_SECONDS_AFTER_FINISHED,
    VOLUME_SCOPE,
    WHEN_DELETED,
    WHEN_COMPLETED,
    WHEN_FAILED,
    WHEN_SCALED,
    RETAIN_WHEN_SUSPENDED,
    CREATE_WHEN_SUSPENDED,
    SNAPSHOT_CLASS_NAME,
    GROUP_SNAPSHOT_CLASS_NAME,
    SNAPSHOT_HISTORY_LIMIT,
    RESTORE_SOURCE,
    RESTORE_SNAPSHOT_NAME,
    RESTORE_WHEN_MISSING,
)
