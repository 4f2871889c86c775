"""Pod-scope claims with real bytes: each rank finds its own checkpoint again after a restart.

The Pod-scope admission policy (``manifests/pod-scope``, generated from
``controller/jobset/volumes/admission.py``) is installed for the test and removed afterwards:
the real node's control plane is shared by the whole node tier, and the other tests are
written for a cluster without it (``policy_in_effect`` waits until the API server applies it,
and until it no longer does).

The claims are the real node's CSI storage (``csi-immediate``, our CSI driver): each claim's
directory on this host is its volume's in the driver's state directory (``directory_of``), where
the driver also keeps its ``.csi-capacity`` file.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from controller.jobset import api
from controller.jobset.volumes.podscope import (
    COMPLETION_INDEX_ANNOTATION,
    placeholder_claim_name,
    pod_claim_name,
)
from controller.runtime.client import CLAIMS, KubeClient
from localcluster import csi
from tests.helpers import Kube, current, wait_for
from tests.node.test_data import SECONDS, completed, directory_of, log_of, shell_job
from tests.support.jobsets import jobs_of, jobset
from tests.support.podscope import policy_in_effect
from tests.support.volumes_e2e import (
    ControllerProcesses,
    claim_template,
    job_claims,
    pod_claims,
    pods_of,
)

Obj = dict[str, Any]
NAME = "ranks"
RJOB = "workers"
JOBS = 2
PODS = 2
# The rank whose attempt-0 pod fails, so that the JobSet restarts once.
FAILING = "1-1"

# Every pod prints what its claim holds; on attempt 0 it writes its rank, waits for the test's
# ``go`` (so that every rank has written before the failure restarts the JobSet), removes it
# (the directory then holds only the rank), and rank FAILING exits 1. Attempt 1 only reads: what
# it finds is what survived the restart.
SCRIPT = (
    'me="$JOB_INDEX-$JOB_COMPLETION_INDEX"; '
    "found=$(cat /ckpt/rank 2>/dev/null || echo none); "
    'echo "attempt $ATTEMPT rank $me found $found"; '
    'if [ "$ATTEMPT" = 0 ]; then '
    'echo "$me" > /ckpt/rank; '
    "while [ ! -f /ckpt/go ]; do sleep 0.2; done; rm /ckpt/go; "
    f'if [ "$me" = {FAILING} ]; then exit 1; fi; '
    "fi"
)


def ranks() -> list[tuple[int, int]]:
    return [(j, p) for j in range(JOBS) for p in range(PODS)]


def rank_job() -> Obj:
    """``workers``: 2 Indexed Jobs x 2 pods, each mounting its Pod-scope ``ckpt`` claim at /ckpt;
    the pod knows its Job index from the label the controller sets (the Job controller sets
    JOB_COMPLETION_INDEX itself)."""
    rjob = shell_job(RJOB, SCRIPT, replicas=JOBS, pods=PODS, mounts={"ckpt": "/ckpt"})
    container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append(
        {
            "name": "JOB_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{api.JOB_INDEX}']"}},
        }
    )
    return rjob


def read_rank(directory: Path) -> str:
    rank = directory / "rank"
    return rank.read_text().strip() if rank.exists() else ""


async def test_each_rank_reads_back_its_own_checkpoint_after_a_restart(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """2 Jobs x 2 pods, one ReadWriteOnce claim per pod (scope Pod). Attempt 0: every pod writes
    its rank (Job index - completion index) into its claim, then rank 1-1 fails and the JobSet
    restarts (maxRestarts 1). Attempt 1: every pod reads back exactly its own rank, from the same
    claim; at the end each claim's directory on the host holds its own rank and nothing else
    (but the CSI driver's capacity file)."""
    ns = node_namespace
    async with policy_in_effect(node_kube, ns):
        body = jobset(
            NAME,
            rank_job(),
            failurePolicy={"maxRestarts": 1},
            volumeClaimPolicies=[
                {"scope": "Pod", "templates": [claim_template("ckpt", "16Mi", csi.IMMEDIATE_CLASS)]}
            ],
        )
        await node_client.create(api.JOBSETS, body, ns)
        claims = {(j, p): pod_claim_name("ckpt", NAME, RJOB, j, p) for j, p in ranks()}
        directories = {
            r: await directory_of(node_kube.cluster, node_client, ns, c) for r, c in claims.items()
        }
        assert len(set(directories.values())) == len(claims), directories
        uids = {
            r: (await node_client.get(CLAIMS, c, ns))["metadata"]["uid"] for r, c in claims.items()
        }

        # Attempt 0 wrote each rank into its own claim, seen on the host.
        for (j, p), directory in directories.items():
            await wait_for(
                current(functools.partial(read_rank, directory)),
                functools.partial(str.__eq__, f"{j}-{p}"),
                f"rank {j}-{p} written by its pod into {directory}",
                seconds=SECONDS,
            )
        for directory in directories.values():
            (directory / "go").write_text("")

        finished = await completed(node_client, ns, NAME)
        assert finished["status"].get("restarts") == 1, finished["status"]

        # Each Job's template names the placeholder, never a concrete claim.
        for job in await jobs_of(node_client, ns, NAME):
            j = int(job["metadata"]["labels"][api.JOB_INDEX])
            assert job_claims(job) == {"ckpt": placeholder_claim_name("ckpt", NAME, RJOB, j)}

        # Attempt 1: each pod mounted its own claim and found its own rank there.
        second = await pods_of(node_client, ns, NAME, f"{api.RESTART_ATTEMPT}=1")
        seen = {}
        for pod in second:
            meta = pod["metadata"]
            rank = (
                int(meta["labels"][api.JOB_INDEX]),
                int(meta["annotations"][COMPLETION_INDEX_ANNOTATION]),
            )
            assert (pod.get("status") or {}).get("phase") == "Succeeded", pod.get("status")
            assert pod_claims(pod["spec"]) == {"ckpt": claims[rank]}, meta["name"]
            seen[rank] = await log_of(node_kube, ns, meta["name"])
        assert seen == {(j, p): f"attempt 1 rank {j}-{p} found {j}-{p}" for j, p in ranks()}, seen

        # The same claims throughout, and no other; each directory holds exactly its own rank
        # (and the driver's capacity file, which every volume of it has at its root).
        listed = await node_client.list(CLAIMS, ns, label_selector=f"{api.JOBSET_NAME}={NAME}")
        assert sorted(c["metadata"]["name"] for c in listed["items"]) == sorted(claims.values())
        for rank, claim in claims.items():
            assert (await node_client.get(CLAIMS, claim, ns))["metadata"]["uid"] == uids[rank]
        for (j, p), directory in directories.items():
            assert sorted(f.name for f in directory.iterdir()) == sorted(
                [csi.CAPACITY_FILE, "rank"]
            ), directory
            assert (directory / "rank").read_text() == f"{j}-{p}\n", directory
        node_controller.assert_clean()
