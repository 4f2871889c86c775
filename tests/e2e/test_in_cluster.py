"""In-cluster mode with exactly the RBAC of manifests/: the controller as a pod would run it.

manifests/ is applied to the local control plane; a token for the controller's ServiceAccount is
minted (TokenRequest) and written, with the cluster CA and the namespace, into a folder standing
in for /var/run/secrets/kubernetes.io/serviceaccount. The controller then runs with only
KUBERNETES_SERVICE_HOST/PORT and that folder — no kubeconfig — and must run the original
request's example to completion. A negative check proves the role is not broader than needed.
The Deployment itself, the image as pods, is proven on the real node
(tests/node/test_manifests_in_cluster.py); this one stays for the RBAC checks, in a faster tier.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration

from controller.jobset import api
from controller.runtime.client import CLAIMS, CONFIG_MAPS, ApiError, KubeClient, Resource
from tests.helpers import Kube
from tests.support.incluster import ROOT, mint_token, service_account_dir, start_in_cluster
from tests.support.jobsets import wait_condition
from tests.support.replicas import Replica

SECRETS = Resource("", "v1", "secrets", "Secret")
PODS = Resource("", "v1", "pods", "Pod")


async def test_in_cluster_controller_runs_example_01_with_manifest_rbac(
    full_kube: Kube, full_namespace: str, installed: tuple[str, str], tmp_path: Path
) -> None:
    system_namespace, account = installed
    token = await mint_token(full_kube, system_namespace, account)
    folder = service_account_dir(tmp_path, full_kube, system_namespace, token)
    replica: Replica | None = None
    try:
        replica = start_in_cluster(full_kube, folder, full_namespace, "in-cluster", tmp_path)
        admin = KubeClient(full_kube.api)
        body = yaml.safe_load(
            (ROOT / "manifests" / "examples" / "seed-volume-policy.yaml").read_text()
        )
        await admin.create(api.JOBSETS, body, full_namespace)
        await wait_condition(admin, full_namespace, "volume-sample", api.COMPLETED, seconds=120)
        claim = await admin.get(CLAIMS, "pretrained-model-volume-sample", full_namespace)
        assert claim["status"]["phase"] == "Bound"
        errors = [line for line in replica.log_lines() if line.get("level") == "error"]
        assert errors == [], errors
        assert not any(
            "Forbidden" in str(line) or " 403" in str(line) for line in replica.log_lines()
        )
    finally:
        if replica is not None:
            replica.process.kill()


async def test_the_role_is_not_broader_than_needed(
    full_kube: Kube, full_namespace: str, installed: tuple[str, str]
) -> None:
    system_namespace, account = installed
    token = await mint_token(full_kube, system_namespace, account)
    configuration = Configuration()
    configuration.host = full_kube.cluster.server
    configuration.ssl_ca_cert = str(full_kube.cluster.pki.ca_cert)
    configuration.api_key = {"BearerToken": f"Bearer {token}"}
    async with ApiClient(configuration) as api_client:
        as_controller = KubeClient(api_client)
        # What it needs works ...
        await as_controller.list(api.JOBSETS, full_namespace)
        await as_controller.list(CLAIMS, full_namespace)
        await as_controller.list(PODS, full_namespace)  # Pod scope: read-only
        # ... what it does not need is forbidden.
        pod = {"metadata": {"name": "nope"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        for attempt in (
            as_controller.list(SECRETS, full_namespace),
            as_controller.create(PODS, pod, full_namespace),
            as_controller.list(CONFIG_MAPS, full_namespace),
            as_controller.create(CONFIG_MAPS, {"metadata": {"name": "nope"}}, full_namespace),
        ):
            with pytest.raises(ApiError) as refused:
                await attempt
            assert refused.value.status == 403
