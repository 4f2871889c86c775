"""Bad input never crashes the decision functions, and a spec they accept gets a sound plan.

Hypothesis mutates the project's example JobSets: any field of the spec or status may be replaced
by junk (dropped, retyped, emptied), with or without the children an earlier, unmutated
version of the JobSet made (its Jobs, in a drawn state, its claims, Bound, and the record of their
uids in its status). ``parse`` + ``volumes.model`` + ``decide`` must then either raise
``InvalidJobSet`` with a non-empty message or return a plan that keeps the invariants of
:func:`plan_violations`:

- no Job created twice in a plan, none created that already exists, none created for a finished
  or deleting JobSet, and none both created and deleted;
- every created Job belongs to a replicated job of the spec, at an index within its replicas, at
  the JobSet's current restart attempt, owned by the JobSet, named ``<jobset>-<rjob>-<index>``;
- every claim a created Job mounts is a desired claim of this JobSet (of that Job, for Job
  scope) that the plan found mountable (the JobSet's own, its uid in the stored record); pod
  volume names are unique;
- Jobs are deleted, patched or have their start time cleared only if they exist, each at most once;
- claims are created only if desired and absent, and never in place of a claim the stored record
  remembers unless the JobSet's annotation accepts exactly that loss; deleted only if they exist
  and are this JobSet's (its name label and uid annotation), patched only if they exist and carry
  its name label;
- a status the plan writes is well-formed: terminal state empty, Completed or Failed (not both
  conditions true), restarts counted sanely, every condition the plan sets has a unique type, a
  True/False status, a reason Kubernetes accepts and a timestamp; per-replicated-job counts are
  non-negative and name replicated jobs of the spec;
- a headless Service only with the JobSet's subdomain name, a JobSet deleted only once finished.

The same holds for malformed observed children (Jobs and claims with missing labels, wrong types,
foreign owners, any uid): never anything but ``InvalidJobSet``, and the invariants above.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.jobset import api, volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import Plan, decide
from controller.jobset.model import InvalidJobSet, JobSet, parse
from controller.jobset.volumes.desired import DesiredClaim
from controller.jobset.volumes.model import OWNER_UID_ANNOTATION, REPLACE_LOST_ANNOTATION
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.record import ClaimRecord
from tests.support.examples import SUPPORTED
from tests.unit.volumes.factories import applied

Obj = dict[str, Any]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
BASES = [yaml.safe_load(p.read_text()) for p in SUPPORTED]
# metav1.Condition's reason: what the API server accepts.
CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
TERMINAL_STATES = ("", api.TERMINAL_COMPLETED, api.TERMINAL_FAILED)

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.text(max_size=12) | st.floats(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            found += _paths(value, (*prefix, index))
    return found


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return obj


def _identified(base: Obj) -> Obj:
    obj = copy.deepcopy(base)
    obj["metadata"].update({"namespace": "ns", "uid": "uid-1", "generation": 1})
    return obj


# ------------------------------------------------------------------------------- invariants


def _name(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _duplicates(names: list[str]) -> list[str]:
    return sorted(n for n, count in Counter(names).items() if count > 1)


def _created_job_violations(
    jobset: JobSet, job: Obj, plan: Plan, desired: Mapping[str, DesiredClaim]
) -> list[str]:
    found: list[str] = []
    meta = job["metadata"]
    name = meta["name"]
    labels = meta.get("labels") or {}
    rjob_name = labels.get(api.REPLICATED_JOB_NAME)
    rjob = jobset.replicated_job(rjob_name) if isinstance(rjob_name, str) else None
    if rjob is None:
        return [f"Job {name} created for replicated job {rjob_name!r}, not in the spec"]
    index_label = labels.get(api.JOB_INDEX)
    index = int(index_label) if isinstance(index_label, str) and index_label.isdigit() else -1
    if not 0 <= index < rjob.replicas:
        found.append(f"Job {name} has index {index_label!r}, outside 0..{rjob.replicas - 1}")
    if name != f"{jobset.name}-{rjob.name.lower()}-{index}":
        found.append(f"Job {name} is not named <jobset>-<replicatedJob>-<index>")
    if labels.get(api.JOBSET_NAME) != jobset.name:
        found.append(f"Job {name} labelled for JobSet {labels.get(api.JOBSET_NAME)!r}")
    if labels.get(api.RESTART_ATTEMPT) != str(jobset.status.restarts):
        found.append(
            f"Job {name} at restart attempt {labels.get(api.RESTART_ATTEMPT)!r}, "
            f"the JobSet is at {jobset.status.restarts}"
        )
    owners = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if [r.get("uid") for r in owners] != [jobset.uid]:
        found.append(f"Job {name} is controlled by {owners}, not by the JobSet")
    pod = job["spec"]["template"]["spec"]
    volume_names = [v["name"] for v in pod.get("volumes") or []]
    if _duplicates(volume_names):
        found.append(f"Job {name} has pod volumes {_duplicates(volume_names)} twice")
    mountable = plan.volume.mountable if plan.volume else set()
    for volume in pod.get("volumes") or []:
        claim = _dict(volume.get("persistentVolumeClaim")).get("claimName")
        if claim is None:
            continue
        wanted = desired.get(claim)
        if wanted is None:
            found.append(f"Job {name} mounts claim {claim}, not a desired claim of the JobSet")
        elif wanted.replicated_job is not None and (
            wanted.replicated_job != rjob.name or wanted.job_index != index
        ):
            found.append(f"Job {name} mounts claim {claim} of another Job")
        if claim not in mountable:
            found.append(f"Job {name} mounts claim {claim}, which the plan did not find mountable")
    return found


def _status_violations(jobset: JobSet, status: Obj) -> list[str]:
    found: list[str] = []
    terminal = status.get("terminalState", "")
    if terminal not in TERMINAL_STATES:
        found.append(f"terminalState {terminal!r}")
    restarts, towards = status.get("restarts"), status.get("restartsCountTowardsMax")
    if not (isinstance(restarts, int) and isinstance(towards, int) and 0 <= towards <= restarts):
        found.append(f"restarts {restarts!r}, restartsCountTowardsMax {towards!r}")
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    true = {c.get("type") for c in conditions if c.get("status") == "True"}
    if {api.COMPLETED, api.FAILED} <= true:
        found.append("both Completed and Failed are True")
    types = [str(c.get("type")) for c in conditions]
    if _duplicates(types):
        found.append(f"condition types {_duplicates(types)} twice")
    stored = [c.to_dict() for c in jobset.status.conditions]
    for cond in conditions:
        if cond in stored:
            continue  # carried over from the stored status, not set by this plan
        kind = cond.get("type")
        if cond.get("status") not in ("True", "False"):
            found.append(f"condition {kind} has status {cond.get('status')!r}")
        reason = cond.get("reason")
        if not (isinstance(reason, str) and len(reason) <= 1024 and CONDITION_REASON.match(reason)):
            found.append(f"condition {kind} has reason {reason!r}")
        if not isinstance(cond.get("message"), str):
            found.append(f"condition {kind} has message {cond.get('message')!r}")
        if not isinstance(cond.get("lastTransitionTime"), str):
            found.append(f"condition {kind} has no lastTransitionTime")
    per_rjob = status.get("replicatedJobsStatus") or []
    names = [str(r.get("name")) for r in per_rjob]
    known = {r.name for r in jobset.replicated_jobs}
    if _duplicates(names) or not set(names) <= known:
        found.append(f"replicatedJobsStatus names {names}, spec has {sorted(known)}")
    for entry in per_rjob:
        for key in ("ready", "succeeded", "failed", "active", "suspended"):
            value = entry.get(key, 0)
            if not (isinstance(value, int) and value >= 0):
                found.append(f"replicatedJobsStatus {entry.get('name')}.{key} = {value!r}")
    return found


def plan_violations(
    jobset: JobSet, jobs: list[Any], claims: Mapping[str, Any], plan: Plan
) -> list[str]:
    """What is wrong with ``plan`` for ``jobset`` given the observed ``jobs`` and ``claims``."""
    found: list[str] = []
    model = volumes.model(jobset)
    desired = {c.name: c for c in model.desired}
    observed = {n for n in (_name(j) for j in jobs) if n is not None}

    created = [j["metadata"]["name"] for j in plan.create_jobs]
    if _duplicates(created):
        found.append(f"Jobs {_duplicates(created)} created twice")
    if set(created) & observed:
        found.append(f"Jobs {sorted(set(created) & observed)} created but they exist")
    if created and (jobset.finished or jobset.deleting):
        found.append(f"Jobs {created} created for a finished or deleting JobSet")
    if set(created) & set(plan.delete_jobs):
        found.append(f"Jobs {sorted(set(created) & set(plan.delete_jobs))} created and deleted")
    for job in plan.create_jobs:
        found += _created_job_violations(jobset, job, plan, desired)

    touched = {
        "deleted": list(plan.delete_jobs),
        "patched": [name for name, _ in plan.patch_jobs],
        "start time cleared": list(plan.clear_start_time),
    }
    for what, names in touched.items():
        if _duplicates(names):
            found.append(f"Jobs {_duplicates(names)} {what} twice")
        if not set(names) <= observed:
            found.append(f"Jobs {sorted(set(names) - observed)} {what} but not observed")

    vplan = plan.volume
    if vplan is not None:
        made = [c.name for c in vplan.create]
        if _duplicates(made):
            found.append(f"claims {_duplicates(made)} created twice")
        if not set(made) <= set(desired):
            found.append(f"claims {sorted(set(made) - set(desired))} created but not desired")
        if set(made) & set(claims):
            found.append(f"claims {sorted(set(made) & set(claims))} created but they exist")
        for claim in vplan.create:
            lost = model.record.get(claim.slot)
            if lost is not None and (claim.name, lost) not in model.accepted_losses:
                found.append(f"claim {claim.name} (uid {lost}) lost, recreated without consent")
        for name in vplan.deleted:
            meta = _dict(_dict(claims.get(name)).get("metadata"))
            if name not in claims:
                found.append(f"claim {name} deleted but not observed")
            elif (
                _dict(meta.get("labels")).get(api.JOBSET_NAME) != jobset.name
                or _dict(meta.get("annotations")).get(OWNER_UID_ANNOTATION) != jobset.uid
            ):
                found.append(f"claim {name} deleted but it is not this JobSet's")
        for patch in vplan.patch:
            meta = _dict(_dict(claims.get(patch.name)).get("metadata"))
            if patch.name not in claims:
                found.append(f"claim {patch.name} patched but not observed")
            elif _dict(meta.get("labels")).get(api.JOBSET_NAME) != jobset.name:
                found.append(f"claim {patch.name} patched but not labelled for this JobSet")
        if _duplicates(vplan.deleted) or set(made) & set(vplan.deleted):
            found.append(f"claims deleted twice or created and deleted: {vplan.deleted}")

    if plan.status is not None:
        found += _status_violations(jobset, plan.status.to_dict())
    if plan.create_service is not None and _name(plan.create_service) != jobset.subdomain:
        found.append(f"Service {_name(plan.create_service)} is not named {jobset.subdomain}")
    if plan.delete_jobset and not jobset.finished:
        found.append("the JobSet is deleted before it finished")
    return found


# -------------------------------------------------------------------------------- scenarios


def _children_of(base: Obj, state: str) -> tuple[Obj, list[Obj], dict[str, Obj]]:
    """What an unmutated ``base`` got: its status recording its claims, the claims (Bound), and
    its Jobs in ``state``. As the reconciler does: the claims' uids (from the API server's
    responses) are recorded in the status, and the next pass mounts them."""
    jobset = parse(base)
    recorded, claims = applied(jobset, decide(jobset, [], None, NOW))
    second = decide(parse(recorded), [], None, NOW, claims=claim_views(claims.values()))
    assert (second.volume.mountable if second.volume else set()) == set(claims)
    jobs: list[Obj] = []
    for i, job in enumerate(second.create_jobs):
        job = copy.deepcopy(job)
        job["metadata"]["uid"] = f"job-uid-{i}"
        pods = int(job["spec"].get("parallelism") or 1)
        if state == "active":
            job["status"] = {"active": pods, "ready": pods}
        elif state in ("Complete", "Failed"):
            condition = {"type": state, "status": "True", "reason": "Fuzz", "message": "fuzz"}
            job["status"] = {"conditions": [condition], "succeeded" if state == "Complete"
                             else "failed": pods}  # fmt: skip
        jobs.append(job)
    return recorded, jobs, claims


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Obj, list[Obj], dict[str, Obj]]:
    """A mutated example, with or without the children its unmutated self made."""
    base = _identified(draw(st.sampled_from(BASES)))
    state = draw(st.sampled_from(["none", "new", "active", "Complete", "Failed"]))
    if state != "none":
        base, jobs, claims = _children_of(base, state)
    else:
        jobs, claims = [], {}
    mutated = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(mutated) if p and p[0] in ("spec", "status")]
        path = draw(st.sampled_from(paths))
        mutated = _set(mutated, path, draw(junk))
    return mutated, jobs, claims


def _outcome(obj: Obj, jobs: list[Any], claims: dict[str, Any]) -> None:
    try:
        jobset = parse(obj)
        plan = decide(jobset, job_views(jobs), None, NOW, claims=claim_views(claims.values()))
    except InvalidJobSet as err:
        assert str(err), "an InvalidJobSet must explain itself"
        return
    violations = plan_violations(jobset, jobs, claims, plan)
    assert not violations, "\n".join(violations)


# ------------------------------------------------------------------------------------ tests


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_mutated_specs_are_explained_or_planned_soundly(
    scenario: tuple[Obj, list[Obj], dict[str, Obj]],
) -> None:
    _outcome(*scenario)


@pytest.mark.parametrize("state", ["none", "new", "active", "Complete", "Failed"])
@pytest.mark.parametrize("base", BASES, ids=[p.name for p in SUPPORTED])
def test_every_example_is_planned_soundly_in_every_state(base: Obj, state: str) -> None:
    obj = _identified(base)
    if state == "none":
        _outcome(obj, [], {})
        return
    obj, jobs, claims = _children_of(obj, state)
    _outcome(obj, jobs, claims)
    # The claims it had, gone: Lost, none recreated, none mounted (the invariants say so).
    _outcome(obj, jobs, {})


# Uid prefixes of the claims (by desired order) in the stored record, "" for none; a claim's uid
# starts with the one drawn for it: the same (recorded), another (replaced), or junk.
PREFIXES = ("aaaaaaaa", "bbbbbbbb", "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(BASES),
    st.lists(junk, max_size=4),
    st.dictionaries(st.text(max_size=20), junk, max_size=3),
    st.lists(st.sampled_from(PREFIXES), max_size=3),
    st.lists(st.sampled_from(PREFIXES) | junk, max_size=3),
    st.booleans(),
)
def test_malformed_children_are_tolerated(
    base: Obj,
    jobs: list[Any],
    claims: dict[str, Any],
    recorded: list[str],
    uids: list[Any],
    accept: bool,
) -> None:
    obj = _identified(base)
    model = volumes.model(parse(obj))
    wanted = [c.name for c in model.desired]
    record = {d.slot: p for d, p in zip(model.desired, recorded, strict=False) if p}
    obj["status"] = {"volumes": {"claimUIDs": ClaimRecord(record).render()}}
    if accept:  # the user accepts the loss of every claim, with the first prefix
        value = ",".join(f"{name}@{PREFIXES[0]}" for name in wanted)
        obj["metadata"]["annotations"] = {REPLACE_LOST_ANNOTATION: value}
    # What the informer lets through is a dict with a metadata.name; everything else may be junk
    # (missing or wrongly typed labels, status, spec; foreign ownerReferences).
    shaped = [
        {
            "metadata": {"name": f"x-{i}", "labels": value, "ownerReferences": [{"uid": "other"}]},
            "spec": value,
            "status": value,
        }
        for i, value in enumerate(jobs)
    ]
    shaped += [
        {
            "metadata": {
                "name": f"y-{i}",
                "labels": {
                    "jobset.sigs.k8s.io/replicatedjob-name": "A",
                    "jobset.sigs.k8s.io/job-index": value,
                    "jobset.sigs.k8s.io/restart-attempt": value,
                },
            },
            "status": {"conditions": value, "ready": value, "active": value},
        }
        for i, value in enumerate(jobs)
    ]
    claim_map = {
        name: {
            "metadata": {
                "name": name,
                "labels": v,
                "uid": f"{u}-0000" if isinstance(u, str) else u,
            },
            "spec": v,
            "status": v,
        }
        for name, v, u in zip(wanted, claims.values(), uids + [None] * 3, strict=False)
    }
    _outcome(obj, shaped, claim_map)
