"""What a JobSet write costs the API server: this controller's CRD and policy against upstream's.

Every create and every status update of a JobSet runs the CRD's schema validation and all its CEL
rules (``x-kubernetes-validations``) in kube-apiserver: the status subresource validates the whole
object, and ratcheting only turns errors on unchanged fields into warnings, it does not skip
rules. Upstream JobSet validates in its webhook instead (not registered here: admission in the API
server only), so its CRD has 8 rules (the CRD of its release, from the Go module proxy:
``localcluster/upstream.py``, which builds its manager too, once). This controller's CRD has 30
(per-field rules on list items and map values); the 39 cross-field and immutability rules are a
ValidatingAdmissionPolicy bound to ``jobsets`` (``manifests/crd/policy.yaml``), which runs on
creates and spec changes, never on a status update. ``--crd FILE`` measures another CRD as ours
instead (e.g. one with every rule, as before the policy:
``git show 1fdc96c:manifests/crd/jobsets.jobset.x-k8s.io.yaml``).

For each, on a fresh ``apiserver``-profile control plane with no controller: N JobSets
created (8 clients at once), then each one's status replaced once; kube-apiserver's CPU seconds
(``/proc``), its ``apiserver_cel_evaluation_duration_seconds`` (the CRD's rules) and
``apiserver_admission_controller_admission_duration_seconds`` of the ValidatingAdmissionPolicy
plugin (the policy) over each phase, per write.
The CRDs alternate from one repetition to the next. Workload: the side-by-side benchmark's
JobSets (``tests/support/compare.py``), variant ``a`` (no volumes) and ``b`` (one claim template).

``--per-rule``: our CRD with every rule removed but one, once per rule (N writes one at a time),
CEL evaluation milliseconds per create and per status update: which rules cost the most.

    .venv/bin/python bench/bench_validation_cost.py [--n 500] [--repeat 2] [--variants a b]
    .venv/bin/python bench/bench_validation_cost.py --per-rule [--n 200]
Results: bench/results/validation-cost.json (``--per-rule``: validation-cost-per-rule.json).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_compare import proc_cpu_seconds  # noqa: E402
from bench_scale import apiserver_metrics, describe_machine  # noqa: E402
from kubernetes_asyncio import config  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from controller.jobset import api  # noqa: E402
from controller.runtime.client import NAMESPACES, KubeClient  # noqa: E402
from localcluster import jobsetapi, upstream  # noqa: E402
from localcluster.build import BuildError  # noqa: E402
from localcluster.cluster import LocalCluster  # noqa: E402
from tests.support.compare import compare_jobset  # noqa: E402

Obj = dict[str, Any]
NAMESPACE = "cost"
RULES = "x-kubernetes-validations"
# The status each JobSet gets: what a controller writes when it completes.
COMPLETED_STATUS: Obj = {
    "conditions": [
        {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }
    ],
    "terminalState": "Completed",
    "replicatedJobsStatus": [
        {"name": name, "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}
        for name in ("leader", "workers")
    ],
}


@dataclass(frozen=True)
class Cost:
    """Per write, in milliseconds: API server CPU, the CRD's CEL evaluation and the admission
    policy's check (wall time, summed over concurrent requests)."""

    cpu_create: float
    cpu_status: float
    cel_create: float
    cel_status: float
    policy_create: float = 0.0
    policy_status: float = 0.0


CEL_SECONDS = "apiserver_cel_evaluation_duration_seconds"
# The admission plugin's time per request (the policy's own check metric counts errors only).
ADMISSION_SECONDS = "apiserver_admission_controller_admission_duration_seconds"
POLICY_SECONDS = "ValidatingAdmissionPolicy"


def histogram_sums(cluster: LocalCluster) -> dict[str, float]:
    """kube-apiserver's CRD CEL time and its ValidatingAdmissionPolicy plugin's time so far."""
    sums = dict.fromkeys((CEL_SECONDS, POLICY_SECONDS), 0.0)
    for family in text_string_to_metric_families(apiserver_metrics(cluster)):
        for sample in family.samples:
            if not sample.name.endswith("_sum"):
                continue
            if family.name == CEL_SECONDS:
                sums[CEL_SECONDS] += sample.value
            elif family.name == ADMISSION_SECONDS and sample.labels.get("name") == POLICY_SECONDS:
                sums[POLICY_SECONDS] += sample.value
    return sums


async def _writes(cluster: LocalCluster, n: int, claim: bool, clients: int) -> Cost:
    pid = cluster.pids()["kube-apiserver"]
    api_client = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api_client:
        client = KubeClient(api_client, qps=5000, burst=5000)
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        # One write first: the CRD's rules are compiled and its caches warm before measuring.
        await client.create(api.JOBSETS, compare_jobset("warm-up", claim), NAMESPACE)
        names: Iterator[int] = iter(range(n))
        made: list[Obj] = []

        async def create() -> None:
            for i in names:
                body = compare_jobset(f"js-{i:04d}", claim)
                made.append(await client.create(api.JOBSETS, body, NAMESPACE))

        async def complete() -> None:
            while made:
                obj = made.pop()
                obj["status"] = COMPLETED_STATUS
                await client.replace(api.JOBSETS, obj, NAMESPACE, subresource="status")

        sums0, cpu0 = histogram_sums(cluster), proc_cpu_seconds(pid)
        await asyncio.gather(*(create() for _ in range(clients)))
        sums1, cpu1 = histogram_sums(cluster), proc_cpu_seconds(pid)
        await asyncio.gather(*(complete() for _ in range(clients)))
        sums2, cpu2 = histogram_sums(cluster), proc_cpu_seconds(pid)
    per = 1000 / n
    return Cost(
        cpu_create=round((cpu1 - cpu0) * per, 2),
        cpu_status=round((cpu2 - cpu1) * per, 2),
        cel_create=round((sums1[CEL_SECONDS] - sums0[CEL_SECONDS]) * per, 3),
        cel_status=round((sums2[CEL_SECONDS] - sums1[CEL_SECONDS]) * per, 3),
        policy_create=round((sums1[POLICY_SECONDS] - sums0[POLICY_SECONDS]) * per, 3),
        policy_status=round((sums2[POLICY_SECONDS] - sums1[POLICY_SECONDS]) * per, 3),
    )


def measure(objects: list[Obj], n: int, claim: bool, clients: int) -> Cost:
    """One fresh control plane with ``objects`` (a CRD, maybe the policy and its binding)
    installed and in force, the writes, the cost per write."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp) / "c", profile="apiserver", report=lambda _: None) as cluster,
    ):
        path = Path(tmp) / "api.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        cluster.kubectl("apply", "--server-side", "-f", str(path))
        jobsetapi.wait_established(cluster)
        if any(o["kind"] == "ValidatingAdmissionPolicy" for o in objects):
            jobsetapi.wait_enforced(cluster)
        return asyncio.run(_writes(cluster, n, claim, clients))


def rule_sites(crd: Obj) -> list[tuple[tuple[str | int, ...], int]]:
    """Every CEL rule of a CRD: (path of its schema node, index in that node's list)."""
    found: list[tuple[tuple[str | int, ...], int]] = []

    def walk(node: object, path: tuple[str | int, ...]) -> None:
        if isinstance(node, dict):
            found.extend((path, i) for i in range(len(node.get(RULES, []))))
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, (*path, i))

    walk(crd, ())
    return found


def _node(crd: Obj, path: tuple[str | int, ...]) -> Any:
    node: Any = crd
    for part in path:
        node = node[part]
    return node


def with_one_rule(crd: Obj, keep: int | None) -> Obj:
    """``crd`` with every CEL rule removed but the ``keep``-th (None: none kept)."""
    sites = rule_sites(crd)
    result = copy.deepcopy(crd)
    for path, _ in sites:
        _node(result, path).pop(RULES, None)
    if keep is not None:
        path, index = sites[keep]
        _node(result, path)[RULES] = [_node(crd, path)[RULES][index]]
    return result


def rule_label(crd: Obj, site: tuple[tuple[str | int, ...], int]) -> str:
    """Where a rule sits (``spec.replicatedJobs[]``) and the start of its message."""
    path, index = site
    schema_path = path[path.index("openAPIV3Schema") + 1 :] if "openAPIV3Schema" in path else path
    parts: list[str] = []
    for part in schema_path:
        if part == "items":
            parts[-1] += "[]"
        elif part != "properties":
            parts.append(str(part))
    rule = _node(crd, path)[RULES][index]
    return f"{'.'.join(parts) or '(root)'}: {str(rule.get('message', rule['rule']))[:90]}"


def load(path: Path) -> Obj:
    obj: Obj = yaml.safe_load(path.read_text())
    return obj


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=500, help="JobSets per run")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=["a", "b"], default=["a", "b"])
    parser.add_argument("--per-rule", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--crd", type=Path, default=None, help="ours: this CRD alone")
    args = parser.parse_args()
    ours = yaml.safe_load((args.crd or jobsetapi.CRD).read_text())
    our_objects = [ours] + ([] if args.crd else [load(jobsetapi.POLICY), load(jobsetapi.BINDING)])
    report: Obj = {
        "benchmark": "validation-cost",
        "machine": describe_machine(),
        "date": datetime.date.today().isoformat(),
        "n": args.n,
    }
    if args.per_rule:
        sites = rule_sites(ours)
        rows: list[Obj] = []
        for keep in [None, *range(len(sites))]:
            cost = measure([with_one_rule(ours, keep)], args.n, claim=True, clients=1)
            label = "no rule" if keep is None else rule_label(ours, sites[keep])
            rows.append({"rule": label, "cel_create_ms": cost.cel_create,
                         "cel_status_ms": cost.cel_status})  # fmt: skip
            print(f"{cost.cel_create:7.3f} {cost.cel_status:7.3f}  {label}", flush=True)
        rows.sort(key=lambda r: -(r["cel_create_ms"] + r["cel_status_ms"]))
        report.update(variant="b", clients=1, rules=rows)
        out = args.out or ROOT / "bench" / "results" / "validation-cost-per-rule.json"
    else:
        try:
            built = upstream.ensure_upstream()
        except BuildError as err:
            print(err, file=sys.stderr)
            return 2
        theirs = yaml.safe_load(built.crd.read_text())
        crds = [("ours", our_objects), ("upstream", [theirs])]
        runs = []
        for repeat in range(args.repeat):
            for variant in args.variants:
                for name, crd in crds if repeat % 2 == 0 else crds[::-1]:
                    cost = measure(crd, args.n, claim=variant == "b", clients=8)
                    runs.append({"crd": name, "variant": variant, "repeat": repeat,
                                 **asdict(cost)})  # fmt: skip
                    print(f"variant {variant}, {name}: {cost}", flush=True)
        report.update(
            upstream_ref=built.ref,
            ours=str(args.crd or "manifests/crd/ (CRD, policy, binding)"),
            clients=8,
            runs=runs,
        )
        out = args.out or ROOT / "bench" / "results" / "validation-cost.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
