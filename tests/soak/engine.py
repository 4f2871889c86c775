"""The soak run: set up, drive, break things, watch, quiesce, judge.

``run_soak`` starts its own local control plane (``full`` profile), installs the CRD with its
admission policy, the Pod-scope admission policy (``manifests/pod-scope``; waits until the API
server applies both) and the VolumeSnapshot CRDs, runs two controller replicas, and then, for
``Options.seconds``:

- the driver creates a JobSet every ``interval`` seconds and plays its scenario; it also plays the
  snapshot controller (until the end: claims under retention Snapshot wait for their snapshots);
- the current leader is ``kill -9``ed every ``kill_min``..``kill_max`` seconds (a replacement
  replica starts at once; one that exits by itself is replaced too);
- kube-apiserver is stopped for ``apiserver_down`` seconds once, half-way;
- every ``check_every`` seconds the monitor lists JobSets, Jobs, claims and pods, reads the new
  audit log lines, samples the replicas' RSS and checks the invariants.

Then chaos stops, the run quiesces (scenarios finish, everything becomes terminal or gone,
bounded by ``quiesce_seconds``) and every invariant is checked once more on the final state.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path

import aiohttp
from kubernetes_asyncio import config as kubeconfig

from controller.jobset import api
from controller.jobset.volumes.model import POD_SCOPE_LABEL
from controller.runtime.client import CLAIMS, JOBS, LEASES, PODS, ApiError, KubeClient
from localcluster import csi, jobsetapi
from localcluster.cluster import LocalCluster
from localcluster.processes import LaunchError
from tests.soak import invariants
from tests.soak.chaos import (
    KWOK_STUCK_AFTER,
    NUDGE_ANNOTATION,
    ApiserverRestart,
    AuditTail,
    Replicas,
    restart_apiserver,
    stuck_pods,
)
from tests.soak.driver import Driver, DriverError
from tests.soak.model import (
    DRIVER_AGENT,
    SNAPSHOT,
    AuditEntry,
    ClaimObject,
    JobSetRecord,
    Obj,
    Sighting,
    by_controller,
    labels,
    meta,
    name_of,
    terminal_state,
)
from tests.soak.report import MIB, Report, jobset_counts, write_counts
from tests.soak.scenarios import plan
from tests.support.podscope import wait_policy_applied

ROOT = Path(__file__).resolve().parents[2]
POD_SCOPE_POLICY = ROOT / "manifests" / "pod-scope"
NAMESPACE = "soak"
LEASE = "stateful-jobset-soak"


@dataclass(frozen=True)
class Options:
    seconds: float = 300.0
    state_dir: Path = Path(tempfile.gettempdir()) / "stateful-jobset-soak"
    report_path: Path | None = None
    interval: float = 2.5  # between JobSet creations
    max_in_flight: int = 24  # scenarios not yet finished; no new JobSet above this
    kill_min: float = 10.0
    kill_max: float = 25.0
    apiserver_down: float = 5.0
    check_every: float = 2.0
    progress_every: float = 10.0
    claim_grace: float = 90.0  # how long a claim may exist unexplained while chaos goes on
    audit_lag: float = 60.0  # audit entries are judged once the monitor had time to see why
    quiesce_seconds: float = 150.0
    rss_limit_mib: float = 400.0
    seed: int | None = None


@dataclass
class Observed:
    jobsets: list[Obj] = field(default_factory=list)
    jobs: list[Obj] = field(default_factory=list)
    claims: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    at: float = 0.0  # the listings were answered
    began: float = 0.0  # they were asked for


@dataclass
class Engine:
    cluster: LocalCluster
    options: Options
    say: Callable[[str], None]
    records: dict[str, JobSetRecord] = field(default_factory=dict)
    entries: list[AuditEntry] = field(default_factory=list)
    violations: dict[str, None] = field(default_factory=dict)  # ordered set
    unexplained_since: dict[str, float] = field(default_factory=dict)
    observed: Observed = field(default_factory=Observed)
    restart: ApiserverRestart = field(default_factory=ApiserverRestart)
    scenarios: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    started: float = 0.0
    rounds: int = 0  # continuous checks done
    pods_seen: set[str] = field(default_factory=set)  # uids of the JobSets' pods checked
    pod_scope_pods_seen: set[str] = field(default_factory=set)  # those with a Pod-scope label
    claim_objects: dict[str, ClaimObject] = field(default_factory=dict)  # by uid, as listed
    driver: Driver | None = None
    nudged: dict[str, float] = field(default_factory=dict)  # pod name -> when, stuck in KWOK
    kwok_nudges: int = 0

    def violate(self, *messages: str) -> None:
        for message in messages:
            if message not in self.violations:
                self.violations[message] = None
                self.say(f"  VIOLATION at {self.elapsed():.0f}s: {message}")

    def elapsed(self, moment: float | None = None) -> float:
        return (moment if moment is not None else time.time()) - self.started

    # ------------------------------------------------------------------ run

    async def run(self) -> Report:
        options = self.options
        rng = random.Random(options.seed)
        api_client = await kubeconfig.new_client_from_config(
            config_file=str(self.cluster.kubeconfig)
        )
        api_client.user_agent = DRIVER_AGENT
        async with api_client:
            client = KubeClient(api_client, field_manager=DRIVER_AGENT)
            driver = Driver(client, NAMESPACE, self.records, rng)
            self.driver = driver
            replicas = Replicas(
                self.cluster.kubeconfig, NAMESPACE, self.cluster.state_dir / "logs", LEASE
            )
            audit = AuditTail(self.cluster.audit_log, NAMESPACE)
            try:
                return await self._run(client, driver, replicas, audit, rng)
            finally:
                tasks = [*self.scenarios.values(), *driver.snapshot_tasks.values()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                replicas.stop()
                audit.close()

    async def _run(
        self,
        client: KubeClient,
        driver: Driver,
        replicas: Replicas,
        audit: AuditTail,
        rng: random.Random,
    ) -> Report:
        options = self.options
        try:
            await wait_policy_applied(client, NAMESPACE)
        except TimeoutError as err:
            raise LaunchError(str(err)) from err
        replicas.start()
        replicas.start()
        leader = await self._wait_leader(client, replicas)
        self.say(f"leader: {leader}; second replica on standby")
        self.started = time.time()
        deadline = time.monotonic() + options.seconds
        stop_monitor = asyncio.Event()
        chaos = [
            asyncio.create_task(self._create_loop(driver, deadline)),
            asyncio.create_task(self._kill_loop(client, replicas, rng, deadline)),
            asyncio.create_task(self._restart_apiserver(options.seconds / 2)),
        ]
        watchers = [
            asyncio.create_task(self._replica_loop(replicas, stop_monitor)),
            asyncio.create_task(self._monitor_loop(client, audit, replicas, stop_monitor)),
            asyncio.create_task(driver.play_snapshot_controller(stop_monitor)),
        ]
        try:
            await asyncio.gather(*chaos)
            self.say(f"[{self.elapsed():5.0f}s] chaos over; quiescing")
            quiesce_began = time.monotonic()
            converged = await self._quiesce(client, audit, quiesce_began + options.quiesce_seconds)
            quiesce_seconds = time.monotonic() - quiesce_began
        finally:
            stop_monitor.set()
            for task in chaos:
                task.cancel()
            await asyncio.gather(*chaos, *watchers, return_exceptions=True)
        await self._final(client, audit, driver, replicas)
        return self._report(driver, replicas, converged, quiesce_seconds)

    async def _wait_leader(self, client: KubeClient, replicas: Replicas) -> str:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            holder = await self._holder(client)
            if holder in replicas.running:
                return holder
            replicas.supervise()
            await asyncio.sleep(0.5)
        raise LaunchError("no controller replica became leader within 90 s")

    async def _holder(self, client: KubeClient) -> str:
        try:
            lease = await asyncio.wait_for(client.get(LEASES, LEASE, NAMESPACE), 5)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
            return ""  # the API server is away
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    # ---------------------------------------------------------------- loops

    async def _create_loop(self, driver: Driver, deadline: float) -> None:
        index = 0
        while time.monotonic() < deadline:
            in_flight = sum(not t.done() for t in self.scenarios.values())
            if in_flight < self.options.max_in_flight:
                planned = plan(index, time.time())
                index += 1
                self.records[planned.record.name] = planned.record
                self.scenarios[planned.record.name] = asyncio.create_task(driver.run(planned))
            await asyncio.sleep(min(self.options.interval, max(0.0, deadline - time.monotonic())))

    async def _kill_loop(
        self, client: KubeClient, replicas: Replicas, rng: random.Random, deadline: float
    ) -> None:
        options = self.options
        while True:
            due = time.monotonic() + rng.uniform(options.kill_min, options.kill_max)
            if due >= deadline:
                return
            await asyncio.sleep(due - time.monotonic())
            while time.monotonic() < deadline:
                holder = await self._holder(client)
                if holder in replicas.running:
                    replacement = replicas.kill(holder)
                    self.say(
                        f"[{self.elapsed():5.0f}s] kill -9 leader {holder}; started "
                        f"{replacement.identity}"
                    )
                    break
                await asyncio.sleep(1.0)  # no live leader yet (failover, or API server away)

    async def _restart_apiserver(self, after: float) -> None:
        await asyncio.sleep(after)  # the outage comes this long into the run
        down = self.options.apiserver_down
        self.say(f"[{self.elapsed():5.0f}s] stopping kube-apiserver for {down:.0f}s")
        await restart_apiserver(self.cluster, self.options.apiserver_down, self.restart)
        self.say(
            f"[{self.elapsed():5.0f}s] kube-apiserver ready again "
            f"({self.restart.ready_at - self.restart.stopping_at:.1f}s after it was told to stop)"
        )

    async def _replica_loop(self, replicas: Replicas, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for ended in replicas.supervise():
                self.say(
                    f"[{self.elapsed():5.0f}s] replica {ended.identity} exited by itself "
                    f"(code {ended.code}: {ended.reason}); replaced"
                )
            replicas.sample_rss()
            await asyncio.sleep(1.0)

    async def _monitor_loop(
        self, client: KubeClient, audit: AuditTail, replicas: Replicas, stop: asyncio.Event
    ) -> None:
        last_progress = 0.0
        while not stop.is_set():
            await self._observe(client, audit)
            self._check_continuously()
            if time.monotonic() - last_progress >= self.options.progress_every:
                last_progress = time.monotonic()
                self.say(self._progress(replicas))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.options.check_every)

    # ------------------------------------------------------------ observing

    async def _list(self, client: KubeClient) -> Observed | None:
        began = time.time()
        try:
            jobsets, jobs, claims, pods = await asyncio.wait_for(
                asyncio.gather(
                    client.list(api.JOBSETS, NAMESPACE),
                    client.list(JOBS, NAMESPACE),
                    client.list(CLAIMS, NAMESPACE),
                    client.list(PODS, NAMESPACE),
                ),
                15,
            )
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
            return None  # the API server is away
        return Observed(
            jobsets["items"], jobs["items"], claims["items"], pods["items"], time.time(), began
        )

    async def _observe(self, client: KubeClient, audit: AuditTail) -> bool:
        for entry in audit.read():
            self.entries.append(entry)
            self._note_jobset_delete(entry)
        observed = await self._list(client)
        if observed is None:
            return False
        self.observed = observed
        await self._nudge_stuck_pods(client, observed)
        for claim in observed.claims:
            uid, name = str(meta(claim).get("uid") or ""), name_of(claim)
            bound = (claim.get("status") or {}).get("phase") == "Bound"
            sighting = Sighting(observed.began, observed.at, bound)
            if uid in self.claim_objects:
                self.claim_objects[uid].see(sighting)
            elif uid:
                self.claim_objects[uid] = ClaimObject.seen(name, uid, sighting)
        for pod in observed.pods:
            if labels(pod).get(invariants.JOBSET_NAME) in self.records:
                self.pods_seen.add(str(meta(pod).get("uid")))
                if labels(pod).get(POD_SCOPE_LABEL) == "true":
                    self.pod_scope_pods_seen.add(str(meta(pod).get("uid")))
        live = {name_of(j): j for j in observed.jobsets}
        for record in self.records.values():
            jobset = live.get(record.name)
            if jobset is None:
                record.gone = record.deletion_time is not None
                continue
            state, since = terminal_state(jobset)
            if state and not record.terminal:
                record.terminal, record.terminal_at = state, since
            restarts = int((jobset.get("status") or {}).get("restarts") or 0)
            record.restarts = max(record.restarts, restarts)
            if not record.uid:
                record.uid = str(jobset["metadata"].get("uid") or "")
        return True

    async def _nudge_stuck_pods(self, client: KubeClient, observed: Observed) -> None:
        """KWOK's dropped stages (``chaos.stuck_pods``): each such pod is annotated, at most once
        per ``KWOK_STUCK_AFTER``; the count is reported (``kwok_nudges``)."""
        for name in stuck_pods(observed.pods, observed.at):
            if observed.at - self.nudged.get(name, 0.0) < KWOK_STUCK_AFTER:
                continue
            self.nudged[name] = observed.at
            patch = {"metadata": {"annotations": {NUDGE_ANNOTATION: f"{observed.at:.0f}"}}}
            try:
                await asyncio.wait_for(client.patch(PODS, name, patch, NAMESPACE), 10)
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
                continue  # gone, or the API server is away: the next round looks again
            self.kwok_nudges += 1
            self.say(f"[{self.elapsed():5.0f}s] pod {name}: KWOK dropped its stage; nudged")

    def _note_jobset_delete(self, entry: AuditEntry) -> None:
        """The exact moment the driver's delete of a JobSet reached the API server."""
        if entry.resource != "jobsets" or entry.verb != "delete" or not entry.ok:
            return
        record = self.records.get(entry.name)
        if record is not None and entry.user_agent == DRIVER_AGENT and record.deleted_at is None:
            record.deleted_at = entry.received

    def _check_continuously(self) -> None:
        self.rounds += 1
        now = time.time()
        settled = [e for e in self.entries if now - e.time >= self.options.audit_lag]
        self.violate(*invariants.audit_violations(settled, self.records))
        self.violate(*self._snapshot_violations(settled))
        self.violate(*invariants.live_duplicate_jobs(self.observed.jobs))
        # A pod keeps the claims it was admitted with: a wrong one is wrong at once.
        self.violate(*invariants.pods_with_wrong_claims(self.observed.pods, self.records))
        unexplained = invariants.unexplained_claims(
            self.observed.claims, self.observed.jobsets, self.records
        )
        for name in list(self.unexplained_since):
            if name not in unexplained:
                del self.unexplained_since[name]
        for name, message in unexplained.items():
            since = self.unexplained_since.setdefault(name, now)
            if now - since >= self.options.claim_grace:
                self.violate(f"{message} (for {now - since:.0f}s)")

    def _snapshot_violations(self, entries: list[AuditEntry]) -> list[str]:
        taken = self.driver.snapshots.values() if self.driver is not None else ()
        return invariants.snapshot_violations(entries, self.records, taken, self.claim_objects)

    def _progress(self, replicas: Replicas) -> str:
        counts = jobset_counts(self.records)
        rss = ", ".join(f"{i} {v / MIB:.0f}" for i, v in sorted(replicas.sample_rss().items()))
        if self.restart.done:
            apiserver = "restarted"
        elif self.restart.stopping_at:
            apiserver = "DOWN"
        else:
            apiserver = "up"
        return (
            f"[{self.elapsed():5.0f}s] JobSets created {counts['created']}, finished "
            f"{counts['finished']}, deleted {counts['deleted']} | leader kills "
            f"{len(replicas.kills)} | kube-apiserver {apiserver} | RSS MiB {rss} | "
            f"violations {len(self.violations)}"
        )

    # ------------------------------------------------------------- the end

    def _settled(self) -> list[str]:
        """What still keeps the run from being quiet (empty: converged)."""
        observed = self.observed
        waiting = [f"the scenario of {n}" for n, t in self.scenarios.items() if not t.done()]
        if self.driver is not None:
            waiting += [
                f"the driver's marking of {self.driver.snapshots[uid].describe()}"
                for uid, task in self.driver.snapshot_tasks.items()
                if not task.done()
            ]
        waiting += invariants.not_terminal(observed.jobsets, self.records)
        waiting += invariants.stuck_deleting(observed.jobsets, self.records)
        waiting += list(
            invariants.unexplained_claims(observed.claims, observed.jobsets, self.records).values()
        )
        return waiting

    async def _quiesce(self, client: KubeClient, audit: AuditTail, deadline: float) -> bool:
        last_said = time.monotonic()
        while True:
            fresh = await self._observe(client, audit)
            waiting = self._settled() if fresh else ["the API server"]
            if not waiting:
                return True
            if time.monotonic() > deadline:
                self.say(f"quiesce timed out; still waiting for {len(waiting)}: {waiting[:3]}")
                return False
            if time.monotonic() - last_said > 10:
                last_said = time.monotonic()
                self.say(f"[{self.elapsed():5.0f}s] quiescing: waiting for {len(waiting)} "
                         f"(e.g. {waiting[0]})")  # fmt: skip
            await asyncio.sleep(1.0)

    async def _final(
        self, client: KubeClient, audit: AuditTail, driver: Driver, replicas: Replicas
    ) -> None:
        await asyncio.sleep(1.0)  # the audit log's last lines
        if not await self._observe(client, audit):
            self.violate("the API server did not answer the final listing")
            return
        observed = self.observed
        self.violate(*driver.errors)
        self.violate(
            *invariants.final_violations(
                self.entries,
                observed.jobsets,
                observed.jobs,
                observed.claims,
                self.records,
                observed.pods,
                driver.snapshots.values(),
                self.claim_objects,
            )
        )
        limit = int(self.options.rss_limit_mib * MIB)
        self.violate(*invariants.rss_exceeded(replicas.rss_peak, limit))
        if not self.restart.done:
            self.violate("kube-apiserver was not restarted (the run was too short?)")

    def _report(
        self, driver: Driver, replicas: Replicas, converged: bool, quiesce_seconds: float
    ) -> Report:
        restart = self.restart
        pod_scope_claims = {
            c.name for r in self.records.values() for c in r.claims if c.scope == "Pod"
        }
        return Report(
            seconds=self.options.seconds,
            wall_seconds=self.elapsed(),
            quiesce_seconds=quiesce_seconds,
            converged=converged,
            jobsets=jobset_counts(self.records),
            writes=write_counts(self.entries),
            leader_kills=[
                {"at": round(self.elapsed(k.at), 1), "identity": k.identity} for k in replicas.kills
            ],
            replica_exits=[
                {
                    "at": round(self.elapsed(e.at), 1),
                    "identity": e.identity,
                    "code": e.code,
                    "reason": e.reason,
                }
                for e in replicas.exits
            ],
            apiserver_restart=(
                {
                    "stopping_at": round(self.elapsed(restart.stopping_at), 1),
                    "stopped_at": round(self.elapsed(restart.stopped_at), 1),
                    "started_at": round(self.elapsed(restart.started_at), 1),
                    "ready_at": round(self.elapsed(restart.ready_at), 1),
                }
                if restart.done
                else {}
            ),
            rss_peak_mib={
                i: round(v / MIB, 1)
                for i, v in sorted(replicas.rss_peak.items(), key=lambda kv: (len(kv[0]), kv[0]))
            },
            rss_limit_mib=self.options.rss_limit_mib,
            driver_retries=driver.retries,
            checked={
                "continuous_rounds": self.rounds,
                "audit_entries": len(self.entries),
                "claim_deletes_judged": sum(
                    e.resource == "persistentvolumeclaims" and e.verb == "delete" and e.ok
                    for e in self.entries
                ),
                "impostor_claims": sum(len(r.impostors) for r in self.records.values()),
                "claims_lost": sum(len(r.losses) for r in self.records.values()),
                "losses_accepted": sum(len(r.opt_ins) for r in self.records.values()),
                "jobsets_at_end": len(self.observed.jobsets),
                "jobs_at_end": len(self.observed.jobs),
                "claims_at_end": len(self.observed.claims),
                "pod_scope_jobsets": sum(
                    any(c.scope == "Pod" for c in r.claims) for r in self.records.values()
                ),
                "pod_scope_claims_created": sum(
                    e.resource == "persistentvolumeclaims"
                    and e.verb == "create"
                    and e.code == 201
                    and e.name in pod_scope_claims
                    for e in self.entries
                ),
                "kwok_nudges": self.kwok_nudges,
                "pods_checked": len(self.pods_seen),
                "pod_scope_pods_checked": len(self.pod_scope_pods_seen),
                **self._snapshot_counts(driver),
            },
            controller_errors=_error_lines(replicas),
            logs=str(self.cluster.state_dir / "logs"),
            violations=list(self.violations),
        )

    def _snapshot_counts(self, driver: Driver) -> dict[str, int]:
        """What the snapshot invariant had to judge: the snapshots (made ready, failed on purpose,
        their claims seen kept), and the claim deletes by the controller under retention Snapshot
        that it checked against them (the claim seen Bound before)."""
        taken = list(driver.snapshots.values())
        checked = invariants.snapshot_delete_verdicts(
            self.entries, self.records, taken, self.claim_objects
        )
        required = 0
        index = invariants.claim_index(self.records)
        for name, history in invariants.claim_histories(self.entries).items():
            if name in index:
                record, plan = index[name]
                required += sum(
                    e.verb == "delete"
                    and by_controller(e)
                    and bool(invariants.snapshot_required(plan, record, e.time))
                    for e in history
                )
        return {
            "snapshot_jobsets": sum(
                any(SNAPSHOT in astuple(c.retention) for c in r.claims)
                for r in self.records.values()
            ),
            "snapshots_taken": len(taken),
            "snapshots_ready": sum(t.outcome == "ready" for t in taken),
            "snapshots_failed": sum(t.outcome == "failed" for t in taken),
            "failed_snapshot_claims_kept": sum(t.kept_checked for t in taken),
            "snapshot_claim_deletes_checked": len(checked),
            # Not seen Bound CACHE_LAG before the delete, or never listed: not judged.
            "snapshot_claim_deletes_not_judged": required - len(checked),
        }


def _error_lines(replicas: Replicas) -> dict[str, int]:
    """Error-level log lines per replica (information: errors are retried by design)."""
    counts = {}
    for replica in replicas.every:
        lines = replica.log_lines()
        counts[replica.identity] = sum(line.get("level") == "error" for line in lines)
    return counts


# ----------------------------------------------------------------------------- set-up


def _install_pod_scope_policy(cluster: LocalCluster) -> None:
    """The shipped MutatingAdmissionPolicy and binding, as docs/operations.md installs them."""
    cluster.kubectl("apply", "--server-side", "-k", str(POD_SCOPE_POLICY))


def _install_snapshot_crds(cluster: LocalCluster) -> None:
    """The VolumeSnapshot CRDs the node profile's CSI stack installs (the external-snapshotter's
    client module), before the replicas start: retention Snapshot needs the API served. No
    snapshot controller: the driver plays it."""
    crds = csi.snapshot_crds()
    for crd in crds:
        cluster.kubectl("create", "-f", str(crd))
    names = [f"crd/{csi.crd_name(path)}" for path in crds]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


def _create_namespace(cluster: LocalCluster) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE)
    deadline = time.monotonic() + 60
    while "serviceaccount/default" not in cluster.kubectl(
        "get", "serviceaccounts", "-n", NAMESPACE, "-o", "name"
    ):
        if time.monotonic() > deadline:
            raise LaunchError(f"no default ServiceAccount in namespace {NAMESPACE} within 60 s")
        time.sleep(0.3)


def run_soak(options: Options, say: Callable[[str], None] | None = None) -> Report:
    """The whole soak on a control plane of its own; the report is also written if asked."""
    report_to = say or (lambda line: print(line, file=sys.stderr, flush=True))
    began = time.time()
    with LocalCluster(options.state_dir, profile="full", report=report_to) as cluster:
        jobsetapi.install(cluster)
        _install_pod_scope_policy(cluster)
        _install_snapshot_crds(cluster)
        _create_namespace(cluster)
        report_to(
            f"soak: {options.seconds:.0f}s, a JobSet every {options.interval}s, leader killed "
            f"every {options.kill_min:.0f}-{options.kill_max:.0f}s, kube-apiserver down "
            f"{options.apiserver_down:.0f}s at {options.seconds / 2:.0f}s; logs in "
            f"{options.state_dir / 'logs'}"
        )
        engine = Engine(cluster, options, report_to)
        report = asyncio.run(engine.run())
    report.wall_seconds = time.time() - began
    if options.report_path is not None:
        report.write(options.report_path)
    return report


def summary_of(report: Report) -> str:
    return "\n".join(report.summary())


__all__ = ["DriverError", "Engine", "Options", "Report", "run_soak", "summary_of"]
