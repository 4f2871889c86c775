"""Elastic JobSets (upstream's alpha gate ElasticJobSet): resizing running Jobs in place (pure).

With the gate, the CRD lets an Indexed replicated job's ``parallelism`` and ``completions``
change while the JobSet runs (equal, at least 1). Kubernetes lets an Indexed Job change both in
place when they stay equal (elastic Indexed Jobs), so the current attempt's unfinished Jobs are
patched to the template's values; Jobs created later are built from the template anyway.

Only a Job whose sizes differ from the template is patched (the write comes from a diff): at
steady state nothing is written. A Job whose pods would use Pod-scope claims that are not
mountable yet waits, as a Job not created yet does: the claims of its new completion indexes
are made first, and its pods start only once they are recorded.

Without the gate in the controller (an alpha CRD with a controller started without it), the
Jobs are left as they are and the ``ElasticScaling`` condition says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from controller.jobset.children import ChildJob
from controller.jobset.model import JobSet, ReplicatedJob
from controller.runtime.store import Obj

# Condition (ours): True while a resize in the spec is not applied to the running Jobs because
# the controller runs without the ElasticJobSet gate; False once the Jobs match again.
CONDITION = "ElasticScalingDisabled"
REASON_GATE_OFF = "ElasticJobSetGateOff"
REASON_IN_SYNC = "JobSizesMatchSpec"
MESSAGE_IN_SYNC = "the running Jobs have the parallelism and completions of the spec"


@dataclass(frozen=True)
class Sizes:
    parallelism: int
    completions: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def wanted_sizes(rjob: ReplicatedJob) -> Sizes | None:
    """The sizes the Jobs of ``rjob`` should have, when they can be resized in place: an Indexed
    template with parallelism and completions set and equal (upstream resizes only then)."""
    spec = rjob.template.get("spec") or {}
    if spec.get("completionMode") != "Indexed":
        return None
    parallelism, completions = _int(spec.get("parallelism")), _int(spec.get("completions"))
    if parallelism is None or parallelism != completions or parallelism < 1:
        return None
    return Sizes(parallelism, completions)


def job_sizes(job: ChildJob) -> Sizes | None:
    if job.parallelism is None or job.completions is None:
        return None
    return Sizes(job.parallelism, job.completions)


def out_of_size(jobset: JobSet, jobs: Iterable[ChildJob]) -> list[tuple[ChildJob, Sizes]]:
    """The unfinished Jobs (of ``jobs``, the current attempt's) whose sizes differ from their
    replicated job's resizable template, with the sizes wanted."""
    found = []
    for job in jobs:
        if job.is_finished or job.deleting:
            continue
        rjob = jobset.replicated_job(job.replicated_job or "")
        wanted = wanted_sizes(rjob) if rjob is not None else None
        have = job_sizes(job)
        # A Job without readable sizes is not one the API server made (it defaults both for
        # an Indexed Job): nothing to compare, nothing to patch.
        if wanted is not None and have is not None and have != wanted:
            found.append((job, wanted))
    return found


def patch(wanted: Sizes) -> Obj:
    """Both fields in one patch: Kubernetes checks completions == parallelism on the result."""
    return {"spec": {"parallelism": wanted.parallelism, "completions": wanted.completions}}


def resize_patches(
    jobset: JobSet, jobs: Iterable[ChildJob], ready: Callable[[ChildJob], bool]
) -> list[tuple[str, Obj]]:
    """(Job name, patch) for every Job to resize now; ``ready(job)``: the claims its pods use at
    the new size are mountable (always true without volume policies)."""
    return [(job.name, patch(wanted)) for job, wanted in out_of_size(jobset, jobs) if ready(job)]


def gate_off_message(pending: Sequence[tuple[ChildJob, Sizes]]) -> str:
    """The condition's message: which replicated jobs wait, and what would apply the change."""
    names = sorted({job.replicated_job or "" for job, _ in pending})
    return (
        f"parallelism/completions of replicated job(s) {', '.join(names)} changed, but this "
        "controller runs without the ElasticJobSet feature gate: the running Jobs keep their "
        "sizes (Jobs created from now on get the new ones); start it with "
        "--feature-gates=ElasticJobSet=true to resize them in place"
    )


def pods_in_use(jobs: Iterable[ChildJob]) -> dict[str, int]:
    """The largest ``completions`` of each replicated job's Jobs (every Job that still exists,
    whatever its state or attempt: its pods may still run). A Pod-scope claim of a completion
    index below it is not scaled away: resized down, the Job's pods above the new size stop
    first, then ``whenScaled`` applies to their claims."""
    found: dict[str, int] = {}
    for job in jobs:
        rjob, completions = job.replicated_job, job.completions
        if rjob is not None:
            found[rjob] = max(found.get(rjob, 0), 1 if completions is None else completions)
    return found
