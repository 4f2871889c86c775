"""One real node of their own for the tests that run Kueue and Kubeflow Trainer
(``LocalCluster(profile="trainer", with_kueue=True)``), started once for this folder.

Kueue's webhooks act on every JobSet write of its API server, so no test of the tier's shared
node may see them; one real node runs per host (its lock), so these tests run before that one
starts (``own_node``), and the node goes once the last of them is done (a package fixture).
Kueue acts only on JobSets and TrainJobs with a queue label (``manageJobsWithoutQueueName:
false``), and Trainer only on its own API: each test's queues, priority classes and runtimes
have names of their own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from kubernetes_asyncio import config

from localcluster import csi, trainer
from localcluster.cluster import LocalCluster
from localcluster.node import host_checks
from tests.helpers import Kube
from tests.node.queued import CSI_RUNTIME


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@pytest.fixture(scope="package")
def queued_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    assert host_checks() == [], "this host cannot run containers (make tools installs it)"
    # Short: containerd's socket path under it must stay within 104 bytes.
    cluster = LocalCluster(
        tmp_path_factory.mktemp("q"), profile="trainer", with_kueue=True, report=progress
    )
    try:
        cluster.start()
        runtime = trainer.runtime()
        runtime["metadata"]["name"] = CSI_RUNTIME
        [policy] = runtime["spec"]["template"]["spec"]["volumeClaimPolicies"]
        policy["templates"][0]["spec"]["storageClassName"] = csi.WFFC_CLASS
        cluster.kubectl("apply", "--server-side", "-f", "-", input_text=json.dumps(runtime))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def queued_kube(queued_cluster: LocalCluster) -> AsyncIterator[Kube]:
    api_client = await config.new_client_from_config(config_file=str(queued_cluster.kubeconfig))
    async with api_client:
        yield Kube(api_client, queued_cluster)
