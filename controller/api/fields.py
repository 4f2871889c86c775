"""The JobSet's own fields, lists and objects, one typed record each: the single definition of a
field's type, bounds, allowed values, default and description, of a list's or a map's bounds, and
of an object's description, required keys and default.

From a :class:`Field` (a scalar), a :class:`ListField` (a list), a :class:`MapField` (a map of
strings) or an :class:`ObjectField` (a policy, a replicated job) come both

- its node in the CRD's structural schema (``schema()``, placed by ``schema.Builder``; for a list
  or map of an embedded Kubernetes type, ``bound()`` writes its bounds into the inlined node),
  so also the field tables of docs/api.md (``fielddocs``, read from the CRD) and the contract's
  checks (``validation``, read from the CRD); and
- the controller's reading of it (``read()``, used by the parsers ``jobset.model`` and
  ``jobset.volumes.spec``): the value, or what leaving it out means, checked against the same
  type, bounds and allowed values.

So a changed bound, default or allowed value changes the CRD, the docs, the contract and the
parser together (tests/unit/test_fields.py). The parser reads a stored object, which the API
server has already checked against the schema; it checks again because the object may have been
stored under an older CRD, or under upstream JobSet's. The numbers are ``bounds``'.

``schema`` places the records into the CRD (an object's properties are its fields' records, by
their names) and holds the rules across fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

from controller.api import bounds
from controller.jobset import api

# A node of a structural (OpenAPI v3) schema, as the CRD has it.
Schema = dict[str, Any]
T = TypeVar("T", str, int, bool)
R_co = TypeVar("R_co", covariant=True)
ListType = Literal["atomic", "set", "map"]

# The rule name a failure policy rule gets when it has none: this prefix and its index.
DEFAULT_RULE_NAME_PREFIX: Final = "failurePolicyRule"
RULE_NAME_REGEX: Final = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# The values a list admits, each at most once (its maxItems is their number).
JOB_FAILURE_REASONS: Final = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
ACCESS_MODES: Final = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


class FieldInvalid(ValueError):
    """A field's value is not one the schema admits; the message names the field."""


class Record(Protocol[R_co]):
    """A record of this module (a field, list, map or object): its key in the object that holds
    it, and the parser's reading of its value there."""

    @property
    def name(self) -> str: ...

    def read(self, value: Any, where: str) -> R_co: ...


def _one_of(values: tuple[str, ...]) -> str:
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def _item_count(
    where: str, found: int, least: int | None, most: int | None, nouns: tuple[str, str]
) -> None:
    """Refuses ``found`` items (``nouns``: one, more) outside ``least``..``most``."""
    if least is not None and found < least:
        noun = nouns[least != 1]
        raise FieldInvalid(f"{where} must have at least {least} {noun}, got {found}")
    if most is not None and found > most:
        noun = nouns[most != 1]
        raise FieldInvalid(f"{where} must have at most {most} {noun}, got {found}")


def _string_item(value: Any, where: str, max_length: int | None) -> str:
    if not isinstance(value, str):
        raise FieldInvalid(f"{where} must be a string, got {value!r}")
    if max_length is not None and len(value) > max_length:
        raise FieldInvalid(f"{where} must be at most {max_length} characters, got {len(value)}")
    return value


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
            _string_item(value, where, self.max_length)
            if self.enum and value not in self.enum:
                raise FieldInvalid(f"{where} must be {_one_of(self.enum)}, got {value!r}")
        return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ListField:
    """One list. Of the JobSet's own lists, its description and bounds; of a list in an embedded
    Kubernetes type (a container's volumeMounts), its bounds only, written into the inlined node
    (``bound``). ``item_max_length``: a list of strings' bound on each string. The description
    may name the bound as ``{max_items}``."""

    path: str  # as docs/api.md and messages name it; relative to a claim template in one
    description: str = ""
    max_items: int | None = None
    min_items: int | None = None
    item_max_length: int | None = None
    list_type: ListType = "atomic"
    map_keys: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The list's key in the object that holds it."""
        return self.path.rsplit(".", 1)[-1].removesuffix("[]")

    @property
    def text(self) -> str:
        """The description, its bound written in."""
        return self.description.replace("{max_items}", str(self.max_items))

    def schema(self, items: Schema | None = None) -> Schema:
        """The list's node in the CRD's structural schema, with ``items`` the node of its
        elements (a list of strings: from ``item_max_length``)."""
        node: Schema = {
            "type": "array",
            "description": self.text,
            "items": {"type": "string"} if items is None else items,
        }
        self.bound(node)
        if self.map_keys:
            node["x-kubernetes-list-map-keys"] = list(self.map_keys)
        node["x-kubernetes-list-type"] = self.list_type
        return node

    def bound(self, node: Schema) -> Schema:
        """``node`` (the list's node) with the list's bounds."""
        if self.min_items is not None:
            node["minItems"] = self.min_items
        if self.max_items is not None:
            node["maxItems"] = self.max_items
        if self.item_max_length is not None and node["items"].get("type") == "string":
            node["items"]["maxLength"] = self.item_max_length
        return node

    def read(self, value: Any, where: str) -> list[Any]:
        """``value`` (the list at ``where`` of a stored object), [] when left out; raises
        :class:`FieldInvalid` for a value that is not a list, or has more (or fewer) items
        than the schema admits."""
        if value is None:
            value = []
        if not isinstance(value, list):
            raise FieldInvalid(f"{where} must be a list, got {type(value).__name__}")
        _item_count(where, len(value), self.min_items, self.max_items, ("item", "items"))
        return value

    def read_strings(self, value: Any, where: str) -> tuple[str, ...]:
        """``read`` of a list of strings, each checked too."""
        return tuple(
            _string_item(item, f"{where}[{i}]", self.item_max_length)
            for i, item in enumerate(self.read(value, where))
        )


@dataclass(frozen=True)
class MapField:
    """One map of strings in an embedded Kubernetes type (a claim template's labels): its bounds,
    written into the inlined node (``bound``)."""

    path: str  # relative to the object that embeds the type
    max_properties: int
    value_max_length: int | None = None

    @property
    def name(self) -> str:
        """The map's key in the object that holds it."""
        return self.path.rsplit(".", 1)[-1]

    def bound(self, node: Schema) -> Schema:
        """``node`` (the map's node) with the map's bounds."""
        node["maxProperties"] = self.max_properties
        if self.value_max_length is not None:
            node["additionalProperties"]["maxLength"] = self.value_max_length
        return node

    def read(self, value: Any, where: str) -> dict[str, str]:
        """``value`` (the map at ``where`` of a stored object), {} when left out; raises
        :class:`FieldInvalid` for a value that is not a map of strings within the bounds."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise FieldInvalid(f"{where} must be an object, got {type(value).__name__}")
        _item_count(where, len(value), None, self.max_properties, ("entry", "entries"))
        return {
            key: _string_item(item, f"{where}.{key}", self.value_max_length)
            for key, item in value.items()
        }


def _names(path: str, description: str, list_type: ListType = "atomic") -> ListField:
    """A list of replicated job names."""
    return ListField(
        path,
        description,
        max_items=bounds.MAX_REPLICATED_JOBS,
        item_max_length=bounds.MAX_NAME,
        list_type=list_type,
    )


def _implied(declared: Field[Any]) -> dict[str, Any]:
    """The default of an object that stands for a field the schema gives no default of its own
    (the object's default writes it)."""
    return {declared.name: declared.when_absent}


@dataclass(frozen=True)
class ObjectField:
    """One object of the JobSet's own (a policy, a replicated job): its description, the keys it
    requires and the default the API server writes when it is left out. Its properties are the
    records of its fields and lists, placed by ``schema``."""

    path: str  # as docs/api.md and messages name it; [] for the items of a list
    description: str
    required: tuple[str, ...] = ()
    default: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        """The object's key in the object that holds it."""
        return self.path.rsplit(".", 1)[-1].removesuffix("[]")

    def schema(self, properties: Schema) -> Schema:
        """The object's node in the CRD's structural schema, with ``properties`` the nodes of its
        fields."""
        node: Schema = {"type": "object", "description": self.description, "properties": properties}
        if self.required:
            node["required"] = list(self.required)
        if self.default is not None:
            node["default"] = dict(self.default)
        return node

    def read(self, value: Any, where: str) -> dict[str, Any] | None:
        """``value`` (the object at ``where`` of a stored object); left out, its default (a copy)
        or None; raises :class:`FieldInvalid` for a value that is not an object. Its required
        keys are its fields' to read (each record says what leaving it out means)."""
        if value is None:
            return None if self.default is None else dict(self.default)
        return self.read_given(value, where)

    def read_given(self, value: Any, where: str) -> dict[str, Any]:
        """``value``, an object that is there (an item of a list: null is none); raises
        :class:`FieldInvalid` for a value that is not an object."""
        if not isinstance(value, dict):
            raise FieldInvalid(f"{where} must be an object, got {type(value).__name__}")
        return value


# ------------------------------------------------------------------------ replicated jobs

SPEC: Final = ObjectField("spec", "The desired state of the JobSet.")
REPLICATED_JOB_NAME: Final = Field(
    "spec.replicatedJobs[].name",
    str,
    "Name of the replicated job, unique in the JobSet, also ignoring case. Child Jobs are named "
    "<jobSet>-<name>-<jobIndex> (the name in lower case).",
    max_length=bounds.MAX_NAME,
)
GROUP_NAME: Final = Field(
    "spec.replicatedJobs[].groupName",
    str,
    "The group of the replicated job, in the jobset.sigs.k8s.io/group-name label of its Jobs "
    "and pods. A DNS-1035 label. Defaults to default.",
    default=api.DEFAULT_GROUP_NAME,
    max_length=bounds.MAX_OBJECT_NAME,
)
REPLICAS: Final = Field(
    "spec.replicatedJobs[].replicas",
    int,
    "Number of child Jobs made from the template; replicas times the template's parallelism is "
    f"at most {bounds.MAX_INT32}. May change at any time, also while the JobSet runs (an "
    "extension over upstream): lowering it deletes the Jobs whose index is replicas or more, "
    "raising it adds Jobs. Defaults to 1.",
    default=api.DEFAULT_REPLICAS,
    minimum=0,
    maximum=api.MAX_CHILD_JOBS,
)
DEPENDENCY_NAME: Final = Field(
    "spec.replicatedJobs[].dependsOn[].name",
    str,
    "Name of an earlier replicated job.",
    max_length=bounds.MAX_NAME,
)
DEPENDENCY_STATUS: Final = Field(
    "spec.replicatedJobs[].dependsOn[].status",
    str,
    "Ready or Complete.",
    enum=("Ready", "Complete"),
)

REPLICATED_JOB: Final = ObjectField(
    "spec.replicatedJobs[]",
    "A group of identical child Jobs made from one template.",
    required=(REPLICATED_JOB_NAME.name, "template"),
)
DEPENDENCY: Final = ObjectField(
    "spec.replicatedJobs[].dependsOn[]",
    "A dependency on an earlier replicated job.",
    required=(DEPENDENCY_NAME.name, DEPENDENCY_STATUS.name),
)
REPLICATED_JOBS: Final = ListField(
    "spec.replicatedJobs",
    "The groups of child Jobs that form the set. May be left out or empty, as upstream: such a "
    "JobSet gets its headless Service, creates no Job and never completes nor fails; it stays "
    "until deleted.",
    max_items=bounds.MAX_REPLICATED_JOBS,
    list_type="map",
    map_keys=("name",),
)
DEPENDS_ON: Final = ListField(
    "spec.replicatedJobs[].dependsOn",
    "Start this replicated job only when every named earlier replicated job reached its status: "
    "Ready (its ready, succeeded and failed Jobs reach its replicas) or Complete (its succeeded "
    "Jobs reach its replicas). At most {max_items} entries, one per name, naming replicated jobs "
    "listed before this one; not on the first replicated job, nor with startupPolicy InOrder. "
    "While the JobSet is suspended its Jobs are created suspended as their dependencies allow; "
    "on resume the chain starts again.",
    max_items=bounds.MAX_DEPENDS_ON,
    list_type="map",
    map_keys=("name",),
)
# Lists of the pod template of a replicated job's Job template (a Kubernetes type).
_POD = "spec.replicatedJobs[].template.spec.template.spec"
CONTAINERS: Final = ListField(f"{_POD}.containers", min_items=1, max_items=bounds.MAX_CONTAINERS)
INIT_CONTAINERS: Final = ListField(f"{_POD}.initContainers", max_items=bounds.MAX_CONTAINERS)
VOLUME_MOUNTS: Final = ListField(
    f"{_POD}.containers[].volumeMounts", max_items=bounds.MAX_VOLUME_MOUNTS
)
POD_VOLUMES: Final = ListField(f"{_POD}.volumes", max_items=bounds.MAX_POD_VOLUMES)

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
    f"DNS-1035 label (at most {bounds.MAX_DNS_LABEL} characters).",
    max_length=bounds.MAX_OBJECT_NAME,
)
PUBLISH_NOT_READY_ADDRESSES: Final = Field(
    "spec.network.publishNotReadyAddresses",
    bool,
    "Publish DNS records of pods before they are ready. Defaults to true.",
    default=api.DEFAULT_PUBLISH_NOT_READY_ADDRESSES,
)

NETWORK: Final = ObjectField(
    "spec.network",
    "Networking of the child pods: a headless Service named after the subdomain, and stable pod "
    "hostnames. The defaults apply also when the field is left out.",
    default={},
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
SUCCESS_TARGETS: Final = _names(
    "spec.successPolicy.targetReplicatedJobs",
    "The replicated jobs the operator looks at. Empty or left out: all.",
)
SUCCESS_POLICY: Final = ObjectField(
    "spec.successPolicy",
    "When the JobSet has succeeded. Left out, it is {operator: All}: every child Job must succeed.",
    required=(SUCCESS_OPERATOR.name,),
    default=_implied(SUCCESS_OPERATOR),
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
    max_length=bounds.MAX_RULE_NAME,
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

FAILURE_RULES: Final = ListField(
    "spec.failurePolicy.rules",
    "Rules matched in order against a failed child Job. Without a match, the action is "
    "RestartJobSet.",
    max_items=bounds.MAX_FAILURE_RULES,
)
FAILURE_RULE_REASONS: Final = ListField(
    "spec.failurePolicy.rules[].onJobFailureReasons",
    "Match only Jobs that failed with one of these reasons (the reason of the Job's Failed "
    "condition). Empty: any reason.",
    max_items=len(JOB_FAILURE_REASONS),
    item_max_length=bounds.MAX_NAME,
)
FAILURE_RULE_PATTERNS: Final = ListField(
    "spec.failurePolicy.rules[].onJobFailureMessagePatterns",
    "Match only Jobs whose failure message matches one of these regular expressions (Go's RE2 "
    "syntax; one matching anywhere in the message is enough, as upstream). Empty: any message. "
    "The controller refuses a pattern that does not compile (SpecInvalid).",
    # No maxItems, as upstream: no rule reads the patterns (the controller bounds their
    # compiled size, messagepatterns.MAX_POLICY_PROGRAM).
    item_max_length=bounds.MAX_PATTERN,
)
FAILURE_RULE_TARGETS: Final = _names(
    "spec.failurePolicy.rules[].targetReplicatedJobs",
    "Match only Jobs of these replicated jobs. Empty or left out: all.",
)

FAILURE_RULE: Final = ObjectField(
    "spec.failurePolicy.rules[]",
    "Matches a failed child Job to an action. Rules are tried in order; the first match wins.",
    required=(FAILURE_ACTION.name,),
)
FAILURE_POLICY: Final = ObjectField(
    "spec.failurePolicy",
    "When the JobSet restarts or fails after a child Job failed. Left out: the first failed Job "
    "fails the JobSet.",
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
STARTUP_POLICY: Final = ObjectField(
    "spec.startupPolicy",
    "Deprecated, use dependsOn. The order in which replicated jobs start. Left out, it is "
    "{startupPolicyOrder: AnyOrder}.",
    required=(STARTUP_ORDER.name,),
    default=_implied(STARTUP_ORDER),
)
COORDINATOR_REPLICATED_JOB: Final = Field(
    "spec.coordinator.replicatedJob",
    str,
    "The replicated job of the coordinator pod; its Jobs must be Indexed.",
    max_length=bounds.MAX_NAME,
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
COORDINATOR: Final = ObjectField(
    "spec.coordinator",
    "A pod all other pods can reach: its stable address <hostname>.<subdomain> is put in the "
    "jobset.sigs.k8s.io/coordinator label and annotation of every Job and pod.",
    required=(COORDINATOR_REPLICATED_JOB.name,),
)
MANAGED_BY: Final = Field(
    "spec.managedBy",
    str,
    "The controller that reconciles this JobSet. Left out or "
    "jobset.sigs.k8s.io/jobset-controller: the default controller (this one, unless started "
    "with another --managed-by); another value: only a controller serving that value, others "
    "leave the JobSet alone. A domain-prefixed path (example.com/name) of at most "
    f"{bounds.MAX_MANAGED_BY} characters. Immutable.",
    max_length=bounds.MAX_OBJECT_NAME,
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
# Lists and maps of a volume claim template (a Kubernetes type), at either place of one.
CLAIM_ACCESS_MODES: Final = ListField("spec.accessModes", max_items=len(ACCESS_MODES))
CLAIM_LABELS: Final = MapField(
    "metadata.labels", bounds.MAX_CLAIM_LABELS, value_max_length=bounds.MAX_LABEL_VALUE
)
CLAIM_ANNOTATIONS: Final = MapField("metadata.annotations", bounds.MAX_CLAIM_LABELS)
CLAIM_REQUESTS: Final = MapField(
    "spec.resources.requests", bounds.MAX_CLAIM_RESOURCES, value_max_length=bounds.MAX_QUANTITY
)
CLAIM_LIMITS: Final = MapField(
    "spec.resources.limits", bounds.MAX_CLAIM_RESOURCES, value_max_length=bounds.MAX_QUANTITY
)
VOLUME_CLAIM_POLICIES: Final = ListField(
    "spec.volumeClaimPolicies",
    "Volume claim templates whose claims the controller makes, mounts into the pods of the "
    "targeted replicated jobs, and keeps or deletes as the retention policy says.",
    max_items=bounds.MAX_VOLUME_CLAIM_POLICIES,
)
POLICY_TEMPLATES: Final = ListField(
    "spec.volumeClaimPolicies[].templates",
    "PersistentVolumeClaim templates. The controller makes claims from them; pods use one "
    "through a volumeMount with the template's name. metadata.name (required, a DNS-1123 label) "
    "names the pod volume and prefixes the claim names; labels and annotations (up to "
    f"{CLAIM_LABELS.max_properties} each) go to the claims; metadata.namespace must be left out; "
    "other metadata is pruned and status ignored. What Kubernetes requires of a claim is checked "
    f"at admission: one to {CLAIM_ACCESS_MODES.max_items} access modes (ReadWriteOncePod only "
    "alone) and a storage request greater than zero.",
    max_items=bounds.MAX_TEMPLATES_PER_POLICY,
)
POLICY_TARGETS: Final = _names(
    "spec.volumeClaimPolicies[].targetReplicatedJobs",
    "The replicated jobs whose pods get the volumes. Left out: every replicated job with a "
    "volumeMount of a template's name.",
    list_type="set",
)
VOLUME_POLICY_TEMPLATES: Final = ListField(
    "spec.volumePolicy.volumeClaimTemplates",
    "PersistentVolumeClaim templates, as in volumeClaimPolicies[].templates.",
    max_items=bounds.MAX_TEMPLATES_PER_POLICY,
)
VOLUME_POLICY_TARGETS: Final = ListField(
    "spec.volumePolicy.replicatedJobs",
    POLICY_TARGETS.description,
    max_items=bounds.MAX_REPLICATED_JOBS,
    list_type="map",
    map_keys=("name",),
)
VOLUME_POLICY_TARGET_NAME: Final = Field(
    "spec.volumePolicy.replicatedJobs[].name",
    str,
    "Name of the replicated job.",
    max_length=bounds.MAX_NAME,
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
    max_length=bounds.MAX_OBJECT_NAME,
)
GROUP_SNAPSHOT_CLASS_NAME: Final = Field(
    "snapshotPolicy.volumeGroupSnapshotClassName",
    str,
    "A VolumeGroupSnapshotClass: the claims of this policy that one retention case lets go at "
    "once (the JobSet completed, failed or deleted; not a scale-down) are snapshotted together, "
    "in one VolumeGroupSnapshot, so that every rank's checkpoint is from the same moment; a new "
    "claim restored from the newest snapshot takes it from the newest such group. Left out: a "
    "VolumeSnapshot per claim.",
    max_length=bounds.MAX_OBJECT_NAME,
)
SNAPSHOT_HISTORY_LIMIT: Final = Field(
    "snapshotPolicy.historyLimit",
    int,
    "Per claim, how many ready snapshots the controller took are kept: the newest historyLimit; "
    "the controller deletes older ones. Defaults to 1.",
    implied=1,
    minimum=1,
    maximum=bounds.MAX_SNAPSHOT_HISTORY,
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
    max_length=bounds.MAX_OBJECT_NAME,
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
RESTORE_FROM_JOBSET: Final = Field(
    "restorePolicy.fromJobSet",
    str,
    "With source NewestSnapshot: restore each claim from the newest snapshot of the claim in the "
    "same place (template, replicated job, Job and pod index) of the JobSet of this name in the "
    "same namespace (a previous run, such as the JobSet of an earlier TrainJob), instead of this "
    "JobSet's own. With group snapshots, every claim comes from that JobSet's newest group.",
    max_length=bounds.MAX_NAME,
)
RETENTION_POLICY: Final = ObjectField(
    "retentionPolicy",
    "What happens to the claims made from the templates. Left out, every field has its default.",
    default={},
)
CREATION_POLICY: Final = ObjectField(
    "creationPolicy",
    "When the claims made from the templates are created. Left out, whenSuspended is "
    "WaitForResume. May be changed at any time.",
)
SNAPSHOT_POLICY: Final = ObjectField(
    "snapshotPolicy",
    "How the snapshots of retention Snapshot are taken and how many are kept (the VolumeSnapshot "
    "CRDs and a snapshot controller must be installed). Left out, every field has its default. "
    "May be changed at any time.",
)
RESTORE_POLICY: Final = ObjectField(
    "restorePolicy",
    "Where the data of the claims the controller creates comes from: a VolumeSnapshot (the "
    "claim's dataSourceRef). Left out: new claims start empty. May be changed at any time: it "
    "applies to the claims created from then on.",
    required=(RESTORE_SOURCE.name,),
)
VOLUME_CLAIM_POLICY: Final = ObjectField(
    "spec.volumeClaimPolicies[]",
    "Volume claim templates, the replicated jobs whose pods get the volumes, and what happens to "
    "the claims.",
)
VOLUME_POLICY: Final = ObjectField(
    "spec.volumePolicy",
    "A second spelling of one JobSet-scope volume claim policy: the same as a "
    "volumeClaimPolicies entry with templates = volumeClaimTemplates and targetReplicatedJobs = "
    "the names in replicatedJobs.",
)
VOLUME_POLICY_TARGET: Final = ObjectField(
    "spec.volumePolicy.replicatedJobs[]",
    "A replicated job, by name.",
    required=(VOLUME_POLICY_TARGET_NAME.name,),
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

# The rule on restorePolicy.fromJobSet (schema.py's restore-from-jobset), in the words the
# admission policy and the parser both use.
RESTORE_FROM_JOBSET_RULE: Final = (
    "restorePolicy.fromJobSet may be set only with restorePolicy.source: NewestSnapshot"
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
    MANAGED_BY,
    SUSPEND,
    TTL_SECONDS_AFTER_FINISHED,
    VOLUME_SCOPE,
    VOLUME_POLICY_TARGET_NAME,
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
    RESTORE_FROM_JOBSET,
)
LISTS: Final[tuple[ListField, ...]] = (
    REPLICATED_JOBS,
    DEPENDS_ON,
    CONTAINERS,
    INIT_CONTAINERS,
    VOLUME_MOUNTS,
    POD_VOLUMES,
    SUCCESS_TARGETS,
    FAILURE_RULES,
    FAILURE_RULE_REASONS,
    FAILURE_RULE_PATTERNS,
    FAILURE_RULE_TARGETS,
    CLAIM_ACCESS_MODES,
    VOLUME_CLAIM_POLICIES,
    POLICY_TEMPLATES,
    POLICY_TARGETS,
    VOLUME_POLICY_TEMPLATES,
    VOLUME_POLICY_TARGETS,
)
MAPS: Final[tuple[MapField, ...]] = (CLAIM_LABELS, CLAIM_ANNOTATIONS, CLAIM_REQUESTS, CLAIM_LIMITS)
OBJECTS: Final[tuple[ObjectField, ...]] = (
    SPEC,
    REPLICATED_JOB,
    DEPENDENCY,
    NETWORK,
    SUCCESS_POLICY,
    FAILURE_POLICY,
    FAILURE_RULE,
    STARTUP_POLICY,
    COORDINATOR,
    VOLUME_CLAIM_POLICY,
    VOLUME_POLICY,
    VOLUME_POLICY_TARGET,
    RETENTION_POLICY,
    CREATION_POLICY,
    SNAPSHOT_POLICY,
    RESTORE_POLICY,
)
