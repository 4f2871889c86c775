"""Hypothesis-generated JobSets through the real admission rules, and the controller's agreement.

Each example is a mostly valid JobSet (every feature: dependsOn, success and failure policies, a
coordinator, both volume spellings, both scopes, retention) with zero, one or two mutations that
break one rule each (taken from docs/api.md and controller/api/schema.py). It is submitted to the
real kube-apiserver with ``dryRun=All`` (validation in full, nothing stored). Properties:

(a) the server accepts (201/200) or rejects with 422 Invalid whose causes all carry a message that
    is either a rule message documented in docs/api.md (with its ``: <value>`` detail) or one of
    the API server's own OpenAPI schema messages; a mutation that breaks a rule by itself gets
    that rule's message (unless a schema error made the server skip the CEL rules, which it says);
(b) the parser (``model.parse`` + ``volumes.model``) agrees with the server, both ways.
    A JobSet the server accepts parses and ``decide`` plans it without raising: unique child Job
    names that are DNS-1035 labels of at most 63 characters, every mounted claim desired, every
    desired Job created when nothing gates it (once the claims it asked for exist and are
    recorded in its status). A JobSet accepted by the server but refused by the parser is
    recorded; only the documented controller-side checks (docs/api.md "Checked by the
    controller": RE2 message patterns, Pod scope without ``targetReplicatedJobs``, the volume
    policies as the annotation keys complete them) are expected, any other is a mismatch.
    A create the server refuses makes the parser raise ``InvalidJobSet`` (with a message; never
    anything else): the parser runs the API server's checks of a create
    (``controller/api/validation.py``), so one it accepts is recorded as a mismatch. An update is
    judged by the parser as the new object alone, by the rules of a create: it has no stored
    object, so it cannot run the transition rules (immutability). So of the updates the server
    refuses, those whose new object the Python rules refuse as a create (``Contract.refusal``
    without ``old``) must be refused by the parser; the others (transition rules only) may parse.
    The test fails listing every mismatch of either direction.

Every generated JobSet may carry a volume policy annotation (``controller/api/volumekeys.py``:
``<template>.volumes.jobset.sigs.k8s.io/<field>``; a template of the JobSet's or not, a field or
not, a value the field admits, one it refuses, or empty), so both directions cover the keys.

(c) the Python rules that ``render`` runs (``controller/api/validation.py``: the schema's
    defaults and bounds, each rule's predicate; on updates, the transition rules' too) give the
    server's verdict in its words: the same field errors from the CRD, or the admission policy's
    same message.

Updates: a valid JobSet is really created, then replaced (dry run) with mutated specs, which
exercises the immutability and transition rules with the same properties.

Hypothesis runs in a worker thread (derandomized, so CI runs are reproducible) and hands each
request to the test's event loop, so a failure still shrinks to a minimal example.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from controller.api import volumekeys
from controller.api.fields import ListField
from controller.api.validation import Contract
from controller.jobset import api, volumes
from controller.jobset.decide import decide
from controller.jobset.model import InvalidJobSet, JobSet, parse
from controller.jobset.volumes import spec as volume_spec
from controller.jobset.volumes.lifecycle import waits_for_resume
from controller.jobset.volumes.observed import views as claim_views
from tests.helpers import Kube
from tests.support.crd import CRD_FILE, install_crd
from tests.unit.volumes.factories import applied

Obj = dict[str, Any]
T = TypeVar("T")
API = "/apis/jobset.x-k8s.io/v1alpha2"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
EXAMPLES_MIXED = 60  # random mutations (0, 1 or 2) per run
EXAMPLES_PER_MUTATION = 6  # then a run with each mutation applied, plus sometimes another
SKIPPED = (
    "some validation rules were not checked because the object was invalid; correct the existing "
    "errors to complete validation"
)
REJECTED = "<rejected>"  # an expectation: rejected, with whichever message
MAX_PLANNED = 1000  # replicas in all beyond which the plan is not computed (see check_parser)
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
# The specs the server accepts and the controller refuses by design (docs/api.md, "Checked by
# the controller"): CEL cannot tell whether a regular expression is valid, which replicated jobs
# mount a template (Pod scope without targetReplicatedJobs), nor decode what the volume policy
# annotations say together with the spec (the policies they complete, judged by the spec's rules
# and naming the keys).
DOCUMENTED_CONTROLLER_CHECKS = (
    re.compile(r"onJobFailureMessagePatterns: .* is not a valid regular"),
    re.compile(r"\.scope: Pod scope needs completionMode Indexed \(each pod"),
    re.compile(r"\.scope: Pod scope needs \S+\.completions for replicated job"),
    re.compile(r"\(as completed by the annotations \S+"),
    re.compile(r"to different values: set it on one template of the policy"),
    re.compile(r"spec\.volumePolicy is always JobSet scope"),
)


# ------------------------------------------------------------------ documented messages


def documented_messages() -> tuple[frozenset[str], frozenset[str]]:
    """(messages that may be followed by ``: <value>``, messages that stand alone) from the
    validation table of docs/api.md."""
    text = DOCS.read_text()
    table = text.split("## Validation", 1)[1].split("### Checked by the schema itself", 1)[0]
    with_value: set[str] = set()
    alone: set[str] = set()
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].startswith("`") or not cells[3].startswith("`"):
            continue
        message = cells[3][1:].split("`", 1)[0]
        (with_value if '": <value>"' in cells[3] else alone).add(message)
    assert len(with_value) + len(alone) >= 35, f"could not read the rule messages of {DOCS}"
    return frozenset(with_value), frozenset(alone)


WITH_VALUE, ALONE = documented_messages()
# The API server's own wording for OpenAPI schema checks (docs/api.md "Checked by the schema
# itself"), after the cause's type prefix.
BUILT_IN = tuple(
    re.compile(p)
    for p in (
        r'^Unsupported value: .+: supported values: "',
        r"^Required value$",
        r"^Invalid value: .*: \S+ in body should be greater than or equal to \d+$",
        r"^Invalid value: .*: \S+ in body should be less than or equal to \d+$",
        r"^Required value: must have at least 1 items?$",
        r"^Invalid value: .*: must be a Kubernetes quantity, e\.g\. 10Gi or 500M$",
        r"^Invalid value: .*: \S+ in body should have at least 1 items?$",
        r"^Invalid value: .*: \S+ in body must be of type \w+: .*$",
        r"^Invalid value: .*: \S+ in body should match '.+'$",
        r"^Invalid value: \"\": Checked value must be of type integer with format int32 in \S+$",
        r"^Too many: \d+: must have at most \d+ items?$",
        r"^Too long: may not be (more|longer) than \d+( bytes| characters)?$",
        r"^Duplicate value: .+$",
        r'^Invalid value: ".*": a lowercase RFC 1123 subdomain must consist of lower case ',
        r'^Invalid value: ".*": must be no more than 253 characters$',
        "^Invalid value: null: " + re.escape(SKIPPED) + "$",
    )
)
CEL_PREFIXES = ("Invalid value: ", "Required value: ", "Forbidden: ")
# The spec's cross-field and immutability rules run in a ValidatingAdmissionPolicy
# (manifests/crd/policy.yaml): one cause, "<prefix><where>: <message>[; <where>: <message>...]".
POLICY_DENIED = (
    "ValidatingAdmissionPolicy 'jobsets.jobset.x-k8s.io' with binding 'jobsets.jobset.x-k8s.io' "
    "denied request: "
)
POLICY_FILE = Path(__file__).resolve().parents[2] / "manifests" / "crd" / "policy.yaml"
WHERE = re.compile(r"^[A-Za-z][A-Za-z.]*: ")


def policy_messages() -> frozenset[str]:
    """The rule messages the policy quotes (without their ``<where>: ``)."""
    policy = yaml.safe_load(POLICY_FILE.read_text())
    text = policy["spec"]["validations"][0]["messageExpression"]
    quoted = re.findall(r"'((?:[^'\\]|\\.)*)'", text)
    # A rule's message is quoted whole: "<where>: <message>", or, before a detail (the offending
    # value), "<where>: " and then "<message>: ".
    messages = (
        WHERE.sub("", q.replace("\\'", "'")) for q in quoted if WHERE.match(q) or q.endswith(": ")
    )
    return frozenset(m.rstrip(": ") for m in messages if m.rstrip(": "))


POLICY_MESSAGES = policy_messages()
CONTRACT = Contract.from_crd(yaml.safe_load(CRD_FILE.read_text()))


def policy_rule_messages(message: str) -> list[str] | None:
    """The rule messages of a policy denial, each without its ``<where>: ``; None for a cause
    that is not the policy's."""
    if not message.startswith(POLICY_DENIED):
        return None
    # (An empty offending value leaves "<message>: " before the next "; ".)
    return [WHERE.sub("", m, count=1).rstrip() for m in message[len(POLICY_DENIED) :].split("; ")]


def _documented(text: str) -> bool:
    if text in ALONE or text in WITH_VALUE:
        return True
    if any(text.startswith(m + ": ") and len(text) > len(m) + 2 for m in WITH_VALUE):
        return True
    return any(text == m + ":" for m in WITH_VALUE)  # the offending value was ""


# A rule on a scalar field (e.g. spec.managedBy) is reported with the field's value first.
SCALAR_VALUE = re.compile(r'^("(?:[^"\\]|\\.)*"|-?[0-9]+|true|false|null): ')


def known_message(message: str) -> bool:
    if any(p.search(message) for p in BUILT_IN):
        return True
    for prefix in CEL_PREFIXES:
        if message.startswith(prefix):
            rest = message[len(prefix) :]
            value = SCALAR_VALUE.match(rest)
            if _documented(rest) or (value is not None and _documented(rest[value.end() :])):
                return True
    return False


# ------------------------------------------------------------------ generated JobSets


@dataclass
class Case:
    body: Obj
    mutations: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)  # a message each, or REJECTED

    def describe(self) -> str:
        return f"mutations {self.mutations or ['none']}"


RJOB_NAMES = ("init", "workers", "eval", "leader", "Driver", "ps")
TEMPLATE_NAMES = ("data", "ckpt", "scratch", "model", "logs")
QUANTITIES = ("1Gi", "500Mi", "2G", "1", "1.5Gi", "100k", "1e3", "0.5Ti")
PATTERNS = ("^OOM", ".*timeout.*", "error [0-9]+")


def pvc(name: str, storage: str, access: str = "ReadWriteOnce") -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": [access], "resources": {"requests": {"storage": storage}}},
    }


def container(rjob: Obj) -> Obj:
    containers = rjob["template"]["spec"]["template"]["spec"].setdefault("containers", [])
    if not containers:
        # An earlier mutation (no_containers) removed it; this later one needs one to edit.
        containers.append({"name": "main", "image": "busybox"})
    result: Obj = containers[0]
    return result


def pod_spec(rjob: Obj) -> Obj:
    result: Obj = rjob["template"]["spec"]["template"]["spec"]
    return result


def mount(rjob: Obj, name: str) -> None:
    mounts = container(rjob).setdefault("volumeMounts", [])
    if all(m["name"] != name for m in mounts):
        mounts.append({"name": name, "mountPath": f"/mnt/{name}"})


KEEPS = ("Retain", "Delete", "Snapshot")
RESTORE_SNAPSHOT_NAME = (
    "restorePolicy.volumeSnapshotName is required when restorePolicy.source is VolumeSnapshot, "
    "and must be left out otherwise"
)
SUSPEND_SNAPSHOT_RESTORES = (
    "retentionPolicy.whenSuspended: Snapshot requires restorePolicy.source: NewestSnapshot"
)
SUSPEND_SNAPSHOT_NOT_CREATED = (
    "retentionPolicy.whenSuspended: Snapshot cannot be used with creationPolicy.whenSuspended: "
    "Create"
)


def snapshot_on_suspend(policy: Obj) -> None:
    """retentionPolicy.whenSuspended: Snapshot for a policy that restores from the newest
    snapshot and starts empty without one (as the rules allow). Derived, not drawn: the other
    cases' draws stay as they were."""
    restore = policy.get("restorePolicy") or {}
    if restore.get("source") == "NewestSnapshot" and restore.get("whenMissing") == "CreateEmpty":
        policy.setdefault("retentionPolicy", {})["whenSuspended"] = "Snapshot"


@st.composite
def snapshot_and_restore(draw: st.DrawFn) -> Obj:
    """A volume policy's snapshotPolicy and restorePolicy, each there one time in three."""
    found: Obj = {}
    if draw(st.integers(0, 2)) == 0:
        snapshots: Obj = {}
        if draw(st.booleans()):
            classes = ["csi-snapclass", "fast.example.com", ""]
            snapshots["volumeSnapshotClassName"] = draw(st.sampled_from(classes))
        if draw(st.booleans()):
            snapshots["historyLimit"] = draw(st.sampled_from([1, 3, 100]))
        found["snapshotPolicy"] = snapshots
    if draw(st.integers(0, 2)) == 0:
        source = draw(st.sampled_from(["NewestSnapshot", "VolumeSnapshot"]))
        restore: Obj = {"source": source}
        if source == "VolumeSnapshot":
            restore["volumeSnapshotName"] = draw(st.sampled_from(["ckpt-7", "run-1.step-100"]))
        if draw(st.booleans()):
            restore["whenMissing"] = draw(st.sampled_from(["Wait", "CreateEmpty"]))
        found["restorePolicy"] = restore
    return found


@st.composite
def valid_jobsets(draw: st.DrawFn, name: str | None = None) -> Obj:
    """A JobSet every rule accepts, using a random selection of the features."""
    count = draw(st.integers(1, 3))
    names = draw(st.permutations(RJOB_NAMES))[:count]
    rjobs: list[Obj] = []
    for i, rname in enumerate(names):
        completions = draw(st.integers(1, 3))
        rjob: Obj = {
            "name": rname,
            "replicas": draw(st.integers(0, 3)),
            "template": {
                "spec": {
                    "completions": completions,
                    "parallelism": draw(st.integers(1, completions)),
                    "completionMode": draw(st.sampled_from(["Indexed", "Indexed", "NonIndexed"])),
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        }
                    },
                }
            },
        }
        if draw(st.booleans()):
            rjob["groupName"] = draw(st.sampled_from(["default", "group-a", "g2"]))
        if i > 0 and draw(st.booleans()):
            rjob["dependsOn"] = [
                {
                    "name": draw(st.sampled_from(names[:i])),
                    "status": draw(st.sampled_from(["Ready", "Complete"])),
                }
            ]
        rjobs.append(rjob)
    spec: Obj = {"replicatedJobs": rjobs}
    if not any("dependsOn" in r for r in rjobs) and draw(st.booleans()):
        spec["startupPolicy"] = {
            "startupPolicyOrder": draw(st.sampled_from(["AnyOrder", "InOrder"]))
        }
    if draw(st.booleans()):
        targets = draw(st.lists(st.sampled_from(names), unique=True, max_size=count))
        spec["successPolicy"] = {"operator": draw(st.sampled_from(["All", "Any"]))}
        if targets:
            spec["successPolicy"]["targetReplicatedJobs"] = targets
    if draw(st.booleans()):
        rules = []
        rule_names = draw(
            st.lists(st.sampled_from(["fatal", "retry", "oom:1", "R_2"]), unique=True)
        )
        for rule_name in rule_names:
            rule: Obj = {
                "action": draw(
                    st.sampled_from(
                        ["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
                    )
                )
            }
            if draw(st.booleans()):
                rule["name"] = rule_name
            reasons = draw(
                st.lists(st.sampled_from(["BackoffLimitExceeded", "PodFailurePolicy"]), unique=True)
            )
            if reasons:
                rule["onJobFailureReasons"] = reasons
            patterns = draw(st.lists(st.sampled_from(PATTERNS), unique=True, max_size=2))
            if patterns:
                rule["onJobFailureMessagePatterns"] = patterns
            targets = draw(st.lists(st.sampled_from(names), unique=True, max_size=count))
            if targets:
                rule["targetReplicatedJobs"] = targets
            rules.append(rule)
        # Default names are failurePolicyRule<index>: the drawn names never clash with them.
        spec["failurePolicy"] = {
            "maxRestarts": draw(st.integers(0, 3)),
            "restartStrategy": draw(st.sampled_from(["Recreate", "BlockingRecreate"])),
            "rules": rules,
        }
    coordinated = [
        r
        for r in rjobs
        if r["replicas"] > 0 and r["template"]["spec"]["completionMode"] == "Indexed"
    ]
    wants_coordinator: bool = draw(st.booleans())
    if coordinated and wants_coordinator:
        target = draw(st.sampled_from(coordinated))
        spec["coordinator"] = {
            "replicatedJob": target["name"],
            "jobIndex": draw(st.integers(0, target["replicas"] - 1)),
            "podIndex": draw(st.integers(0, target["template"]["spec"]["completions"] - 1)),
        }
    if draw(st.booleans()):
        spec["network"] = {"enableDNSHostnames": draw(st.booleans())}
        if draw(st.booleans()):
            spec["network"]["subdomain"] = draw(st.sampled_from(["net", "svc-1"]))
    if draw(st.booleans()):
        spec["suspend"] = draw(st.booleans())
    if draw(st.booleans()):
        spec["ttlSecondsAfterFinished"] = draw(st.integers(0, 100))
    # Volumes: templates with unique names, each policy targeting some replicated jobs that
    # mount its templates (and no other replicated job mounting them).
    free = list(draw(st.permutations(TEMPLATE_NAMES)))
    policies = []
    for _ in range(draw(st.integers(0, 2))):
        templates = [
            pvc(free.pop(), draw(st.sampled_from(QUANTITIES)))
            for _ in range(draw(st.integers(1, 2)))
        ]
        if draw(st.booleans()):
            templates[0]["metadata"]["labels"] = {"tier": "fast"}
        users = draw(st.lists(st.sampled_from(names), unique=True, min_size=1, max_size=count))
        for rjob in rjobs:
            if rjob["name"] in users:
                for t in templates:
                    mount(rjob, t["metadata"]["name"])
        policy: Obj = {"templates": templates}
        if draw(st.booleans()):
            policy["targetReplicatedJobs"] = users
        if draw(st.booleans()):
            policy["scope"] = draw(st.sampled_from(["JobSet", "Job"]))
        if draw(st.booleans()):
            keys = ("whenDeleted", "whenCompleted", "whenFailed", "whenScaled")
            policy["retentionPolicy"] = {
                k: draw(st.sampled_from(KEEPS)) for k in keys if draw(st.booleans())
            }
        policy.update(draw(snapshot_and_restore()))
        snapshot_on_suspend(policy)
        policies.append(policy)
    if policies:
        spec["volumeClaimPolicies"] = policies
    if draw(st.booleans()):
        template = pvc(free.pop(), draw(st.sampled_from(QUANTITIES)), "ReadWriteMany")
        users = draw(st.lists(st.sampled_from(names), unique=True, min_size=1, max_size=count))
        for rjob in rjobs:
            if rjob["name"] in users:
                mount(rjob, template["metadata"]["name"])
        request: Obj = {"volumeClaimTemplates": [template]}
        if draw(st.booleans()):
            request["replicatedJobs"] = [{"name": u} for u in users]
        request.update(draw(snapshot_and_restore()))
        snapshot_on_suspend(request)
        spec["volumePolicy"] = request
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name or draw(st.sampled_from(["fz", "train", "job-set-1", "x"]))},
        "spec": spec,
    }


# Mutations: each breaks (or may break) one rule and returns what the server must say.
Mutation = Callable[[st.DrawFn, Obj], str | None]


def _rjobs(js: Obj) -> list[Obj]:
    result: list[Obj] = js["spec"]["replicatedJobs"]
    return result


def _policies(js: Obj) -> list[Obj]:
    """The volume claim policies, adding one (mounted by the first replicated job) if none."""
    spec = js["spec"]
    if not spec.get("volumeClaimPolicies"):
        used = {_name(t) for t in (spec.get("volumePolicy") or {}).get("volumeClaimTemplates", [])}
        name = next(n for n in TEMPLATE_NAMES if n not in used)
        spec["volumeClaimPolicies"] = [{"templates": [pvc(name, "1Gi")]}]
        mount(_rjobs(js)[0], name)
    result: list[Obj] = spec["volumeClaimPolicies"]
    return result


def _name(template: Obj) -> str:
    """A template's name; "" once template_without_name took it away."""
    name: str = template["metadata"].get("name", "")
    return name


def _templates(js: Obj) -> list[str]:
    spec = js["spec"]
    found = [_name(t) for p in spec.get("volumeClaimPolicies") or [] for t in p["templates"]]
    found += [_name(t) for t in (spec.get("volumePolicy") or {}).get("volumeClaimTemplates", [])]
    return found


def duplicate_rjob_name(draw: st.DrawFn, js: Obj) -> str | None:
    original = draw(st.sampled_from(_rjobs(js)))
    twin = copy.deepcopy(original)
    twin.pop("dependsOn", None)
    twin["name"] = draw(st.sampled_from([original["name"], original["name"].swapcase()]))
    _rjobs(js).append(twin)
    return "replicatedJob names must be unique, also when compared without case"


def bad_rjob_name(draw: st.DrawFn, js: Obj) -> str | None:
    name = draw(st.sampled_from(["my_job", "r" * 64, "a.b", "", "-x"]))
    _rjobs(js)[-1]["name"] = name
    # "" and "-x" still make DNS-1035 child Job names ("<jobSet>--0", "<jobSet>--x-0").
    return REJECTED if name not in ("", "-x") else None


def bad_jobset_name(draw: st.DrawFn, js: Obj) -> str | None:
    js["metadata"]["name"] = draw(st.sampled_from(["1train", "t" * 60, "x_y", "Train", "a.b"]))
    return REJECTED


def bad_replicas(draw: st.DrawFn, js: Obj) -> str | None:
    rjob = draw(st.sampled_from(_rjobs(js)))
    choice = draw(st.sampled_from(["negative", "product", "int64", "string", "max"]))
    if choice == "negative":
        rjob["replicas"] = draw(st.integers(-5, -1))
        return "should be greater than or equal to 0"
    if choice == "max":
        rjob["replicas"] = 2**31 - 1
        rjob["template"]["spec"]["parallelism"] = 1
        return "should be less than or equal to 10000"
    if choice == "product":
        rjob["replicas"] = 10_000
        rjob["template"]["spec"]["parallelism"] = draw(st.integers(250_000, 1_000_000))
        rjob["template"]["spec"]["completions"] = 4
        return "replicas times the template's parallelism must not exceed 2147483647"
    if choice == "int64":
        rjob["replicas"] = 10**12
        return REJECTED
    rjob["replicas"] = "2"
    return "must be of type integer"


def bad_success_targets(draw: st.DrawFn, js: Obj) -> str | None:
    js["spec"]["successPolicy"] = {
        "operator": draw(st.sampled_from(["All", "Any"])),
        "targetReplicatedJobs": [draw(st.sampled_from(["nope", "INIT", ""]))],
    }
    return "successPolicy.targetReplicatedJobs must name replicated jobs of this JobSet"


def bad_failure_rule(draw: st.DrawFn, js: Obj) -> str | None:
    policy = js["spec"].setdefault("failurePolicy", {"maxRestarts": 1})
    rules = policy.setdefault("rules", [])
    choice = draw(st.sampled_from(["target", "name", "duplicate", "reason", "action", "long"]))
    rule: Obj = {"action": "RestartJobSet"}
    expected: str
    if choice == "target":
        rule["targetReplicatedJobs"] = ["ghost"]
        expected = "failurePolicy.rules[].targetReplicatedJobs must name replicated jobs"
    elif choice == "name":
        rule["name"] = draw(st.sampled_from(["1st", "a-b", "x:", "a b"]))
        expected = "a failure policy rule name must start with a letter"
    elif choice == "duplicate":
        rules.append({"name": "same", "action": "FailJobSet"})
        rule["name"] = "same"
        expected = "failurePolicy rule names must be unique"
    elif choice == "reason":
        rule["onJobFailureReasons"] = ["OOMKilled"]
        expected = "onJobFailureReasons may contain only"
    elif choice == "action":
        rule["action"] = "Ignore"
        expected = "Unsupported value"
    else:
        rule["name"] = "r" * 129
        expected = "Too long"
    rules.append(rule)
    return expected


def bad_message_pattern(draw: st.DrawFn, js: Obj) -> str | None:
    """Not a rule: admission cannot check regular expressions; the controller does."""
    policy = js["spec"].setdefault("failurePolicy", {})
    policy.setdefault("rules", []).append(
        {
            "action": "FailJobSet",
            "onJobFailureMessagePatterns": [draw(st.sampled_from(["(", "[a-", "a{2,1}"]))],
        }
    )
    return None


def bad_depends_on(draw: st.DrawFn, js: Obj) -> str | None:
    rjobs = _rjobs(js)
    js["spec"].pop("startupPolicy", None)
    choice = draw(st.sampled_from(["first", "self", "later", "unknown", "two", "status"]))
    if choice == "first" or len(rjobs) == 1:
        rjobs[0]["dependsOn"] = [{"name": rjobs[-1]["name"], "status": "Ready"}]
        return "the first replicated job cannot have dependsOn: nothing starts before it"
    index = draw(st.integers(1, len(rjobs) - 1))
    if choice == "self":
        rjobs[index]["dependsOn"] = [{"name": rjobs[index]["name"], "status": "Ready"}]
    elif choice == "later":
        if index == len(rjobs) - 1:
            rjobs.append(copy.deepcopy(rjobs[index]) | {"name": "tail"})
            rjobs[-1].pop("dependsOn", None)
        rjobs[index]["dependsOn"] = [{"name": rjobs[index + 1]["name"], "status": "Complete"}]
    elif choice == "unknown":
        rjobs[index]["dependsOn"] = [{"name": "ghost", "status": "Ready"}]
    elif choice == "two":
        rjobs[index]["dependsOn"] = [
            {"name": rjobs[0]["name"], "status": "Ready"},
            {"name": rjobs[index]["name"], "status": "Ready"},
        ]
        # Several entries are allowed (up to 5, as upstream); the second one names itself.
        return "dependsOn must name a replicated job listed before this one"
    else:
        rjobs[index]["dependsOn"] = [{"name": rjobs[0]["name"], "status": "Started"}]
        return "Unsupported value"
    return "dependsOn must name a replicated job listed before this one"


def in_order_with_depends_on(draw: st.DrawFn, js: Obj) -> str | None:
    rjobs = _rjobs(js)
    if len(rjobs) == 1:
        rjobs.append(copy.deepcopy(rjobs[0]) | {"name": "second"})
    rjobs[1]["dependsOn"] = [{"name": rjobs[0]["name"], "status": "Ready"}]
    js["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    return "startupPolicy InOrder and dependsOn cannot be combined: use dependsOn"


def bad_coordinator(draw: st.DrawFn, js: Obj) -> str | None:
    rjob = _rjobs(js)[0]
    tspec = rjob["template"]["spec"]
    choice = draw(st.sampled_from(["unknown", "job", "pod", "mode"]))
    if choice == "unknown":
        js["spec"]["coordinator"] = {"replicatedJob": "ghost"}
        return "coordinator.replicatedJob must name a replicated job of this JobSet"
    rjob["replicas"] = max(rjob["replicas"], 1)
    tspec["completionMode"] = "Indexed"
    if choice == "job":
        js["spec"]["coordinator"] = {"replicatedJob": rjob["name"], "jobIndex": rjob["replicas"]}
        return "coordinator.jobIndex must be less than the replicas"
    if choice == "pod":
        js["spec"]["coordinator"] = {
            "replicatedJob": rjob["name"],
            "podIndex": tspec["completions"],
        }
        return "coordinator.podIndex must be less than the completions"
    tspec["completionMode"] = "NonIndexed"
    js["spec"]["coordinator"] = {"replicatedJob": rjob["name"]}
    return "the coordinator's replicated job must use completionMode Indexed"


def bad_subdomain(draw: st.DrawFn, js: Obj) -> str | None:
    js["spec"]["network"] = {
        "subdomain": draw(st.sampled_from(["Train_Net", "s" * 64, "1abc", "a.b"]))
    }
    return "spec.network.subdomain must be a DNS-1035 label of at most 63 characters"


def bad_group_name(draw: st.DrawFn, js: Obj) -> str | None:
    draw(st.sampled_from(_rjobs(js)))["groupName"] = draw(
        st.sampled_from(["Group_1", "g" * 64, "9g"])
    )
    return "groupName must be a DNS-1035 label of at most 63 characters"


def bad_managed_by(draw: st.DrawFn, js: Obj) -> str | None:
    js["spec"]["managedBy"] = draw(st.sampled_from(["kueue", "example.com/" + "x" * 60, "/x"]))
    return "spec.managedBy must be a domain-prefixed path"


def negative_ttl(draw: st.DrawFn, js: Obj) -> str | None:
    js["spec"]["ttlSecondsAfterFinished"] = draw(st.integers(-100, -1))
    return "should be greater than or equal to 0"


def wrong_type(draw: st.DrawFn, js: Obj) -> str | None:
    choice = draw(st.sampled_from(["suspend", "network", "labels", "template"]))
    if choice == "suspend":
        js["spec"]["suspend"] = "yes"
        return "must be of type boolean"
    if choice == "network":
        js["spec"]["network"] = {"enableDNSHostnames": 1}
        return "must be of type boolean"
    if choice == "labels":
        _policies(js)[0]["templates"][0]["metadata"]["labels"] = {"n": 1}
        return "must be of type string"
    del _rjobs(js)[0]["template"]
    return "Required value"


def no_containers(draw: st.DrawFn, js: Obj) -> str | None:
    """The schema requires a container (minItems), so the Job would not be refused later."""
    pod_spec(draw(st.sampled_from(_rjobs(js))))["containers"] = []
    return REJECTED


def bad_scope(draw: st.DrawFn, js: Obj) -> str | None:
    policy = draw(st.sampled_from(_policies(js)))
    policy["scope"] = draw(st.sampled_from(["Node", "job", "pod"]))
    return "Unsupported value"


def pod_scope_not_indexed(draw: st.DrawFn, js: Obj) -> str | None:
    """Pod scope on a replicated job it names whose Jobs are not Indexed."""
    policy = draw(st.sampled_from(_policies(js)))
    rjob = draw(st.sampled_from(_rjobs(js)))
    policy["scope"] = "Pod"
    targets = policy.setdefault("targetReplicatedJobs", [])
    if rjob["name"] not in targets:
        targets.append(rjob["name"])
    rjob["template"]["spec"]["completionMode"] = "NonIndexed"
    return "a scope Pod policy needs completionMode Indexed and completions"


def duplicate_template(draw: st.DrawFn, js: Obj) -> str | None:
    policies = _policies(js)
    name = draw(st.sampled_from(_templates(js)))
    draw(st.sampled_from(policies))["templates"].append(pvc(name, "1Gi"))
    return "volume claim template names must be unique across volumeClaimPolicies and volumePolicy"


def template_volume_collision(draw: st.DrawFn, js: Obj) -> str | None:
    policy = draw(st.sampled_from(_policies(js)))
    name = _name(policy["templates"][0])
    users = [
        r
        for r in _rjobs(js)
        if any(m["name"] == name for m in container(r).get("volumeMounts", []))
    ]
    if not users:  # an earlier mutation took the template's name away
        return None
    pod_spec(draw(st.sampled_from(users))).setdefault("volumes", []).append(
        {"name": name, "emptyDir": {}}
    )
    return (
        "a replicated job that gets a volume claim template must not define a pod volume of the "
        "same name"
    )


def bad_retention(draw: st.DrawFn, js: Obj) -> str | None:
    key = draw(st.sampled_from(["whenDeleted", "whenCompleted", "whenFailed", "whenScaled"]))
    draw(st.sampled_from(_policies(js)))["retentionPolicy"] = {
        key: draw(st.sampled_from(["Keep", "delete", ""]))
    }
    return "Unsupported value"


def bad_restore(draw: st.DrawFn, js: Obj) -> str | None:
    """A restorePolicy without the snapshot name its source needs, or with one it must not have
    (restore-snapshot-name); or retentionPolicy.whenSuspended: Snapshot without a restore from
    the newest snapshot, or with creationPolicy.whenSuspended: Create (suspend-snapshot-restores,
    suspend-snapshot-not-created); in either spelling."""
    targets = _policies(js)
    if js["spec"].get("volumePolicy"):
        targets = [*targets, js["spec"]["volumePolicy"]]
    policy = draw(st.sampled_from(targets))
    restore, expected = draw(
        st.sampled_from(
            [
                ({"source": "VolumeSnapshot"}, RESTORE_SNAPSHOT_NAME),
                (
                    {"source": "VolumeSnapshot", "volumeSnapshotName": "", "whenMissing": "Wait"},
                    RESTORE_SNAPSHOT_NAME,
                ),
                (
                    {"source": "NewestSnapshot", "volumeSnapshotName": "ckpt-7"},
                    RESTORE_SNAPSHOT_NAME,
                ),
                (
                    {"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"},
                    SUSPEND_SNAPSHOT_RESTORES,
                ),
                ({"source": "NewestSnapshot"}, SUSPEND_SNAPSHOT_NOT_CREATED),
            ]
        )
    )
    policy["restorePolicy"] = restore
    if expected != RESTORE_SNAPSHOT_NAME:
        policy.setdefault("retentionPolicy", {})["whenSuspended"] = "Snapshot"
    if expected == SUSPEND_SNAPSHOT_NOT_CREATED:
        policy["creationPolicy"] = {"whenSuspended": "Create"}
    return expected


def bad_snapshot_fields(draw: st.DrawFn, js: Obj) -> str | None:
    """snapshotPolicy and restorePolicy values outside the schema."""
    policy = draw(st.sampled_from(_policies(js)))
    cases: list[tuple[Obj, str]] = [
        ({"snapshotPolicy": {"historyLimit": 0}}, "greater than or equal to 1"),
        ({"snapshotPolicy": {"historyLimit": 101}}, "less than or equal to 100"),
        ({"snapshotPolicy": {"volumeSnapshotClassName": "c" * 254}}, "Too long"),
        ({"restorePolicy": {"whenMissing": "Wait"}}, "Required value"),
        ({"restorePolicy": {"source": "Newest"}}, "Unsupported value"),
        (
            {"restorePolicy": {"source": "NewestSnapshot", "whenMissing": "Skip"}},
            "Unsupported value",
        ),
    ]
    broken, expected = draw(st.sampled_from(cases))
    policy.update(broken)
    return expected


def bad_template_name(draw: st.DrawFn, js: Obj) -> str | None:
    bad = draw(st.sampled_from(["Data", "a.b", "t" * 64, "-x"]))
    policy = draw(st.sampled_from(_policies(js)))
    policy["templates"].append(pvc(bad, "1Gi"))
    users = policy.get("targetReplicatedJobs") or [_rjobs(js)[0]["name"]]
    for rjob in _rjobs(js):
        if rjob["name"] in users:
            mount(rjob, bad)
    return REJECTED


def template_namespace(draw: st.DrawFn, js: Obj) -> str | None:
    draw(st.sampled_from(_policies(js)))["templates"][0]["metadata"]["namespace"] = "other"
    return "a volume claim template must not set metadata.namespace"


def unmounted_template(draw: st.DrawFn, js: Obj) -> str | None:
    draw(st.sampled_from(_policies(js)))["templates"].append(pvc("unused", "1Gi"))
    return "every volume claim template must be mounted by a replicated job it targets"


def _untargeted(draw: st.DrawFn, js: Obj) -> tuple[Obj, str]:
    """A replicated job that a policy does not target (one is added when all are), mounting the
    policy's first template by name; and that name."""
    policy = draw(st.sampled_from(_policies(js)))
    name = _name(policy["templates"][0]) or "unnamed"
    rjobs = _rjobs(js)
    if "targetReplicatedJobs" not in policy:
        policy["targetReplicatedJobs"] = [
            r["name"]
            for r in rjobs
            if any(m["name"] == name for m in container(r).get("volumeMounts", []))
        ]
    outside = [r for r in rjobs if r["name"] not in policy["targetReplicatedJobs"]]
    if not outside:
        outside = [copy.deepcopy(rjobs[0]) | {"name": "outsider"}]
        outside[0].pop("dependsOn", None)
        container(outside[0])["volumeMounts"] = []
        rjobs.append(outside[0])
    chosen = draw(st.sampled_from(outside))
    mount(chosen, name)
    return chosen, name


def untargeted_mount(draw: st.DrawFn, js: Obj) -> str | None:
    _untargeted(draw, js)
    return (
        "a replicated job that a volume claim policy does not target must not mount its templates"
    )


def unknown_target(draw: st.DrawFn, js: Obj) -> str | None:
    policy = draw(st.sampled_from(_policies(js)))
    policy["targetReplicatedJobs"] = [*policy.get("targetReplicatedJobs", []), "ghost"]
    return REJECTED  # also "not targeted" when the list was implicit


def bad_claim_template(draw: st.DrawFn, js: Obj) -> str | None:
    """What Kubernetes would refuse in a claim made from the template (issue 12, item 10)."""
    template = draw(st.sampled_from(_policies(js)))["templates"][0]
    choice = draw(
        st.sampled_from(["modes", "mode", "rwop", "storage", "zero", "key", "value", "annotation"])
    )
    if choice == "modes":
        template["spec"]["accessModes"] = []
        return "a volume claim template must list at least one access mode in spec.accessModes"
    if choice == "mode":
        template["spec"]["accessModes"] = ["ReadWriteOnce", "WriteMany"]
        return "spec.accessModes of a volume claim template may contain only"
    if choice == "rwop":
        template["spec"]["accessModes"] = ["ReadWriteOncePod", "ReadOnlyMany"]
        return "cannot combine ReadWriteOncePod with other access modes"
    if choice == "storage":
        template["spec"]["resources"]["requests"] = {}
        return "a volume claim template must request storage in spec.resources.requests.storage"
    if choice == "zero":
        template["spec"]["resources"]["requests"]["storage"] = draw(
            st.sampled_from(["0", "0Gi", "-5M", 0])
        )
        return "spec.resources.requests.storage of a volume claim template must be greater than"
    if choice == "key":
        template["metadata"]["labels"] = {draw(st.sampled_from(["a b", "-x", "a/b/c"])): "v"}
        return "metadata.labels keys of a volume claim template must be qualified names"
    if choice == "value":
        template["metadata"]["labels"] = {"tier": draw(st.sampled_from(["hot!", "-x", "a b"]))}
        return "metadata.labels values of a volume claim template must be empty or letters"
    template["metadata"]["annotations"] = {"a b": ""}
    return "metadata.annotations keys of a volume claim template must be qualified names"


def untargeted_own_volume(draw: st.DrawFn, js: Obj) -> str | None:
    """A replicated job that a policy does not target mounts its own volume of a template's name:
    allowed (issue 12, item 9), by admission and by the controller."""
    chosen, name = _untargeted(draw, js)
    volumes_ = pod_spec(chosen).setdefault("volumes", [])
    if all(v["name"] != name for v in volumes_):
        volumes_.append({"name": name, "emptyDir": {}})
    return None


def template_without_name(draw: st.DrawFn, js: Obj) -> str | None:
    draw(st.sampled_from(_policies(js)))["templates"][0]["metadata"] = {"labels": {"a": "b"}}
    return "Required value"


def odd_quantity(draw: st.DrawFn, js: Obj) -> str | None:
    """Storage requests: valid, invalid and odd-but-matching-the-pattern quantities."""
    storage = draw(
        st.sampled_from(["lots", "1GB", "-1Gi", ".5Gi", "1.", "+3", "1e2.5", "1e1000", "2E"])
    )
    template = draw(st.sampled_from(_policies(js)))["templates"][0]
    template["spec"]["resources"]["requests"]["storage"] = storage
    if storage in ("lots", "1GB"):
        return "should match"
    if storage in ("1e2.5",):  # matches the pattern, but Kubernetes cannot parse it
        return "must be a Kubernetes quantity, e.g. 10Gi or 500M"
    return None


def pod_scope_or_bad_volume_policy(draw: st.DrawFn, js: Obj) -> str | None:
    js["spec"]["volumePolicy"] = {
        "replicatedJobs": [{"name": draw(st.sampled_from(["ghost", ""]))}],
        "volumeClaimTemplates": [pvc("vp", "1Gi")],
    }
    mount(_rjobs(js)[0], "vp")
    return REJECTED


# Values of a volume policy annotation that its field refuses, by the field's kind.
BAD_KEY_VALUES = {
    "enum": ("Sometimes", "retain", " Retain"),
    "int": ("0", "-1", "101", "ten", "1e2", "0x10"),
    "list": ("a,,b", ",", " , "),
    "str": (),  # too long: made from the field's bound
}
KEY_STRINGS = ("csi-snapclass", "ckpt-7", "run-1.step-100", "other-run")


def _key_value(draw: st.DrawFn, js: Obj, key: volumekeys.Key | None, valid: bool) -> str:
    """A value for ``key`` that its field admits (``valid``) or one it refuses."""
    if key is None:  # a field that does not exist: any value
        return draw(st.sampled_from(["Retain", "1", "x"]))
    record = key.record
    if isinstance(record, ListField):
        if valid:
            names = [r["name"] for r in _rjobs(js)] + ["ghost"]
            chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
            return draw(st.sampled_from([",", ", "])).join(chosen)
        many = ",".join(["w"] * ((record.max_items or 0) + 1))
        return draw(st.sampled_from([*BAD_KEY_VALUES["list"], many]))
    if record.enum:
        return draw(st.sampled_from(record.enum if valid else BAD_KEY_VALUES["enum"]))
    if record.type is int:
        if valid:
            return str(draw(st.integers(record.minimum or 0, record.maximum or 0)))
        return draw(st.sampled_from(BAD_KEY_VALUES["int"]))
    if valid:
        return draw(st.sampled_from(KEY_STRINGS))
    return "s" * ((record.max_length or 0) + 1)


def volume_annotation(draw: st.DrawFn, js: Obj) -> str | None:
    """One to three volume policy annotations on the JobSet, each naming a template of its own
    (one is added if it has none) or an unknown one, one of the fields or an unknown one, and
    holding a value the field admits, one it refuses, or "" (the same as leaving the key out).
    The admission policy checks each key by itself; what the keys mean together with the spec
    is the controller's (DOCUMENTED_CONTROLLER_CHECKS)."""
    if not any(_templates(js)):
        _policies(js)
    names = sorted({n for n in _templates(js) if n})
    meta = js.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    refused = False
    for _ in range(draw(st.integers(1, 3))):
        template = draw(st.sampled_from([*names, *names, *names, "ghost"]))
        field_names = [k.name for k in volumekeys.KEYS]
        name = draw(st.sampled_from([*field_names, "colour", "retentionPolicy.whenGone"]))
        key = volumekeys.BY_NAME.get(name)
        kind = draw(st.sampled_from(["valid", "valid", "valid", "invalid", "empty"]))
        value = "" if kind == "empty" else _key_value(draw, js, key, kind == "valid")
        annotations[f"{template}{volumekeys.MARK}{name}"] = value
    for annotation, value in annotations.items():
        if volumekeys.ours(annotation):
            template, name = volumekeys.split(annotation)
            key = volumekeys.BY_NAME.get(name)
            refused = refused or (
                template not in names or key is None or (value != "" and not key.holds(value))
            )
    return volumekeys.MESSAGE if refused else None


# Examples run with a mutation first, beyond EXAMPLES_PER_MUTATION: the annotation keys have
# many fields and outcomes (refused by admission, by the controller with the spec, accepted).
EXTRA_EXAMPLES: dict[str, int] = {"volume_annotation": 60}


CREATE_MUTATIONS: tuple[Mutation, ...] = (
    duplicate_rjob_name,
    bad_rjob_name,
    bad_jobset_name,
    bad_replicas,
    bad_success_targets,
    bad_failure_rule,
    bad_message_pattern,
    bad_depends_on,
    in_order_with_depends_on,
    bad_coordinator,
    bad_subdomain,
    bad_group_name,
    bad_managed_by,
    negative_ttl,
    wrong_type,
    no_containers,
    bad_scope,
    pod_scope_not_indexed,
    duplicate_template,
    template_volume_collision,
    bad_retention,
    bad_restore,
    bad_snapshot_fields,
    bad_template_name,
    template_namespace,
    unmounted_template,
    untargeted_mount,
    untargeted_own_volume,
    bad_claim_template,
    unknown_target,
    template_without_name,
    odd_quantity,
    pod_scope_or_bad_volume_policy,
    volume_annotation,
)


@st.composite
def mutated(
    draw: st.DrawFn, base: Obj, mutations: tuple[Mutation, ...], first: Mutation | None
) -> Case:
    """``base`` with ``first`` (if given) and 0-2 random mutations applied."""
    case = Case(copy.deepcopy(base))
    chosen = [] if first is None else [first]
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2] if first is None else [0, 0, 0, 1]))):
        chosen.append(draw(st.sampled_from(mutations)))
    for mutation in chosen:
        case.mutations.append(mutation.__name__)
        expected = mutation(draw, case.body)
        if expected is not None:
            case.expected.append(expected)
    if len(case.mutations) > 1:
        case.expected = []  # a later mutation may undo or mask an earlier one's breakage
    return case


# ------------------------------------------------------------------ the two properties


@dataclass
class Tally:
    accepted: int = 0
    rejected: int = 0
    parser_rejects_rejected: int = 0
    # Updates the server refuses by a transition rule only, which the parser cannot see.
    transition_only: int = 0
    documented_mismatches: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    # Refused by the server (an update: by the rules of a create), accepted by the parser.
    missed_refusals: list[str] = field(default_factory=list)
    contract_mismatches: list[str] = field(default_factory=list)
    messages: set[str] = field(default_factory=set)
    drawn: Counter[str] = field(default_factory=Counter)


async def submit(
    kube: Kube, method: str, path: str, body: Obj, *, dry_run: bool = True
) -> tuple[int, Obj]:
    response = await kube.api.call_api(
        path,
        method,
        body=body,
        query_params=[("dryRun", "All")] if dry_run else [],
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=30,
    )
    async with response:
        return int(response.status), await response.json()


def check_response(case: Case, status: int, body: Obj, ok: int, tally: Tally) -> bool:
    """Property (a); True when the server accepted the JobSet."""
    where = case.describe()
    tally.drawn.update(f"{m}:{'accepted' if status == ok else status}" for m in case.mutations)
    if status == ok:
        assert body.get("kind") == api.KIND, f"{where}: {status} without a JobSet: {body}"
        assert REJECTED not in case.expected and not case.expected, (
            f"{where}: the server accepted a JobSet that breaks a rule; expected {case.expected}"
        )
        tally.accepted += 1
        return True
    assert status == 422, f"{where}: status {status} (only {ok} or 422 Invalid allowed): {body}"
    assert body.get("kind") == "Status" and body.get("reason") == "Invalid", body
    causes = (body.get("details") or {}).get("causes") or []
    assert causes, f"{where}: a 422 without causes: {body}"
    messages: list[str] = []
    by_policy = False
    for cause in causes:
        message = str(cause.get("message") or "")
        assert message, f"{where}: a cause without a message: {causes}"
        rules = policy_rule_messages(message)
        by_policy = by_policy or rules is not None
        for rule in rules if rules is not None else [message]:
            documented = _documented(rule) if rules is not None else known_message(rule)
            assert documented, (
                f"{where}: a rejection message that is neither documented in docs/api.md nor an "
                f"OpenAPI schema message: {rule!r}"
            )
            tally.messages.add(rule)
            messages.append(rule)
    skipped = any(SKIPPED in m for m in messages)
    for expected in case.expected:
        if expected == REJECTED or (
            skipped and expected not in ("Unsupported value", "Required value")
        ):
            continue
        # The CRD's own checks run first: when they refuse, the policy's rules never run.
        if not by_policy and any(m.startswith(expected) for m in POLICY_MESSAGES):
            continue
        assert any(expected in m for m in messages), (
            f"{where}: expected {expected!r} among the causes: {messages}"
        )
    tally.rejected += 1
    return False


def _plan_jobs(jobset: JobSet) -> tuple[list[Obj], list[str], Obj | None]:
    """decide with nothing observed, then again with the claims it asked for in place: created,
    and their uids recorded in the status (as the reconciler does), so its Jobs mount them."""
    first = decide(jobset, [], None, NOW)
    stored, claims = applied(jobset, first)
    second = decide(parse(stored), [], None, NOW, claims=claim_views(claims.values()))
    return second.create_jobs, sorted(claims), first.create_service


def check_plan(case: Case, stored: Obj) -> None:
    """Property (b) for a JobSet the server accepted (``stored``: what the cache would see)."""
    where = case.describe()
    jobset = parse(stored)
    total = sum(r.replicas for r in jobset.replicated_jobs)
    assert total <= 64, f"{where}: the server accepted {total} Jobs' worth of replicas"
    jobs, claims, service = _plan_jobs(jobset)
    names = [j["metadata"]["name"] for j in jobs]
    assert len(names) == len(set(names)), f"{where}: duplicate Job names {names}"
    for name in names:
        assert len(name) <= 63 and DNS_1035.match(name), f"{where}: Job name {name!r}"
    for claim in claims:
        assert len(claim) <= 253 and DNS_1123_SUBDOMAIN.match(claim), f"{where}: claim {claim!r}"
    expected = {
        f"{jobset.name}-{r.name.lower()}-{i}"
        for r in jobset.replicated_jobs
        for i in range(r.replicas)
    }
    assert set(names) <= expected, f"{where}: Jobs {sorted(set(names) - expected)} not desired"
    gated = jobset.startup_in_order or any(r.depends_on for r in jobset.replicated_jobs)
    # Suspended with a policy that waits for the resume, or a restore that waits for a snapshot
    # (none exists here): the Jobs mounting its claims wait too.
    waiting = any(
        waits_for_resume(jobset, p) or (p.restore is not None and p.restore.when_missing == "Wait")
        for p in volume_spec.policies(jobset)
    )
    if not (gated or waiting):
        assert set(names) == expected, f"{where}: Jobs {sorted(expected - set(names))} not created"
    templates = {t.name for p in volume_spec.policies(jobset) for t in p.templates}
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        volume_names = [v["name"] for v in pod.get("volumes") or []]
        assert len(volume_names) == len(set(volume_names)), f"{where}: pod volumes {volume_names}"
        mounted = {
            v["persistentVolumeClaim"]["claimName"]
            for v in pod.get("volumes") or []
            if "persistentVolumeClaim" in v
        }
        assert mounted <= set(claims), (
            f"{where}: {job['metadata']['name']} mounts undesired {mounted}"
        )
        used = {
            m["name"]
            for c in pod.get("containers", []) + pod.get("initContainers", [])
            for m in c.get("volumeMounts") or []
        }
        assert used & templates <= set(volume_names), f"{where}: a mounted template has no volume"
        assert job["spec"].get("suspend", False) == jobset.suspend
        labels = job["metadata"]["labels"]
        assert labels[api.JOBSET_NAME] == jobset.name and labels[api.RESTART_ATTEMPT] == "0"
    if jobset.network.enable_dns_hostnames:
        assert service is not None and service["metadata"]["name"] == jobset.subdomain, where


def check_parser(
    case: Case, accepted: bool, stored: Obj, tally: Tally, required: str | None = None
) -> None:
    """Property (b): the parser agrees with the server, or raises its typed error; ``required``:
    a refusal the parser must share (the server's of a create, the Python rules' of an update's
    new object as a create), None when the server accepted or refused by a transition rule."""
    where = case.describe()
    try:
        jobset = parse(stored)
        volumes.model(jobset)
    except InvalidJobSet as err:
        _parser_refused(case, accepted, str(err), tally)
        return
    if required is not None:
        tally.missed_refusals.append(f"{where}: refused ({required!r}), but the parser accepts it")
        return
    replicas = [r.get("replicas") for r in (stored.get("spec") or {}).get("replicatedJobs") or []]
    total = sum(r for r in replicas if isinstance(r, int) and not isinstance(r, bool) and r > 0)
    if total > MAX_PLANNED:
        # Planning would build every Job (and Job-scope claim) in memory, synchronously.
        if accepted:
            tally.mismatches.append(
                f"{where}: accepted with {total} replicas in all, which the controller would "
                "plan (every Job and Job-scope claim) synchronously in one reconcile"
            )
        return
    try:
        decide(jobset, [], None, NOW)
    except InvalidJobSet as err:
        _parser_refused(case, accepted, str(err), tally)
        return
    if accepted:
        check_plan(case, stored)


def _parser_refused(case: Case, accepted: bool, message: str, tally: Tally) -> None:
    assert message, f"{case.describe()}: an InvalidJobSet without a message"
    if not accepted:
        tally.parser_rejects_rejected += 1
        return
    line = f"{case.describe()}: {message}"
    if any(p.search(message) for p in DOCUMENTED_CONTROLLER_CHECKS):
        tally.documented_mismatches.append(line)
    else:
        tally.mismatches.append(line)


def run_in_thread(examples: int, body: Callable[[st.DataObject], None]) -> None:
    """Run ``body`` as a hypothesis test (it draws what it needs from ``data``)."""

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        # No "explain" phase: it traces every line of the controller code, which is slow.
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        body(data)

    prop()


def blocking(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, T]], T]:
    """From the hypothesis thread: run a coroutine on the test's event loop and wait for it."""

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

    return run


def _with_identity(obj: Obj, namespace: str) -> Obj:
    result = copy.deepcopy(obj)
    meta = result.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    meta.setdefault("uid", "00000000-0000-0000-0000-000000000001")
    meta.setdefault("generation", 1)
    return result


def report(tally: Tally, what: str) -> None:
    print(
        f"\n{what}: {tally.accepted} accepted, {tally.rejected} rejected "
        f"({len(tally.messages)} distinct messages), parser also refused "
        f"{tally.parser_rejects_rejected} of the rejected ({tally.transition_only} rejected by "
        "transition rules only); documented controller-side refusals: "
        f"{len(tally.documented_mismatches)}"
    )
    print("  ", dict(sorted(tally.drawn.items())))
    for line in sorted(set(tally.documented_mismatches)):
        print("   documented:", line[:300])
    for line in sorted(set(tally.mismatches)) + sorted(set(tally.missed_refusals)):
        print("  ", line)
    failures = []
    if tally.mismatches:
        failures.append(
            "the API server accepted JobSets that the controller's parser refuses (admission and "
            "parser disagree; each would get a SpecInvalid condition instead of a 422):\n"
            + "\n".join(sorted(set(tally.mismatches)))
        )
    if tally.missed_refusals:
        failures.append(
            "the API server refused JobSets that the controller's parser accepts (one that "
            "reached the controller without admission would be acted on):\n"
            + "\n".join(sorted(set(tally.missed_refusals)))
        )
    assert not failures, "\n".join(failures)


def fuzz(
    mutations: tuple[Mutation, ...], example: Callable[[st.DataObject, Mutation | None], None]
) -> None:
    """A run with random mutations, then one per mutation (so that each rule is reached)."""

    def starting_with(first: Mutation | None) -> Callable[[st.DataObject], None]:
        def run(data: st.DataObject) -> None:
            example(data, first)

        return run

    run_in_thread(EXAMPLES_MIXED, starting_with(None))
    for mutation in mutations:
        examples = EXAMPLES_PER_MUTATION + EXTRA_EXAMPLES.get(mutation.__name__, 0)
        run_in_thread(examples, starting_with(mutation))


def check_coverage(tally: Tally, mutations: tuple[Mutation, ...], what: str) -> None:
    report(tally, what)
    runs = EXAMPLES_MIXED + EXAMPLES_PER_MUTATION * len(mutations)
    assert tally.accepted + tally.rejected >= runs, f"only {tally} of {runs} examples ran"
    assert tally.accepted >= runs // 10 and tally.rejected >= runs // 4, tally
    drawn = {key.split(":")[0] for key in tally.drawn}
    assert drawn == {m.__name__ for m in mutations}, "every mutation must have been tried"
    # The annotation keys must be seen both ways: admitted (then parsed and planned, or refused
    # by the controller's documented checks) and refused (then refused by the parser too).
    outcomes = {key.split(":")[1] for key in tally.drawn if key.startswith("volume_annotation:")}
    assert outcomes == {"accepted", "422"}, f"volume_annotation outcomes: {outcomes}"


def server_errors(body: Obj) -> set[str]:
    """A 422's errors as the API server words each: ``<field>: <message>``, or for the admission
    policy's denial, the one message."""
    message = str(body.get("message", ""))
    if POLICY_DENIED in message:
        return {message}
    causes = (body.get("details") or {}).get("causes") or []
    return {f"{c.get('field', '<nil>')}: {c.get('message', '')}" for c in causes}


def check_contract(
    case: Case, accepted: bool, body: Obj, tally: Tally, stored: Obj | None = None
) -> None:
    """Property (c): the Python rules (``controller/api/validation.py``) give the API server's
    verdict, in its words: every field error the CRD reports, or the policy's whole message;
    ``stored``: the object an update replaces."""
    refusal = CONTRACT.refusal(case.body, stored)
    if accepted or refusal is None:
        if accepted != (refusal is None):
            verdict = "admits" if accepted else "refuses"
            tally.contract_mismatches.append(
                f"{case.describe()}: the API server {verdict} it, the Python rules say "
                f"{refusal.message if refusal else 'nothing'!r} (server: {body.get('message')!r})"
            )
        return
    ours = {refusal.message} if POLICY_DENIED in refusal.message else set(refusal.errors)
    theirs = server_errors(body)
    if ours != theirs:
        tally.contract_mismatches.append(
            f"{case.describe()}:\n   server only: {sorted(theirs - ours)}"
            f"\n   Python only: {sorted(ours - theirs)}"
        )


async def test_generated_creates_agree_with_admission(kube: Kube, namespace: str) -> None:
    await install_crd(kube)
    path = f"{API}/namespaces/{namespace}/jobsets"
    tally = Tally()
    run = blocking(asyncio.get_running_loop())

    def example(data: st.DataObject, first: Mutation | None) -> None:
        case = data.draw(mutated(data.draw(valid_jobsets()), CREATE_MUTATIONS, first))
        status, body = run(submit(kube, "POST", path, case.body))
        accepted = check_response(case, status, body, 201, tally)
        check_contract(case, accepted, body, tally)
        required = None if accepted else str(body.get("message"))
        check_parser(
            case,
            accepted,
            _with_identity(body if accepted else case.body, namespace),
            tally,
            required,
        )

    await asyncio.to_thread(fuzz, CREATE_MUTATIONS, example)
    check_coverage(tally, CREATE_MUTATIONS, "create")
    assert not tally.contract_mismatches, (
        "the Python rules (controller/api/validation.py) disagree with the API server:\n"
        + "\n".join(tally.contract_mismatches)
    )
    assert len(tally.messages) >= 40, "the mutations should reach many different rules"


# ------------------------------------------------------------------ updates


def _rjob_change(draw: st.DrawFn, js: Obj) -> str | None:
    suspended = js["spec"].get("suspend") is True
    rjob = draw(st.sampled_from(_rjobs(js)))
    choice = draw(st.sampled_from(["image", "placement", "add", "group"]))
    if choice == "image":
        container(rjob)["image"] = "python"
    elif choice == "placement":
        pod_spec(rjob)["nodeSelector"] = {"pool": draw(st.sampled_from(["a", "b"]))}
        return (
            None
            if suspended
            else "spec.replicatedJobs is immutable while the JobSet is not suspended"
        )
    elif choice == "add":
        twin = copy.deepcopy(rjob) | {"name": "added"}
        twin.pop("dependsOn", None)
        _rjobs(js).append(twin)
    else:
        rjob["groupName"] = "other-group"
    if suspended:
        return "while the JobSet is suspended, only replicas and the labels"
    return "spec.replicatedJobs is immutable while the JobSet is not suspended"


def _replicas_change(draw: st.DrawFn, js: Obj) -> str | None:
    draw(st.sampled_from(_rjobs(js)))["replicas"] = draw(st.integers(0, 4))
    return None  # allowed, unless e.g. coordinator.jobIndex no longer fits


def _suspend_toggle(draw: st.DrawFn, js: Obj) -> str | None:
    js["spec"]["suspend"] = not js["spec"].get("suspend", False)
    return None


def _policy_change(draw: st.DrawFn, js: Obj) -> str | None:
    spec = js["spec"]
    choice = draw(
        st.sampled_from(["network", "success", "failure", "startup", "coordinator", "managedBy"])
    )
    if choice == "network":
        network = spec["network"]
        network["enableDNSHostnames"] = not network.get("enableDNSHostnames", True)
        return "spec.network is immutable"
    if choice == "success":
        spec["successPolicy"]["operator"] = (
            "Any" if spec["successPolicy"]["operator"] == "All" else "All"
        )
        return "spec.successPolicy is immutable"
    if choice == "failure":
        if "failurePolicy" not in spec:
            spec["failurePolicy"] = {"maxRestarts": 2}  # adding an absent policy is allowed
            return None
        spec["failurePolicy"]["maxRestarts"] = spec["failurePolicy"].get("maxRestarts", 0) + 1
        return "spec.failurePolicy is immutable"
    if choice == "startup":
        order = spec["startupPolicy"]["startupPolicyOrder"]
        spec["startupPolicy"]["startupPolicyOrder"] = (
            "AnyOrder" if order == "InOrder" else "InOrder"
        )
        return "spec.startupPolicy is immutable"
    if choice == "coordinator":
        if "coordinator" not in spec:
            return None
        spec["coordinator"]["podIndex"] = spec["coordinator"].get("podIndex", 0) + 1
        return "spec.coordinator is immutable"
    if spec.get("managedBy"):
        del spec["managedBy"]
    else:
        spec["managedBy"] = "example.com/other"
    return "spec.managedBy is immutable"


def _a_template(draw: st.DrawFn, js: Obj) -> tuple[str, Obj, Obj] | None:
    """(spelling, its policy, its first template) of a volume policy, if the JobSet has one."""
    spec = js["spec"]
    spelled = [k for k in ("volumeClaimPolicies", "volumePolicy") if spec.get(k)]
    if not spelled:
        return None
    key = draw(st.sampled_from(spelled))
    if key == "volumeClaimPolicies":
        return key, spec[key][0], spec[key][0]["templates"][0]
    return key, spec[key], spec[key]["volumeClaimTemplates"][0]


def _volume_allowed_change(draw: st.DrawFn, js: Obj) -> str | None:
    found = _a_template(draw, js)
    if found is not None:
        policy, template = found[1], found[2]
        change = draw(st.sampled_from(["labels", "storage", "snapshot-and-restore"]))
        if change == "labels":
            template["metadata"]["labels"] = {"changed": "yes"}
        elif change == "storage":
            template["spec"]["resources"]["requests"]["storage"] = "2Ti"
        else:  # like creationPolicy, these may change at any time
            policy.pop("snapshotPolicy", None)
            policy.pop("restorePolicy", None)
            policy.update(draw(snapshot_and_restore()))
            if (policy.get("retentionPolicy") or {}).get("whenSuspended") == "Snapshot":
                # As suspend-snapshot-restores asks (not drawn: the other draws stay as they were).
                policy["restorePolicy"] = {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"}
    return None


def _volume_storage_lowered(draw: st.DrawFn, js: Obj) -> str | None:
    found = _a_template(draw, js)
    if found is None:
        return None
    found[2]["spec"]["resources"]["requests"]["storage"] = "1m"
    return "a volume claim template's storage request cannot be lowered"


def _volume_immutable_change(draw: st.DrawFn, js: Obj) -> str | None:
    found = _a_template(draw, js)
    if found is None:
        return None
    key, policy, template = found
    if draw(st.booleans()):
        template["spec"]["accessModes"] = ["ReadOnlyMany"]
    else:
        retention = policy.setdefault("retentionPolicy", {})
        retention["whenFailed"] = "Delete" if retention.get("whenFailed") == "Retain" else "Retain"
    return f"spec.{key} is immutable, except the templates' labels and annotations"


UPDATE_MUTATIONS: tuple[Mutation, ...] = (
    _rjob_change,
    _replicas_change,
    _suspend_toggle,
    _policy_change,
    _volume_allowed_change,
    _volume_storage_lowered,
    _volume_immutable_change,
    bad_success_targets,
    bad_subdomain,
    bad_managed_by,
    negative_ttl,
    bad_scope,
    template_namespace,
    volume_annotation,
)
_counter = itertools.count()


def create_refusal(obj: Obj) -> str | None:
    """The Python rules' refusal of ``obj`` as a create (its status left out, as a create drops
    it): what the parser, which has no stored object, must refuse of an update's new object."""
    refusal = CONTRACT.refusal({k: v for k, v in obj.items() if k != "status"})
    return None if refusal is None else refusal.message


async def test_generated_updates_agree_with_admission(kube: Kube, namespace: str) -> None:
    await install_crd(kube)
    path = f"{API}/namespaces/{namespace}/jobsets"
    tally = Tally()
    run = blocking(asyncio.get_running_loop())

    def example(data: st.DataObject, first: Mutation | None) -> None:
        # A valid JobSet, created for real; then a dry-run replace of what was stored (defaults,
        # resourceVersion) with the mutations applied.
        base = data.draw(valid_jobsets(name=f"upd-{next(_counter)}"))
        status, stored = run(submit(kube, "POST", path, base, dry_run=False))
        assert status == 201, f"a valid JobSet was refused: {stored}"
        case = data.draw(mutated(stored, UPDATE_MUTATIONS, first))
        status, body = run(submit(kube, "PUT", f"{path}/{stored['metadata']['name']}", case.body))
        required = None if status == 200 else create_refusal(case.body)
        if status != 200 and required is None:
            tally.transition_only += 1
        accepted = check_response(case, status, body, 200, tally)
        check_contract(case, accepted, body, tally, stored)
        check_parser(case, accepted, body if accepted else case.body, tally, required)

    await asyncio.to_thread(fuzz, UPDATE_MUTATIONS, example)
    check_coverage(tally, UPDATE_MUTATIONS, "update")
    assert not tally.contract_mismatches, (
        "the Python rules (controller/api/validation.py) disagree with the API server:\n"
        + "\n".join(tally.contract_mismatches)
    )
    messages = " ".join(tally.messages)
    for rule in (
        "spec.network is immutable",
        "spec.replicatedJobs is immutable",
        "cannot be lowered",
    ):
        assert rule in messages, f"no update reached {rule!r}"


# ------------------------------------------------------------------ the largest accepted JobSet

PLAN_SCRIPT = """
import datetime, json, sys
from controller.jobset import volumes
from controller.jobset.decide import decide
from controller.jobset.model import parse
jobset = parse(json.loads(sys.stdin.read()))
decide(jobset, [], None, datetime.datetime.now(datetime.UTC), model=volumes.model(jobset))
"""


async def test_largest_accepted_replicas_are_planned_in_bounded_time(
    kube: Kube, namespace: str
) -> None:
    """The bound admission puts on replicas (int32, replicas x parallelism <= 2147483647) must be
    one the controller can plan: ``decide`` is synchronous, so a plan that takes minutes stalls
    every JobSet of the controller (and its leader-election renewals) for that long."""
    await install_crd(kube)
    path = f"{API}/namespaces/{namespace}/jobsets"
    rjob: Obj = {
        "name": "w",
        "replicas": 2**31 - 1,
        "template": {
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}],
                            }
                        ]
                    }
                },
            }
        },
    }
    body: Obj = {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": "big"},
        "spec": {
            "replicatedJobs": [rjob],
            "volumeClaimPolicies": [{"scope": "Job", "templates": [pvc("ckpt", "1Gi")]}],
        },
    }
    status, stored = await submit(kube, "POST", path, body)
    if status == 422:
        return  # admission refuses it: nothing reaches the controller
    assert status == 201, stored
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PLAN_SCRIPT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        cwd=DOCS.parents[1],
    )
    try:
        _, stderr = await asyncio.wait_for(
            process.communicate(json.dumps(_with_identity(stored, namespace)).encode()), 10
        )
    except TimeoutError:
        raise AssertionError(
            "the API server accepts a JobSet with replicas 2147483647 (and a Job-scope volume "
            "claim template), but planning it (parse + volumes.model + decide) does not finish "
            "in 10 s: the controller would build every Job and claim in memory, synchronously, "
            "blocking its event loop"
        ) from None
    finally:
        if process.returncode is None:  # timed out, or the test was interrupted
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()[-2000:]
