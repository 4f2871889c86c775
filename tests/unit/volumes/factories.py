"""Factories for the volume tables: JobSets with claim policies, observed claims, stored records.

    js = make([{"templates": [tpl("data")]}])            # workers (2) mount "data"
    found = [claim("data-js", phase="Pending")]           # ours, with a uid of its own
    js = recorded(js, found)                              # ... and remembered in the status
    states = volumes.lifecycle(volumes.model(js), views(found), StorageClasses())

Claims are plain dicts, as the informer holds them; ``views`` makes the ``ClaimView``s the package
works on. Every claim has a ``metadata.uid`` (``uid_of(name)`` unless given): the record in the
JobSet's status (``status.volumes.claimUIDs``) is kept by uid prefix.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from typing import Any

from controller.jobset import api, volumes
from controller.jobset.decide import Plan
from controller.jobset.model import JobSet, owner_reference, parse
from controller.jobset.volumes import ClaimView
from controller.jobset.volumes.desired import DesiredClaim, Slot
from controller.jobset.volumes.model import (
    CLAIM_POD_INDEX_LABEL,
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    REPLACE_LOST_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
)
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.record import ClaimRecord, uid_prefix
from controller.runtime.store import Obj
from tests.unit.jobset_factories import make_jobset_obj, rjob

# What Retain writes on a claim it keeps: the uid of the JobSet it was retained from.
RETAINED: Obj = {RETAINED_FROM_ANNOTATION: "uid-old"}


def mounting(
    name: str,
    replicas: int = 1,
    mounts: tuple[str, ...] = (),
    *,
    init_mounts: tuple[str, ...] = (),
    volumes_: tuple[str, ...] = (),
) -> Obj:
    """A replicated job whose container mounts ``mounts`` (and initContainer ``init_mounts``)."""
    pod: Obj = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in mounts],
            }
        ]
    }
    if init_mounts:
        pod["initContainers"] = [
            {
                "name": "init",
                "image": "busybox",
                "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in init_mounts],
            }
        ]
    if volumes_:
        pod["volumes"] = [{"name": v, "emptyDir": {}} for v in volumes_]
    return rjob(name, replicas, pod_spec=pod)


def tpl(name: str, storage: str = "1Gi", **spec: Any) -> Obj:
    body: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}
    body.update(spec)
    return {"metadata": {"name": name}, "spec": body}


def make_obj(
    vcp: list[Obj] | None = None,
    vp: Obj | None = None,
    rjobs: list[Obj] | None = None,
    *,
    annotations: dict[str, str] | None = None,
    **kw: Any,
) -> Obj:
    spec: Obj = {}
    if vcp is not None:
        spec["volumeClaimPolicies"] = vcp
    if vp is not None:
        spec["volumePolicy"] = vp
    obj = make_jobset_obj(
        replicated_jobs=rjobs if rjobs is not None else [mounting("workers", 2, ("data",))],
        spec=spec,
        **kw,
    )
    if annotations:
        obj["metadata"]["annotations"] = dict(annotations)
    return obj


def make(
    vcp: list[Obj] | None = None,
    vp: Obj | None = None,
    rjobs: list[Obj] | None = None,
    *,
    annotations: dict[str, str] | None = None,
    **kw: Any,
) -> JobSet:
    """A JobSet named ``js`` (uid ``uid-js``) with these policies; ``make_jobset_obj`` keywords."""
    return parse(make_obj(vcp, vp, rjobs, annotations=annotations, **kw))


def accepting(*keys: str) -> dict[str, str]:
    """The JobSet annotations that accept an empty replacement of these Lost claims."""
    return {REPLACE_LOST_ANNOTATION: ",".join(keys)}


def uid_of(name: str, generation: int = 0) -> str:
    """A claim object's uid: the same for the same name and generation, another for another."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{generation}"))


def prefix_of(name: str, generation: int = 0) -> str:
    return uid_prefix(uid_of(name, generation))


CLAIM_VERSION = "42"  # every observed claim's resourceVersion


def claim(
    name: str,
    *,
    uid: str | None = None,
    jobset: str | None = "js",
    owner_uid: str | None = "uid-js",
    template: str = "data",
    scope: str = "JobSet",
    rjob_name: str | None = None,
    index: int | None = None,
    pod_index: int | None = None,
    spec: Obj | None = None,
    phase: str | None = "Bound",
    refs: list[Obj] | None = None,
    annotations: Obj | None = None,
    deleting: bool = False,
) -> Obj:
    """An observed claim (as the informer holds it). ``uid`` is the object's (``uid_of(name)``
    unless given); ``owner_uid`` the JobSet uid in our owner annotation (None: not ours)."""
    labels: Obj = {CLAIM_TEMPLATE_LABEL: template, CLAIM_SCOPE_LABEL: scope}
    if jobset is not None:
        labels[api.JOBSET_NAME] = jobset
    if rjob_name is not None:
        labels[api.REPLICATED_JOB_NAME] = rjob_name
    if index is not None:
        labels[api.JOB_INDEX] = str(index)
    if pod_index is not None:
        labels[CLAIM_POD_INDEX_LABEL] = str(pod_index)
    notes: Obj = dict(annotations or {})
    if owner_uid is not None:
        notes[OWNER_UID_ANNOTATION] = owner_uid
    meta: Obj = {
        "name": name,
        "namespace": "default",
        "uid": uid if uid is not None else uid_of(name),
        "resourceVersion": CLAIM_VERSION,
        "labels": labels,
        "annotations": notes,
    }
    if refs is not None:
        meta["ownerReferences"] = refs
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec
        if spec is not None
        else {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def ckpt(index: int, **kw: Any) -> Obj:
    """The Job-scope claim of template ``ckpt`` for Job ``workers-<index>`` of JobSet js."""
    kw.setdefault("template", "ckpt")
    return claim(f"ckpt-js-workers-{index}", scope="Job", rjob_name="workers", index=index, **kw)


def pod_ckpt(index: int, pod: int, **kw: Any) -> Obj:
    """The Pod-scope claim of template ``ckpt`` for pod ``pod`` of Job ``workers-<index>``."""
    kw.setdefault("template", "ckpt")
    return claim(
        f"ckpt-js-workers-{index}-{pod}",
        scope="Pod",
        rjob_name="workers",
        index=index,
        pod_index=pod,
        **kw,
    )


def created(desired: DesiredClaim, phase: str | None = "Bound", generation: int = 0) -> Obj:
    """The desired claim as the API server returns it once created: with a uid (and a phase)."""
    obj = copy.deepcopy(desired.object)
    obj["metadata"]["uid"] = uid_of(desired.name, generation)
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def applied(jobset: JobSet, plan: Plan, phase: str | None = "Bound") -> tuple[Obj, dict[str, Obj]]:
    """``plan``'s claims created, as the reconciler applies them: each gets a uid (and ``phase``),
    recorded in the status the pass writes. Returns the JobSet as stored after the pass (its
    status the plan's, or the old one) and the claims by name, for the next pass to see."""
    made = list(plan.volume.create) if plan.volume else []
    claims = {d.name: created(d, phase) for d in made}
    status = plan.status if plan.status is not None else jobset.status
    if plan.volume is not None:
        uids = {name: claim["metadata"]["uid"] for name, claim in claims.items()}
        status = status.with_claim_uids(plan.volume.claim_uids_with(uids))
    return {**jobset.raw, "status": status.to_dict()}, claims


def owner(uid: str = "uid-js", name: str = "js") -> Obj:
    return owner_reference(name, uid)


def views(claims: Iterable[Obj]) -> dict[str, ClaimView]:
    return claim_views(claims)


def slot_of(obj: Obj) -> Slot:
    """The record slot of one of our claims, read from the labels ``claim`` gives it."""
    labels = obj["metadata"]["labels"]
    scope = labels[CLAIM_SCOPE_LABEL]
    if scope == "JobSet":
        return (labels[CLAIM_TEMPLATE_LABEL], None, None, None)
    pod = int(labels[CLAIM_POD_INDEX_LABEL]) if scope == "Pod" else None
    return (
        labels[CLAIM_TEMPLATE_LABEL],
        labels[api.REPLICATED_JOB_NAME],
        int(labels[api.JOB_INDEX]),
        pod,
    )


def record_of(claims: Iterable[Obj]) -> list[Obj]:
    """``status.volumes.claimUIDs`` remembering these claims (by their labels' slot)."""
    found = {slot_of(c): uid_prefix(c["metadata"]["uid"]) for c in claims}
    return ClaimRecord(found).render()


def recorded(js: JobSet, claims: Iterable[Obj]) -> JobSet:
    """``js`` whose stored status remembers ``claims`` (as an earlier pass would have written)."""
    raw = copy.deepcopy(js.raw)
    status = raw.setdefault("status", {})
    status["volumes"] = {**status.get("volumes", {}), "claimUIDs": record_of(claims)}
    return parse(raw)


def only(js: JobSet) -> DesiredClaim:
    (desired,) = volumes.model(js).desired
    return desired


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
