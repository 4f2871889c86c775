"""Leader election on a ``coordination.k8s.io/v1`` Lease, with a write fence.

Why our own and not kubernetes_asyncio's ``leaderelection`` package: that one judges expiry as
client-go does, from when *it* observed the record change (not from the times written in the
Lease), but it reads those moments and its renew deadline from ``time.time()``, the wall clock,
which NTP or an operator can step: forwards, and a standby takes over early while the leader
still writes; backwards, and a leader keeps renewing past its deadline. And it has no write
fence: nothing can ask "may I still write *now*?", so a leader frozen (SIGSTOP) past its lease
goes on writing when it resumes, until its renew loop notices. client-go's rules, which we follow
on the monotonic clock, plus the fence:

- A candidate may take the lease only if it is free (no holder), or if the record it last observed
  has not changed for ``lease_duration`` *by the candidate's own monotonic clock*.
- The leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it has
  lost the lease and must stop.
- Writes are fenced: the controller writes only while ``monotonic() < t_renew + renew_deadline``,
  where ``t_renew`` is when the last successful renewal was *sent*. Another candidate can take the
  lease only ``lease_duration`` (> renew_deadline) after it observed that renewal, which is after
  it was sent, so the two replicas' write windows never overlap. The client asks ``is_leader``
  immediately before each write is sent, after its waits for a rate-limiter token and a pooled
  connection (client.py), so no wait carries a write past the fence. After a freeze the fence is
  already closed when the process resumes.
- On graceful shutdown the leader releases the lease (empty holder, 1 s duration) so a standby
  takes over at once.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from prometheus_client import CollectorRegistry, Gauge

from controller.runtime.client import LEASES, ApiError, KubeClient

log = structlog.get_logger("leaderelection")


@dataclass(frozen=True)
class LeaderElectionConfig:
    lease_name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2 > 0:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > 1.2 * retry_period > 0 "
                f"(got {self.lease_duration}, {self.renew_deadline}, {self.retry_period})"
            )


def _micro_time(now: datetime.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.client = client
        self.config = config
        self._clock = clock
        self._wall = wall_clock
        self._observed_spec: dict[str, Any] | None = None
        # The Lease as our last successful write returned it: the leader renews from it without
        # reading first (its resourceVersion makes the PUT fail if anyone else wrote since).
        self._written: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # when the last successful renewal was sent
        self._leading = False
        self._status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=registry,
        ).labels(name=config.lease_name)
        self._log = log.bind(
            lease=f"{config.namespace}/{config.lease_name}", identity=config.identity
        )

    # -------------------------------------------------------------- fence

    def is_leader(self) -> bool:
        """May this replica write right now? (see the module docstring)"""
        if not self._leading or self._renewed_at is None:
            return False
        return self._clock() < self._renewed_at + self.config.renew_deadline

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        self._status.set(1 if leading else 0)

    # ------------------------------------------------------------ protocol

    def _spec(self, current: dict[str, Any] | None, now: datetime.datetime) -> dict[str, Any]:
        current = current or {}
        same_holder = current.get("holderIdentity") == self.config.identity
        transitions = int(current.get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.lease_duration),
            "acquireTime": current.get("acquireTime") if same_holder else _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions if same_holder or not current else transitions + 1,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; False when it failed for any reason, an unreachable API server included
        (a standby keeps trying, a leader keeps trying until its renew deadline, as client-go)."""
        try:
            return await self._try_acquire_or_renew()
        except (aiohttp.ClientError, OSError) as err:
            self._log.warning("cannot reach the API server", error=repr(err))
            return False

    async def _try_acquire_or_renew(self) -> bool:
        sent_at = self._clock()
        now = self._wall()
        # client-go's fast path: the leader assumes the Lease is still the one it wrote and
        # renews with an optimistic update, no GET; any failure falls back to reading it.
        if self.is_leader() and await self._renew_written(sent_at, now):
            return True
        cfg = self.config
        try:
            lease = await self.client.get(LEASES, cfg.lease_name, cfg.namespace)
        except ApiError as err:
            if not err.not_found:
                self._log.warning("cannot read the lease", error=str(err))
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.lease_name, "namespace": cfg.namespace},
                "spec": self._spec(None, now),
            }
            try:
                created = await self.client.create(LEASES, body, cfg.namespace)
            except ApiError as create_err:
                self._log.info("lost the race to create the lease", error=str(create_err))
                return False
            self._wrote(created, sent_at)
            return True

        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observe(spec, self._clock())
        holder = spec.get("holderIdentity") or ""
        held_by_other = holder and holder != cfg.identity
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if held_by_other and self._clock() < self._observed_at + duration:
            return False
        lease["spec"] = self._spec(spec if holder else {**spec, "holderIdentity": None}, now)
        try:
            # PUT carries the resourceVersion we read: a concurrent change makes it fail with 409.
            updated = await self.client.replace(LEASES, lease, cfg.namespace)
        except ApiError as err:
            if not err.conflict:
                self._log.warning("cannot update the lease", error=str(err))
            return False
        self._wrote(updated, sent_at)
        return True

    async def _renew_written(self, sent_at: float, now: datetime.datetime) -> bool:
        if self._written is None:
            return False
        spec = self._written.get("spec") or {}
        lease = {**self._written, "spec": self._spec(spec, now)}
        try:
            updated = await self.client.replace(LEASES, lease, self.config.namespace)
        except ApiError as err:
            self._log.info("optimistic renewal failed; reading the lease", error=str(err))
            self._written = None
            return False
        self._wrote(updated, sent_at)
        return True

    def _wrote(self, lease: dict[str, Any], sent_at: float) -> None:
        self._written = lease
        self._observe(lease.get("spec") or {}, sent_at)
        self._renewed_at = sent_at

    def _observe(self, spec: dict[str, Any], at: float) -> None:
        self._observed_spec = spec
        self._observed_at = at

    async def release(self) -> None:
        """Give the lease up (graceful shutdown), if we hold it."""
        if not self._leading:
            return
        cfg = self.config
        self._set_leading(False)
        self._written = None
        try:
            lease = await self.client.get(LEASES, cfg.lease_name, cfg.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != cfg.identity:
                return
            now = _micro_time(self._wall())
            lease["spec"].update(
                {
                    "holderIdentity": None,
                    "leaseDurationSeconds": 1,
                    "renewTime": now,
                    "acquireTime": now,
                }
            )
            await self.client.replace(LEASES, lease, cfg.namespace)
            self._log.info("released the lease")
        except (ApiError, aiohttp.ClientError, OSError) as err:
            self._log.warning("could not release the lease", error=repr(err))

    # ---------------------------------------------------------------- loop

    def _jittered(self) -> float:
        return self.config.retry_period * (1 + 0.2 * random.random())

    async def try_lead(self) -> bool:
        """One attempt to acquire (or renew) the lease; on success this replica leads (and
        ``is_leader`` holds until the renew deadline passes without a renewal)."""
        if not await self.try_acquire_or_renew():
            return False
        self._set_leading(True)
        return True

    async def _acquire(self) -> None:
        self._log.info("waiting to acquire the lease")
        while not await self.try_lead():  # noqa: ASYNC110 (polling the API)
            await asyncio.sleep(self._jittered())
        self._log.info("acquired the lease; leading")

    async def _keep_renewing(self) -> None:
        """Return when leadership is lost (renewal failed for renew_deadline)."""
        while True:
            await asyncio.sleep(self.config.retry_period)
            deadline = self._clock() + self.config.renew_deadline
            renewed = False
            while not renewed and self._clock() < deadline and self.is_leader():
                try:
                    renewed = await asyncio.wait_for(
                        self.try_acquire_or_renew(), max(0.1, deadline - self._clock())
                    )
                except TimeoutError:
                    renewed = False
                if not renewed:
                    await asyncio.sleep(min(self.config.retry_period / 2, 1.0))
            if not renewed:
                self._set_leading(False)
                self._log.error("lost the lease: could not renew it within the renew deadline")
                return

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, run ``lead()`` while leading, return when leadership is lost.

        ``lead`` is cancelled the moment the lease is lost. On cancellation of ``run`` itself
        (shutdown) the lease is released.
        """
        self._set_leading(False)
        try:
            await self._acquire()
            leader_task = asyncio.create_task(lead(), name="leading")
            renew_task = asyncio.create_task(self._keep_renewing(), name="lease-renewal")
            try:
                done, _ = await asyncio.wait(
                    {leader_task, renew_task}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for task in (leader_task, renew_task):
                    task.cancel()
                await asyncio.gather(leader_task, renew_task, return_exceptions=True)
            if leader_task in done and not leader_task.cancelled():
                leader_task.result()  # surface a crash of the leading work
        finally:
            if self._leading:
                await asyncio.shield(self.release())
            self._set_leading(False)
