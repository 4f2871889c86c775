"""Is upstream JobSet's controller running in this cluster? Asked once, at start-up.

Two controllers that serve the same ``spec.managedBy`` value run the same JobSets: each creates
and deletes their Jobs by its own reading. Upstream serves its reserved value (and JobSets without
the field), which is this controller's default too. So at start-up the controller looks for
upstream's controller where upstream's own install puts it (names read from upstream v0.12.0's
``config/`` and chart, the same in both but for the Deployment):

- the Lease ``6d4f6a47.jobset.x-k8s.io`` (its default leader election id), in any namespace,
  held and renewed: the strongest sign that a manager runs (leader election is on in both of
  upstream's installs);
- the Deployment ``jobset-controller-manager`` (kustomize) or ``jobset-controller`` (chart, release
  ``jobset``), in any namespace, with a ready replica;
- the webhook configurations ``jobset-validating-webhook-configuration`` and
  ``jobset-mutating-webhook-configuration``: upstream installed, and its webhooks judging (and,
  without their server, refusing) every JobSet write.

``decide`` (pure) turns what was seen into a verdict: refuse to start while upstream runs and this
controller serves upstream's value (unless ``--share-upstream-managed-by``), say that upstream
runs beside a canary, warn about webhooks left behind. What the controller may not read (RBAC) is
said, never a reason not to start. ``observe`` is the I/O: lists by name (``named``), so the
ClusterRole grants them with ``resourceNames``.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from controller.jobset.api import CONTROLLER_NAME as UPSTREAM_MANAGED_BY
from controller.jobset.status import parse_time
from controller.runtime.client import (
    DEPLOYMENTS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiError,
    KubeClient,
    Resource,
    named,
)
from controller.runtime.store import Obj

log = structlog.get_logger("upstream")

UPSTREAM_LEASE = "6d4f6a47.jobset.x-k8s.io"
UPSTREAM_DEPLOYMENTS = ("jobset-controller-manager", "jobset-controller")
UPSTREAM_VALIDATING_WEBHOOKS = "jobset-validating-webhook-configuration"
UPSTREAM_MUTATING_WEBHOOKS = "jobset-mutating-webhook-configuration"
LEASE = (LEASES, UPSTREAM_LEASE)
DEPLOYMENT_READS = tuple((DEPLOYMENTS, name) for name in UPSTREAM_DEPLOYMENTS)
WEBHOOK_READS = (
    (VALIDATING_WEBHOOK_CONFIGURATIONS, UPSTREAM_VALIDATING_WEBHOOKS),
    (MUTATING_WEBHOOK_CONFIGURATIONS, UPSTREAM_MUTATING_WEBHOOKS),
)
# Every (resource, name) ``observe`` lists, in all namespaces, by name: the ClusterRole grants
# ``list`` on exactly these (resourceNames), nothing else of them.
READS = (LEASE, *DEPLOYMENT_READS, *WEBHOOK_READS)
SHARE_FLAG = "--share-upstream-managed-by"
CANARY_EXAMPLE = "example.com/canary"
# How long to watch a Lease that looks held for a renewal, at most (upstream renews every 2 s
# by default; its lease lasts 15 s).
RENEWAL_WAIT_CAP = 20.0


@dataclass(frozen=True)
class LeaseSeen:
    namespace: str
    holder: str
    # Renewed while the controller looked (a held Lease whose holder still writes it).
    renewed: bool


@dataclass(frozen=True)
class DeploymentSeen:
    namespace: str
    name: str
    ready: int


@dataclass(frozen=True)
class Seen:
    """What ``observe`` found of upstream's controller."""

    leases: tuple[LeaseSeen, ...] = ()
    deployments: tuple[DeploymentSeen, ...] = ()
    # "validatingwebhookconfiguration/<name>", "mutatingwebhookconfiguration/<name>".
    webhooks: tuple[str, ...] = ()
    # What could not be read, and why ("leases named ...: 403 Forbidden").
    unreadable: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        return any(lease.renewed for lease in self.leases) or any(
            d.ready > 0 for d in self.deployments
        )

    def evidence(self) -> str:
        """What shows upstream's controller, for a message."""
        parts = [
            f"Lease {lease.namespace}/{UPSTREAM_LEASE} held by {lease.holder!r} and renewed"
            for lease in self.leases
            if lease.renewed
        ]
        parts += [
            f"Deployment {d.namespace}/{d.name} with {d.ready} ready "
            f"{'replica' if d.ready == 1 else 'replicas'}"
            for d in self.deployments
            if d.ready > 0
        ]
        if self.webhooks:
            parts.append(f"webhook configurations {', '.join(self.webhooks)}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Verdict:
    """``refuse``: do not start. ``notes``: (level, message) to log either way."""

    refuse: bool = False
    notes: tuple[tuple[str, str], ...] = field(default=())


def decide(seen: Seen, serves: str, share: bool) -> Verdict:
    """The start-up verdict for a controller serving ``serves`` (``--managed-by``), ``share``
    being ``--share-upstream-managed-by``."""
    notes: list[tuple[str, str]] = []
    refuse = False
    reserved = serves == UPSTREAM_MANAGED_BY
    if seen.running and reserved:
        clash = (
            f"upstream JobSet's controller is running in this cluster ({seen.evidence()}). It "
            f"runs the JobSets without spec.managedBy or with {UPSTREAM_MANAGED_BY!r}, and so "
            f"does this controller (--managed-by={serves}): both would create and delete the "
            "same JobSets' Jobs"
        )
        if share:
            notes.append(("warning", f"{clash}; starting anyway, as {SHARE_FLAG}=true asks"))
        else:
            refuse = True
            notes.append(
                (
                    "error",
                    f"{clash}. Either stop upstream's controller first (its Deployment and its "
                    'webhook configurations: docs/operations.md, "Replacing upstream at '
                    'once"), or run this controller beside it as a canary with a value of its '
                    f"own (--managed-by={CANARY_EXAMPLE}, set in the ConfigMap "
                    'stateful-jobset-managed-by: "Running beside upstream"), or start it with '
                    f"{SHARE_FLAG}=true to run both on the same JobSets",
                )
            )
    elif seen.running:
        notes.append(
            (
                "info",
                f"upstream JobSet's controller runs beside this one ({seen.evidence()}): it runs "
                f"the JobSets without spec.managedBy or with {UPSTREAM_MANAGED_BY!r}; this "
                f"controller runs those with spec.managedBy {serves!r}",
            )
        )
    elif seen.webhooks:
        notes.append(
            (
                "warning",
                f"upstream JobSet's webhook configurations are still registered "
                f"({', '.join(seen.webhooks)}) but its controller is not seen running: while "
                "nothing answers them they refuse every JobSet write, and the create of every "
                'pod of a JobSet; delete them (docs/operations.md, "Replacing upstream at '
                'once")',
            )
        )
    if seen.unreadable:
        notes.append(
            (
                "warning",
                "could not fully check whether upstream JobSet's controller runs (started "
                f"anyway): {'; '.join(seen.unreadable)}",
            )
        )
    return Verdict(refuse, tuple(notes))


def held(lease: Obj, now: datetime.datetime) -> bool:
    """The Lease has a holder whose last renewal is within the lease's duration of ``now``."""
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    if not spec.get("holderIdentity") or renewed is None or not isinstance(duration, int):
        return False
    return renewed + datetime.timedelta(seconds=duration) > now


def _version(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))


Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def observe(
    client: KubeClient,
    *,
    now: Clock = _utcnow,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    poll: float = 0.5,
) -> Seen:
    """Read what ``decide`` needs. A Lease that looks held is read again until its holder renews
    it (its resourceVersion changes, the holder still set) or its lease runs out (at most
    ``RENEWAL_WAIT_CAP`` seconds): a Lease left by a stopped upstream is not running, whatever
    the clocks say."""
    unreadable: list[str] = []

    async def by_name(read: tuple[Resource, str]) -> list[Obj]:
        resource, name = read
        assert read in READS, read  # the ClusterRole grants these only
        try:
            listed = await client.list(resource, field_selector=named(name))
        except ApiError as error:
            if error.status != 404:  # 404: the API server does not serve the resource
                unreadable.append(f"{resource.plural} named {name}: {error.status} {error.reason}")
            return []
        except Exception as error:
            unreadable.append(f"{resource.plural} named {name}: {type(error).__name__}: {error}")
            return []
        return list(listed.get("items") or [])

    leases = []
    for lease in await by_name(LEASE):
        if not held(lease, now()):
            continue
        leases.append(await _watch_renewal(lease, by_name, now, sleep, poll))

    deployments = []
    for read in DEPLOYMENT_READS:
        for item in await by_name(read):
            ready = (item.get("status") or {}).get("readyReplicas")
            deployments.append(
                DeploymentSeen(
                    str((item.get("metadata") or {}).get("namespace", "")),
                    read[1],
                    ready if isinstance(ready, int) else 0,
                )
            )

    webhooks = [
        f"{resource.kind.lower()}/{name}"
        for resource, name in WEBHOOK_READS
        if await by_name((resource, name))
    ]
    return Seen(tuple(leases), tuple(deployments), tuple(webhooks), tuple(unreadable))


async def _watch_renewal(
    lease: Obj,
    by_name: Callable[[tuple[Resource, str]], Awaitable[list[Obj]]],
    now: Clock,
    sleep: Callable[[float], Awaitable[None]],
    poll: float,
) -> LeaseSeen:
    """Read a held Lease again every ``poll`` seconds until it changes (renewed if it still has
    a holder) or it would have run out unrenewed (``RENEWAL_WAIT_CAP`` at most)."""
    namespace = str((lease.get("metadata") or {}).get("namespace", ""))
    spec = lease.get("spec") or {}
    duration = float(spec.get("leaseDurationSeconds") or 0)
    deadline = RENEWAL_WAIT_CAP
    renewed_at = parse_time(spec.get("renewTime"))
    if renewed_at is not None:
        # Until the lease would run out, plus a retry.
        deadline = max(poll, min(deadline, (renewed_at - now()).total_seconds() + duration + 2))
    waited, latest = 0.0, lease
    while waited < deadline:
        await sleep(poll)
        waited += poll
        again = [
            item
            for item in await by_name(LEASE)
            if (item.get("metadata") or {}).get("namespace") == namespace
        ]
        latest = again[0] if again else {}
        if _version(latest) != _version(lease):
            break
    holder = str((latest.get("spec") or {}).get("holderIdentity") or "")
    renewed = _version(latest) != _version(lease) and bool(holder)
    return LeaseSeen(namespace, holder or str(spec.get("holderIdentity") or ""), renewed)


async def check(client: KubeClient, serves: str, share: bool) -> bool:
    """Look, log the verdict's notes; False when the controller must not start."""
    verdict = decide(await observe(client), serves, share)
    for level, message in verdict.notes:
        getattr(log, level)(message)
    return not verdict.refuse
