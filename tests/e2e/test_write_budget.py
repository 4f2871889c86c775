"""The write budget: a JobSet costs exactly the derived minimum of API writes.

The scale benchmark's JobSet (two replicated jobs of 2 Jobs, one JobSet-scope claim mounted by
all, one Job-scope claim per Job of the first) runs to completion on KWOK. The API server's audit
log, not the controller's own count, says what the controller wrote. docs/performance.md
derives the minimum: 4 Jobs + 3 claims + 1 Service created, the finalizer added once, one status
write per condition state (VolumesReady False then True, Completed), one Event per claim created
and one for completion. The progress pace is set beyond the test's length, so no counters-only
status write can happen; at the default pace the benchmark reports how many do.
"""

from __future__ import annotations

import uuid

from controller.jobset import api
from controller.runtime.client import CONFIG_MAPS, KubeClient
from controller.runtime.manager import USER_AGENT
from localcluster import audit
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    SCALE_JOBSET_MINIMUM_WRITES,
    running_controller,
    scale_jobset,
    settled,
    wait_condition,
)


async def _audited(kube: Kube, namespace: str, name: str) -> bool:
    return any(
        (entry.get("objectRef") or {}).get("namespace") == namespace
        and (entry.get("objectRef") or {}).get("name") == name
        for entry in audit.entries(kube.cluster.audit_log, name)
    )


async def test_a_jobset_costs_exactly_the_derived_minimum_of_writes(
    full_kube: Kube, full_namespace: str, client: KubeClient
) -> None:
    ns = full_namespace
    async with running_controller(full_kube, ns, "--status-progress-period=3600") as running:
        await client.create(api.JOBSETS, scale_jobset("budget"), ns)
        await wait_condition(client, ns, "budget", api.COMPLETED, seconds=120)
        # Everything the completion set off was seen, reconciled and written ...
        await settled(running, client)
        # ... and the audit log has caught up with those writes: a request made after them is in.
        marker = f"audit-marker-{uuid.uuid4().hex[:6]}"
        await client.create(CONFIG_MAPS, {"metadata": {"name": marker}}, ns)
        await wait_for(
            lambda: _audited(full_kube, ns, marker),
            bool,
            "the audit log to record a request made after the controller settled",
        )
        writes = audit.count_writes(
            full_kube.cluster.audit_log,
            USER_AGENT,
            lambda entry: (entry.get("objectRef") or {}).get("namespace") == ns,
        )
    assert dict(writes) == SCALE_JOBSET_MINIMUM_WRITES
