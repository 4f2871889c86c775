"""What a JobSet's claims allow its Jobs (pure): to be created, resumed, resized, or to keep
running. One rule behind all four: a Job's pods start only when every claim they use is
mountable (the JobSet's own, alive, its uid in the stored status; lifecycle.py).

- ``may_run``: a Job not created yet is created, and a running one resized (ElasticJobSet),
  only then. Pod scope: the claims of all its completion indexes, although its template mounts
  one placeholder.
- ``withhold_resume``: a suspended Job is resumed only then too. A Job created suspended before
  its claim was lost would otherwise get a pod that waits for *any* claim of that name, and
  mounts whatever claim appears there (a copy from YAML, someone else's).
- ``must_suspend``: a running Job that mounts a Lost claim is suspended. A claim is lost only
  once no pod uses it (Kubernetes keeps a claim in use until its pods stop), so these Jobs have
  no pod holding the data; a pod they start (a retry) would mount whatever appears there.
- ``gate_pod_scope``: while the Pod-scope admission policy cannot work, nothing is created for
  the JobSet: no claim and, nothing being mountable, no Job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from controller.jobset import children, suspend
from controller.jobset.children import ChildJob
from controller.jobset.construct import DesiredJob
from controller.jobset.model import JobSet
from controller.jobset.volumes import podscope
from controller.jobset.volumes.admission import Blocked
from controller.jobset.volumes.desired import mount
from controller.jobset.volumes.lifecycle import ClaimState, VolumePlan
from controller.jobset.volumes.spec import VolumeModel
from controller.runtime.store import Obj


def claims_of(rjob: str | None, index: int | None, model: VolumeModel) -> list[str] | None:
    """Every claim the pods of Job ``index`` of ``rjob`` use (``JobClaims.needed``); None when
    the JobSet has no volume policies (or the Job is not placed: its labels are missing)."""
    if not model.policies or rjob is None or index is None:
        return None
    return model.job_claims.needed(rjob, index)


def claims_mounted(job: ChildJob) -> set[str]:
    """The claims an existing Job's pods use, read from its pod template: a Pod-scope
    placeholder stands for the claim of each of the Job's completion indexes (as the admission
    policy resolves it for each pod)."""
    spec = job.raw.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    names = {
        str(v["persistentVolumeClaim"].get("claimName"))
        for v in pod_spec.get("volumes") or []
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)
    }
    completions = job.completions
    pods = completions if completions is not None and completions > 0 else 1
    for name in [n for n in names if podscope.is_placeholder(n)]:
        names.update(podscope.resolved_claim_name(name, i) for i in range(pods))
    return names


def may_run(rjob: str | None, index: int | None, model: VolumeModel, mountable: set[str]) -> bool:
    """Whether every claim the pods of Job ``index`` of ``rjob`` use is mountable (or they use
    none)."""
    needed = claims_of(rjob, index, model)
    return needed is None or all(map(mountable.__contains__, needed))


def job_may_run(job: ChildJob, model: VolumeModel, mountable: set[str]) -> bool:
    """``may_run`` for an existing Job."""
    return may_run(job.replicated_job, job.job_index, model, mountable)


def with_claims(job: DesiredJob, jobset: JobSet, model: VolumeModel) -> Obj:
    """A desired Job's object with its claims mounted; as it is when the JobSet has no volume
    policies."""
    if not model.policies:
        return job.object
    rjob, index = job.replicated_job, job.index
    return mount(
        job.object, jobset, model.policies, rjob, index, model.job_claims.for_job(rjob, index)
    )


def must_suspend(
    jobset: JobSet, jobs: Sequence[ChildJob], model: VolumeModel, vplan: VolumePlan
) -> list[tuple[str, Obj]]:
    """The patches that suspend the running Jobs which mount a Lost claim."""
    if not model.policies or jobset.suspend:
        return []
    lost = {c.name for c in vplan.claims if c.state is ClaimState.LOST}
    if not lost:
        return []
    patches = []
    for job in children.current_jobs(jobset, jobs):
        if job.is_finished or job.deleting or job.suspended:
            continue
        needed = claims_of(job.replicated_job, job.job_index, model)
        if needed is not None and lost.intersection(needed):
            patches.append((job.name, {"spec": {"suspend": True}}))
    return patches


def withhold_resume(
    decision: suspend.SuspendDecision,
    jobs: Sequence[ChildJob],
    model: VolumeModel,
    mountable: set[str],
    blocked: bool = False,
) -> suspend.SuspendDecision:
    """``decision`` without the resumes of Jobs whose claims are not all mountable; ``blocked``:
    no Job is resumed (the Pod-scope admission policy is missing)."""
    if not model.policies:
        return decision
    by_name = {job.name: job for job in jobs}

    def waits(name: str, patch: Obj) -> bool:
        if patch.get("spec", {}).get("suspend") is not False or name not in by_name:
            return False
        return blocked or not job_may_run(by_name[name], model, mountable)

    withheld = {name for name, patch in decision.patches if waits(name, patch)}
    if not withheld:
        return decision
    return suspend.SuspendDecision(
        tuple((n, p) for n, p in decision.patches if n not in withheld),
        tuple(n for n in decision.clear_start_time if n not in withheld),
        None,  # not resumed yet: VolumesReady says why
    )


def gate_pod_scope(vplan: VolumePlan, blocked: Blocked | None) -> VolumePlan:
    """While the Pod-scope admission policy cannot work (``blocked`` says why), no claim is
    created and nothing is mountable; the claims it would have created stay missing. Deletions
    by retention go on: they never wait for it."""
    if blocked is None:
        return vplan
    held = not_created(vplan, {c.name for c in vplan.create})
    return replace(held, create=[], mountable=set())


def not_created(vplan: VolumePlan, names: Iterable[str]) -> VolumePlan:
    """The plan counted the claims it creates as Pending; these were not created: missing."""
    missing, skipped = ClaimState.MISSING, set(names)
    claims = [replace(c, state=missing) if c.name in skipped else c for c in vplan.claims]
    return replace(vplan, claims=claims)
