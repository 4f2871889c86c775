"""controller.jobset.upstream: the start-up verdict on a running upstream JobSet controller.

``decide`` is pure (what was seen, the value served, the override in; refuse or not, and what to
say, out): the table below. ``held`` reads a Lease's timestamps. What ``observe`` reads on a real
API server, and the refusal of a real process beside upstream's real manager, are
tests/integration/test_upstream_check.py's and tests/node/test_canary.py's.
"""

from __future__ import annotations

import datetime

import pytest

from controller.config import parse
from controller.jobset import api
from controller.jobset.upstream import (
    DeploymentSeen,
    LeaseSeen,
    Seen,
    decide,
    held,
)

UPSTREAM = api.CONTROLLER_NAME
CANARY = "example.com/canary"
LEASE = LeaseSeen("jobset-system", "jobset-controller-manager-7d9_1a2b", renewed=True)
STALE_LEASE = LeaseSeen("jobset-system", "gone_1", renewed=False)
READY = DeploymentSeen("jobset-system", "jobset-controller-manager", ready=1)
SCALED_DOWN = DeploymentSeen("jobset-system", "jobset-controller-manager", ready=0)
WEBHOOKS = (
    "validatingwebhookconfiguration/jobset-validating-webhook-configuration",
    "mutatingwebhookconfiguration/jobset-mutating-webhook-configuration",
)
FORBIDDEN = ("leases named 6d4f6a47.jobset.x-k8s.io: 403 Forbidden",)


@pytest.mark.parametrize(
    ("seen", "serves", "share", "refuse", "levels", "says"),
    [
        # Nothing of upstream: nothing to say.
        (Seen(), UPSTREAM, False, False, [], ""),
        (Seen(), CANARY, False, False, [], ""),
        # Upstream runs (its Lease renewed) and serves the same value: refused, naming it.
        (Seen(leases=(LEASE,), webhooks=WEBHOOKS), UPSTREAM, False, True, ["error"],
         "Lease jobset-system/6d4f6a47.jobset.x-k8s.io held by "
         "'jobset-controller-manager-7d9_1a2b' and renewed; webhook configurations "
         "validatingwebhookconfiguration/jobset-validating-webhook-configuration"),
        # ... known by its ready Deployment alone (leader election off).
        (Seen(deployments=(READY,)), UPSTREAM, False, True, ["error"],
         "Deployment jobset-system/jobset-controller-manager with 1 ready replica"),
        # How to go on: each way out is named.
        (Seen(leases=(LEASE,)), UPSTREAM, False, True, ["error"],
         "stop upstream's controller first"),
        (Seen(leases=(LEASE,)), UPSTREAM, False, True, ["error"],
         "--managed-by=example.com/canary, set in the ConfigMap stateful-jobset-managed-by"),
        (Seen(leases=(LEASE,)), UPSTREAM, False, True, ["error"],
         "--share-upstream-managed-by=true"),
        # The override: started, with a warning.
        (Seen(leases=(LEASE,)), UPSTREAM, True, False, ["warning"],
         "starting anyway, as --share-upstream-managed-by=true asks"),
        # A canary beside upstream: started, and said.
        (Seen(leases=(LEASE,), deployments=(READY,), webhooks=WEBHOOKS), CANARY, False, False,
         ["info"], "runs beside this one"),
        (Seen(leases=(LEASE,)), CANARY, False, False, ["info"],
         "this controller runs those with spec.managedBy 'example.com/canary'"),
        # Upstream stopped (a Lease not renewed, a Deployment scaled to 0): not running.
        (Seen(leases=(STALE_LEASE,), deployments=(SCALED_DOWN,)), UPSTREAM, False, False, [], ""),
        # ... but its webhooks left registered: they refuse every JobSet write. A warning.
        (Seen(leases=(STALE_LEASE,), webhooks=WEBHOOKS), UPSTREAM, False, False, ["warning"],
         "still registered"),
        (Seen(webhooks=WEBHOOKS[:1]), CANARY, False, False, ["warning"],
         "delete them"),
        # What could not be read is said; never a reason to refuse.
        (Seen(unreadable=FORBIDDEN), UPSTREAM, False, False, ["warning"],
         "leases named 6d4f6a47.jobset.x-k8s.io: 403 Forbidden"),
        (Seen(deployments=(READY,), unreadable=FORBIDDEN), UPSTREAM, False, True,
         ["error", "warning"], "could not fully check"),
    ],
)  # fmt: skip
def test_decide(
    seen: Seen, serves: str, share: bool, refuse: bool, levels: list[str], says: str
) -> None:
    verdict = decide(seen, serves, share)
    assert verdict.refuse is refuse
    assert [level for level, _ in verdict.notes] == levels
    assert says in " ".join(message for _, message in verdict.notes)


NOW = datetime.datetime(2026, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def _lease(holder: str | None, renewed_ago: float, duration: int | None = 15) -> dict[str, object]:
    spec: dict[str, object] = {
        "renewTime": (NOW - datetime.timedelta(seconds=renewed_ago)).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"
        ),
    }
    if holder is not None:
        spec["holderIdentity"] = holder
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {"metadata": {"name": "6d4f6a47.jobset.x-k8s.io"}, "spec": spec}


@pytest.mark.parametrize(
    ("lease", "expected"),
    [
        (_lease("a", 1), True),
        (_lease("a", 14.9), True),
        (_lease("a", 15), False),  # ran out
        (_lease("", 1), False),  # released: no holder
        (_lease(None, 1), False),
        (_lease("a", 1, duration=None), False),
        ({"spec": {"holderIdentity": "a"}}, False),  # never renewed
    ],
)
def test_held_reads_the_holder_and_the_last_renewal(
    lease: dict[str, object], expected: bool
) -> None:
    assert held(lease, NOW) is expected


def test_the_override_is_a_flag_off_by_default() -> None:
    assert parse([], env={}).share_upstream_managed_by is False
    assert parse(["--share-upstream-managed-by=true"], env={}).share_upstream_managed_by is True
    env = {"STATEFUL_JOBSET_SHARE_UPSTREAM_MANAGED_BY": "true"}
    assert parse([], env=env).share_upstream_managed_by is True
