"""One reconcile must not block the event loop, whatever a tenant writes within admission's rules.

A JobSet may have 10,000 child Jobs and a pod template of tens of kilobytes (here 1,000
environment variables, 74 KB). Planning used to deep-copy the template once per child Job on every
reconcile, also when every Job existed: 2,000 such Jobs cost ~9 s of event-loop time per pass.

These tests do not time anything (the machine is shared; timing belongs to
``bench/bench_reconcile_cost.py``). Each proves, by counting, the property that keeps a path cheap:
no deep copy per Job, no Job built when it exists, no claim object built until asked for, the
claim bound checked before any claim is named, each container's mounts read once per parsed
JobSet, the per-Job claim work independent of the number of Jobs, and each pod volume's name read
a bounded number of times while mounting. Each assertion failed on the code before the commits
that made the path cheap (dd10418, 88c14ae).
"""

from __future__ import annotations

import collections
import copy
import datetime
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.jobset import api, construct, volumes
from controller.jobset import quantity as quantitymod
from controller.jobset.children import views as job_views
from controller.jobset.decide import decide
from controller.jobset.model import InvalidJobSet, JobSet
from controller.jobset.volumes import desired as desiredmod
from controller.jobset.volumes import desired as volume_desired
from controller.jobset.volumes import spec as volume_spec
from controller.jobset.volumes.desired import claims_for_job
from controller.jobset.volumes.model import MAX_CLAIMS
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.spec import claim_count
from tests.unit.jobset_factories import make_jobset, rjob

NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
REPLICAS = 2000


def _big_pod(**extra: Any) -> dict[str, Any]:
    env = [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(1000)]
    return {"containers": [{"name": "main", "image": "busybox", "env": env, **extra}]}


# ----------------------------------------------------------------------------- counting seams


class Calls:
    """Wraps a function and counts its calls (the wrapped function still runs)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.count = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.fn(*args, **kwargs)


class DeepCopies:
    """Counts ``copy.deepcopy`` calls made from outside the copy module.

    ``copy`` recurses through its module-global ``deepcopy`` with a memo dict, so a call without a
    memo is a caller's copy of a whole object; the recursion passes through uncounted.
    """

    def __init__(self) -> None:
        self.count = 0
        self._real = copy.deepcopy

    def __call__(self, x: Any, memo: dict[int, Any] | None = None, _nil: Any = None) -> Any:
        if memo is None:
            self.count += 1
        return self._real(x, memo)


def spy_on_claim_names(patch: pytest.MonkeyPatch) -> Calls:
    """Counts the claim names made: the volume package makes them all in ``desired``."""
    named = Calls(desiredmod.claim_name)
    patch.setattr(desiredmod, "claim_name", named)
    return named


@pytest.fixture
def deepcopies(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepCopies]:
    spy = DeepCopies()
    monkeypatch.setattr(copy, "deepcopy", spy)
    yield spy


class Reads(dict[str, Any]):
    """A dict that counts, under ``tag``, the reads of one of its keys."""

    def __init__(self, data: dict[str, Any], key: str, tally: collections.Counter[str], tag: str):
        super().__init__(data)
        self._key, self._tally, self._tag = key, tally, tag

    def _count(self, key: object) -> None:
        if key == self._key:
            self._tally[self._tag] += 1

    def get(self, key: str, default: Any = None) -> Any:
        self._count(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._count(key)
        return super().__getitem__(key)


def _pod_of(template: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = template["spec"]["template"]["spec"]
    return pod


def _count_mount_reads(js: JobSet) -> collections.Counter[str]:
    """Make every container of ``js`` count reads of its ``volumeMounts``, per replicated job.

    Must run before anything asked a replicated job for its mount names (they are cached on the
    parsed JobSet, which is the point).
    """
    tally: collections.Counter[str] = collections.Counter()
    for r in js.replicated_jobs:
        pod = _pod_of(r.template)
        pod["containers"] = [Reads(c, "volumeMounts", tally, r.name) for c in pod["containers"]]
    return tally


# ----------------------------------------------------------------------------- large templates


def _decide_deepcopies(replicas: int, deepcopies: DeepCopies) -> tuple[JobSet, Any, int]:
    js = make_jobset(replicated_jobs=[rjob("workers", replicas, pod_spec=_big_pod())])
    before = deepcopies.count
    plan = decide(js, [], None, NOW)
    return js, plan, deepcopies.count - before


def test_creating_many_jobs_from_a_large_template(deepcopies: DeepCopies) -> None:
    """Deep-copying the template for each Job cost 4-5 s per 1,000 Jobs of this template. Now
    nothing is deep-copied per Job: the count does not grow from 1 Job to 2,000, and every Job
    shares the template's containers instead of holding a copy."""
    _, _, copies_for_one = _decide_deepcopies(1, deepcopies)
    js, plan, copies = _decide_deepcopies(REPLICAS, deepcopies)
    assert copies == copies_for_one
    assert len(plan.create_jobs) == REPLICAS
    template_pod = _pod_of(js.replicated_jobs[0].template)
    assert all(_pod_of(j)["containers"] is template_pod["containers"] for j in plan.create_jobs)
    first, second = plan.create_jobs[0], plan.create_jobs[1]
    pod = first["spec"]["template"]
    assert pod["metadata"]["labels"][api.JOB_INDEX] == "0"
    assert second["spec"]["template"]["metadata"]["labels"][api.JOB_INDEX] == "1"
    assert pod["spec"]["subdomain"] == js.subdomain
    assert pod["spec"]["containers"] == _big_pod()["containers"]
    # The template itself is untouched: no Job's labels leaked into it.
    template_pod = js.replicated_jobs[0].template["spec"]["template"]
    assert api.JOB_INDEX not in (template_pod.get("metadata") or {}).get("labels", {})
    assert "subdomain" not in template_pod["spec"]


def test_steady_state_builds_no_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """When every Job exists, decide builds none (it built all 2,000 and then dropped them)."""
    js = make_jobset(replicated_jobs=[rjob("workers", REPLICAS, pod_spec=_big_pod())])
    existing = decide(js, [], None, NOW).create_jobs
    built = Calls(construct.desired_job)
    monkeypatch.setattr(construct, "desired_job", built)
    plan = decide(js, job_views(existing), None, NOW)
    assert plan.create_jobs == []
    assert built.count == 0
    # The spy sees what is built: one Job missing, one Job built, the missing one.
    plan = decide(js, job_views(existing[:7] + existing[8:]), None, NOW)
    assert built.count == 1
    assert [j["metadata"]["name"] for j in plan.create_jobs] == [existing[7]["metadata"]["name"]]


def test_mounting_claims_into_many_jobs_from_a_large_template(deepcopies: DeepCopies) -> None:
    """mount deep-copied each Job again (17-19 s for 2,000 Jobs of this template); now it copies
    only the dicts on the path to the pod's volumes."""
    mounts = [{"name": "data", "mountPath": "/data"}]
    js = make_jobset(
        replicated_jobs=[rjob("workers", REPLICAS, pod_spec=_big_pod(volumeMounts=mounts))],
        spec={
            "volumeClaimPolicies": [
                {
                    "templates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ]
                }
            ]
        },
    )
    policies = volume_spec.policies(js)
    rj = js.replicated_jobs[0]
    before = deepcopies.count
    built = [construct.desired_job(js, rj, i) for i in range(REPLICAS)]
    jobs = [volume_desired.mount(job, js, policies, rj.name, i) for i, job in enumerate(built)]
    assert deepcopies.count == before
    template_pod = _pod_of(rj.template)
    assert all(_pod_of(j)["containers"] is template_pod["containers"] for j in jobs)
    pod_volumes = jobs[7]["spec"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in pod_volumes] == ["data"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod_volumes] == [f"data-{js.name}"]
    assert "volumes" not in rj.template["spec"]["template"]["spec"]
    assert "volumes" not in _pod_of(built[7])  # the Job mount was given is not changed either


# ----------------------------------------------------------------------------- many claims


def _job_scope(replicas: int, templates: int, **claim_spec: Any) -> JobSet:
    names = [f"d{i}" for i in range(templates)]
    mounts = [{"name": n, "mountPath": f"/{n}"} for n in names]
    pod = {"containers": [{"name": "main", "image": "busybox", "volumeMounts": mounts}]}
    return make_jobset(
        replicated_jobs=[rjob("workers", replicas, pod_spec=pod)],
        spec={
            "volumeClaimPolicies": [
                {
                    "scope": "Job",
                    "templates": [
                        {
                            "metadata": {"name": n},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                                **claim_spec,
                            },
                        }
                        for n in names
                    ],
                }
            ]
        },
    )


def test_claims_per_jobset_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """16 Job-scope templates on 10,000 Jobs (160,000 claims; admission allows both numbers) took
    over a minute per reconcile. The parser refuses more claims than child Jobs allowed, and
    counts them before naming (and validating) a single claim."""
    largest = _job_scope(api.MAX_CHILD_JOBS, 1)
    assert claim_count(largest, volume_spec.policies(largest)) == MAX_CLAIMS
    too_many = _job_scope(api.MAX_CHILD_JOBS, 16)
    named = spy_on_claim_names(monkeypatch)
    with pytest.raises(InvalidJobSet, match="160000 claims; at most 10000"):
        volume_spec.policies(too_many)
    assert named.count == 0
    volume_spec.policies(_job_scope(3, 2))  # the spy sees the naming of claims that are allowed
    assert named.count == 6
    with pytest.raises(InvalidJobSet, match="claims"):
        decide(_job_scope(5001, 2), [], None, NOW)


def test_desired_claims_build_objects_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, deepcopies: DeepCopies
) -> None:
    """Each desired claim deep-copied its spec (2 s for these 10,000, and a reconcile lists them
    five times); now a claim's metadata and object are built when first asked for, once."""
    expressions = [{"key": f"k{i}", "operator": "In", "values": ["a", "b"]} for i in range(10)]
    js = _job_scope(1000, 10, selector={"matchExpressions": expressions})
    model = volumes.model(js)
    metadata = Calls(desiredmod._claim_metadata)
    monkeypatch.setattr(desiredmod, "_claim_metadata", metadata)
    before = deepcopies.count
    desired = model.desired
    assert len(desired) == 10_000
    assert (metadata.count, deepcopies.count - before) == (0, 0)
    claim = desired[3]
    assert claim.object["metadata"]["name"] == claim.name
    assert claim.object["spec"]["selector"]["matchExpressions"] == expressions
    assert claim.object is claim.object
    assert metadata.count == 1  # for this claim only, and once
    assert deepcopies.count - before == 2  # its metadata and spec, so the object is its own
    assert claim.object["spec"] is not claim.template.spec


# ----------------------------------------------------------------------------- many policies


def _many_policies(replicas: int, replicated_jobs: int = 32) -> JobSet:
    """50 JobSet-scope policies of 16 templates, ``replicated_jobs`` replicated jobs whose pods
    have 16 containers of 64 volumeMounts, each container mounting a different share of the 800
    templates: every number at admission's bound before it became 50 x 50 templates and 100
    replicated jobs (800 templates stays above what the API server's run-time CEL budget admits,
    about 700; ``replicated_jobs=100`` is today's bound)."""
    names = [f"t{p}-{i}" for p in range(50) for i in range(16)]

    def pod(r: int) -> dict[str, Any]:
        containers = []
        for c in range(16):
            mounts = [
                {"name": names[(r * 1024 + c * 64 + m) % len(names)], "mountPath": f"/{c}/{m}"}
                for m in range(64)
            ]
            containers.append({"name": f"c{c}", "image": "busybox", "volumeMounts": mounts})
        return {"containers": containers}

    policies = [
        {
            "templates": [
                {
                    "metadata": {"name": f"t{p}-{i}"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
                for i in range(16)
            ]
        }
        for p in range(50)
    ]
    return make_jobset(
        replicated_jobs=[rjob(f"r{r}", replicas, pod_spec=pod(r)) for r in range(replicated_jobs)],
        spec={"volumeClaimPolicies": policies},
    )


def test_many_policies_and_mounts_validate_with_one_read_of_each_container() -> None:
    """Each template's users were found by re-reading every container's mounts, for each
    (template, replicated job) pair: 11.6 s. The mount rules (template-mounted, untargeted-mount,
    template-volume-name-free) now run in the parse, by their predicates; reading the policies
    reads no container, and the claims read each container's mounts once."""
    js = _many_policies(1)
    reads = _count_mount_reads(js)
    policies = volume_spec.policies(js)
    assert len(policies) == 50
    assert not reads
    volumes.model(js).job_claims.for_job("r0", 0)
    assert set(reads.values()) <= {16}  # 16 containers each, read once at most
    volumes.model(js).job_claims.for_job("r1", 0)
    assert set(reads.values()) <= {16}  # and not again


def _planning_work(replicas: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, Any]:
    """(claim names made, container mounts read, plan) for one decide of ``_many_policies``."""
    js = _many_policies(replicas)
    reads = _count_mount_reads(js)
    model = volumes.model(js)  # parsed before: decide reads only what the model lacks
    with monkeypatch.context() as patch:
        named = spy_on_claim_names(patch)
        before = reads.total()
        plan = decide(js, [], None, NOW, model=model)
    return named.count, reads.total() - before, plan


def test_planning_jobs_whose_shared_claims_are_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each child Job worked out its 800 shared claims and every policy's targets anew: 3,200
    Jobs took ~9 s per reconcile while the claims were being provisioned. Now that work is done
    once per replicated job: it is the same for 32 Jobs as for 96."""
    few = _planning_work(1, monkeypatch)
    many = _planning_work(3, monkeypatch)
    for plan in (few[2], many[2]):
        assert plan.create_jobs == []  # they wait for their claims
        assert plan.volume is not None
        assert len(plan.volume.create) == 800
    assert many[:2] == few[:2]
    assert few[0] > 0  # the spy sees the claims being named


def test_mounting_hundreds_of_claims_is_linear() -> None:
    """The pod's volumes were searched once per claim: quadratic in the claims a pod mounts
    (100 pods of 800 claims took 74 s). Mounting 800 claims into a pod that has n other volumes
    reads each of their names a bounded number of times, not once per claim."""
    js = _many_policies(1)
    policies = volume_spec.policies(js)
    rj = js.replicated_jobs[0]
    wanted = claims_for_job(js, policies, rj.name, 0)
    assert len(wanted) == 800
    job = construct.desired_job(js, rj, 0)
    mounted = volume_desired.mount(job, js, policies, rj.name, 0)
    assert [v["name"] for v in _pod_of(mounted)["volumes"]] == list(wanted)
    assert volume_desired.mount(mounted, js, policies, rj.name, 0) == mounted

    def name_reads(n: int) -> int:
        """Reads of the names of the pod's n own volumes while the 800 claims are mounted."""
        tally: collections.Counter[str] = collections.Counter()
        own = [
            Reads({"name": f"scratch-{i}", "emptyDir": {}}, "name", tally, "own") for i in range(n)
        ]
        with_own = copy.deepcopy(job)
        _pod_of(with_own)["volumes"] = own
        again = volume_desired.mount(with_own, js, policies, rj.name, 0)
        got = [v["name"] for v in _pod_of(again)["volumes"]]
        assert got == [f"scratch-{i}" for i in range(n)] + list(wanted)
        return tally["own"]

    reads = {n: name_reads(n) for n in (100, 200, 400)}
    assert all(0 < count <= 2 * n for n, count in reads.items()), reads


def test_a_storage_quantity_is_parsed_once_per_text() -> None:
    """Every pass reads the storage of every claim it sees (``observed.views``) and of every
    template: the same few texts. Each is parsed once (counted: the parser's misses), then
    remembered; what is read stays exact."""
    quantitymod._parse_text.cache_clear()
    claims = [
        {
            "metadata": {"name": f"data-{i}", "uid": f"u{i}"},
            "spec": {"resources": {"requests": {"storage": "1Gi" if i % 2 else "500Mi"}}},
        }
        for i in range(200)
    ]
    for _ in range(5):
        found = claim_views(claims)
    assert quantitymod._parse_text.cache_info().misses == 2
    assert found["data-1"].storage == 2**30
    assert found["data-0"].storage == 500 * 2**20
