"""Upstream JobSet's manager as a local process against a ``LocalCluster``.

For ``make bench-compare`` and for the tests that run upstream's manager before this controller
(migrating JobSets from upstream). The manager is ``localcluster/upstream.py``'s build (the Go
module proxy's release) and runs as upstream's Deployment would, minus the parts a local process
has no use for:

- the cluster's admin kubeconfig (so none of upstream's RBAC is needed; its User-Agent stays
  upstream's, ``jobset/<version> ...``, for the audit log);
- a config file: no leader election unless asked (``leader_election_namespace``: then upstream's
  default Lease, ``6d4f6a47.jobset.x-k8s.io``, in that namespace, as in its install), internal
  certificate management off, the webhook server on a free port with a serving certificate from
  the cluster's CA (``pki.issue_serving``), metrics and health probes on free ports;
- **by default no webhook is registered with the API server**: neither upstream's JobSet
  defaulting and validating webhooks nor its pod webhooks run. Its controller relies on what its
  defaulting webhook sets (it panics on a JobSet without ``spec.network``), so callers create
  JobSets pre-defaulted: ``defaulted`` applies upstream's defaulting (v0.12.0's
  ``jobSetWebhook.Default``) to a JobSet, and nothing validates them but the CRD's schema.
  Upstream's pod webhook only acts on exclusive placement (and the priority label that goes with
  it): such JobSets place their pods differently here.
- ``webhooks=True`` registers them as upstream's install does (``webhook_configurations``: its
  ``config/components/webhook`` with the patches and the ``jobset-`` name prefix of its
  ``config/default``), called by URL on the local process, once it is ready; they go before the
  process does (a webhook with ``failurePolicy: Fail`` and nobody answering refuses every JobSet
  write, and the create of every pod of a JobSet).

``install_crd`` applies upstream's CRD as a user's ``kubectl apply --server-side`` does (field
manager ``kubectl``): on a cluster without a JobSet CRD, a later ``kubectl apply --server-side``
of this project's CRD (``jobsetapi.install``) replaces it field for field, as in a migration.
``running`` / ``running_async`` install the CRD, start the manager, wait until its readiness probe
answers (its webhook server listens: the controllers are set up by then) and stop it on exit,
raising with its log's tail if it exited meanwhile; ``UpstreamManager`` is the same in steps (the
benchmark configures it before it starts it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from localcluster import jobsetapi
from localcluster import pki as pkimod
from localcluster.controlplane import ControlPlane
from localcluster.processes import LaunchError, ManagedProcess, free_port, https_get, wait_ready
from localcluster.upstream import UpstreamBuild, ensure_upstream

Obj = dict[str, Any]
NAME = "upstream-jobset"
CONFIG_API = "config.jobset.x-k8s.io/v1alpha1"
READY_TIMEOUT = 120.0
# Upstream's install (config/default: namePrefix jobset-, namespace jobset-system).
NAMESPACE = "jobset-system"
MUTATING = "jobset-mutating-webhook-configuration"
VALIDATING = "jobset-validating-webhook-configuration"
LEASE = "6d4f6a47.jobset.x-k8s.io"


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def install_crd(cluster: ControlPlane, build: UpstreamBuild) -> None:
    """Apply upstream's CRD (``kubectl apply --server-side``) and wait until it is Established.
    Meant for a cluster without a JobSet CRD: a CRD another field manager applied there makes
    this fail with a conflict rather than merge two schemas."""
    cluster.kubectl("apply", "--server-side", "-f", str(build.crd))
    jobsetapi.wait_established(cluster)


def defaulted(jobset: Obj) -> Obj:
    """A copy of ``jobset`` with what upstream's defaulting webhook (v0.12.0) sets when absent:
    success policy ``All``, startup policy ``AnyOrder``, each Job template Indexed with pods
    ``restartPolicy: OnFailure``, DNS hostnames on and not-ready addresses published, failure
    policy rules named ``failurePolicyRule<i>``, claim policies retained with ``whenDeleted:
    Delete``. Without them (measured on v0.12.0): no ``network``, its reconcile panics (recovered,
    retried) before it creates anything; no ``successPolicy``, it panics once a Job succeeds; no
    pod ``restartPolicy``, the API server refuses its Jobs (a Job's pods may not be ``Always``).
    Without ``completionMode`` its Jobs are NonIndexed, without ``retentionPolicy`` its claims
    have no owner."""
    out = copy.deepcopy(jobset)
    spec = out.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.get("network")
    if network is None:
        network = spec["network"] = {}
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    for policy in spec.get("volumeClaimPolicies") or []:
        if policy.get("retentionPolicy") is None:
            policy["retentionPolicy"] = {"whenDeleted": "Delete"}
    return out


def webhook_configurations(build: UpstreamBuild, base_url: str, ca_bundle: str) -> list[Obj]:
    """Upstream's webhook configurations as its install makes them, calling ``base_url``: its
    ``config/components/webhook/manifests.yaml`` with its kustomization's patches (they replace
    each pod webhook, ``/webhooks/1``, with one that selects the pods of JobSets by label) and its
    ``jobset-`` name prefix."""
    folder = build.webhooks.parent
    patches = {
        "MutatingWebhookConfiguration": folder / "patches/mutating-patch.yaml",
        "ValidatingWebhookConfiguration": folder / "patches/validating-patch.yaml",
    }
    out = []
    for doc in yaml.safe_load_all(build.webhooks.read_text()):
        if not doc:
            continue
        hooks = copy.deepcopy(doc["webhooks"])
        for op in yaml.safe_load(patches[doc["kind"]].read_text()):
            assert op["op"] == "replace" and op["path"].startswith("/webhooks/"), op
            hooks[int(op["path"].rsplit("/", 1)[1])] = op["value"]
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": ca_bundle}
        name = MUTATING if doc["kind"] == "MutatingWebhookConfiguration" else VALIDATING
        out.append({**doc, "metadata": {"name": name}, "webhooks": hooks})
    return out


# A JobSet upstream's defaulting webhook completes (completionMode Indexed): created with
# dryRun, it shows that the API server calls the webhooks.
_WEBHOOK_PROBE: Obj = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "upstream-webhook-probe", "namespace": "default"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "probe",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "probe", "image": "busybox"}],
                            }
                        }
                    }
                },
            }
        ]
    },
}


@dataclass
class UpstreamManager:
    """Upstream's manager for one cluster, configured on construction (ports, certificate, config
    file under ``directory``) and not started: ``start`` / ``start_async``, ``stop`` /
    ``stop_async``. It is not one of the cluster's processes (``cluster.pids()``, which the
    benchmark counts as the cluster's work, does not list it); it dies with this process
    (``PR_SET_PDEATHSIG``) if nobody stops it."""

    cluster: ControlPlane
    build: UpstreamBuild
    directory: Path
    args: Sequence[str] = ()
    report: Callable[[str], None] = _stderr
    # Register upstream's webhooks with the API server once the manager is ready.
    webhooks: bool = False
    # Leader election on, its Lease (upstream's default id) in this namespace (made if missing).
    leader_election_namespace: str | None = None
    webhook_port: int = field(init=False)
    metrics_port: int = field(init=False)
    health_port: int = field(init=False)
    config_file: Path = field(init=False)
    process: ManagedProcess = field(init=False)

    def __post_init__(self) -> None:
        self.webhook_port, self.metrics_port, self.health_port = (free_port() for _ in range(3))
        certs = self.directory / "certs"
        pkimod.issue_serving(self.cluster.pki, certs, "jobset-webhook-service")
        self.config_file = self.directory / "config.yaml"
        self.config_file.write_text(json.dumps(self.configuration(certs), indent=2) + "\n")
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        argv = [str(self.build.manager), f"--config={self.config_file}", *self.args]
        log = self.cluster.state_dir / "logs" / f"{NAME}.log"
        self.process = ManagedProcess(NAME, argv, log, env=env)

    def configuration(self, certs: Path) -> Obj:
        election: Obj = {"leaderElect": False}
        if self.leader_election_namespace:
            election = {"leaderElect": True, "resourceNamespace": self.leader_election_namespace}
        return {
            "apiVersion": CONFIG_API,
            "kind": "Configuration",
            "leaderElection": election,
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}", "certDir": str(certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
        }

    def ready(self) -> tuple[int, str]:
        """Its readiness probe: 200 once its webhook server listens (after the controllers are
        set up; its caches may still be syncing, which delays, not loses, a reconcile)."""
        return https_get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2)

    def _prepare(self) -> None:
        """The Lease's namespace, before the manager starts electing."""
        if self.leader_election_namespace:
            namespace = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": self.leader_election_namespace},
            }
            self.cluster.kubectl(
                "apply", "--server-side", "-f", "-", input_text=json.dumps(namespace)
            )

    def register_webhooks(self, within: float = 60.0) -> None:
        """Register upstream's webhook configurations and wait until the API server calls them
        (a dry-run create comes back defaulted by upstream's webhook)."""
        ca_bundle = base64.b64encode(self.cluster.pki.ca_cert.read_bytes()).decode()
        base_url = f"https://127.0.0.1:{self.webhook_port}"
        objects = webhook_configurations(self.build, base_url, ca_bundle)
        self.cluster.kubectl(
            "apply", "--server-side", "-f", "-", input_text=yaml.safe_dump_all(objects)
        )
        deadline = time.monotonic() + within
        while True:
            probe = json.dumps(_WEBHOOK_PROBE)
            try:
                made = json.loads(
                    self.cluster.kubectl(
                        "create", "--dry-run=server", "-o", "json", "-f", "-", input_text=probe
                    )
                )
                rjob = made["spec"]["replicatedJobs"][0]["template"]["spec"]
                if rjob.get("completionMode") == "Indexed":
                    return
            except LaunchError:
                pass
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"the API server does not call {NAME}'s webhooks {within:.0f}s after they "
                    f"were registered. Last lines of {self.process.log_path}:\n"
                    f"{self.process.log_tail(30)}"
                )
            time.sleep(0.2)

    def remove_webhooks(self) -> None:
        """Delete upstream's webhook configurations (before the manager stops)."""
        self.cluster.kubectl(
            "delete",
            "--ignore-not-found",
            f"mutatingwebhookconfiguration/{MUTATING}",
            f"validatingwebhookconfiguration/{VALIDATING}",
        )

    def start(self, within: float = READY_TIMEOUT) -> None:
        """Start it (from the main thread) and wait until ``ready``; LaunchError with its log's
        tail if it exits or is not ready ``within`` seconds."""
        started = time.monotonic()
        self._prepare()
        self.process.start()
        try:
            wait_ready(self.process, self.ready, timeout=within, report=self.report)
            if self.webhooks:
                self.register_webhooks()
        except BaseException:
            self.stop()
            raise
        self._started(started)

    async def start_async(self, within: float = READY_TIMEOUT) -> None:
        """``start`` without blocking the event loop while it waits."""
        started = time.monotonic()
        await asyncio.to_thread(self._prepare)
        self.process.start()  # here, on the loop's (main) thread: see ManagedProcess.start
        try:
            while True:
                self.check_running()
                if (await asyncio.to_thread(self.ready))[0] == 200:
                    break
                if time.monotonic() - started > within:
                    raise LaunchError(
                        f"{NAME} did not become ready within {within:.0f}s. Last lines of "
                        f"{self.process.log_path}:\n{self.process.log_tail(30)}"
                    )
                await asyncio.sleep(0.2)
            if self.webhooks:
                await asyncio.to_thread(self.register_webhooks)
        except BaseException:
            await self.stop_async()
            raise
        self._started(started)

    def _started(self, since: float) -> None:
        self.report(
            f"  {NAME} {self.build.ref} ready in {time.monotonic() - since:.1f}s "
            f"(pid {self.process.pid}, log {self.process.log_path})"
        )

    def running(self) -> bool:
        return self.process.running()

    def check_running(self) -> None:
        """LaunchError with its log's tail if it was started and has exited."""
        popen = self.process.popen
        if popen is not None and popen.poll() is not None:
            raise LaunchError(
                f"{NAME} exited with code {popen.returncode}. Last lines of "
                f"{self.process.log_path}:\n{self.process.log_tail(30)}"
            )

    def stop(self) -> None:
        """Its webhook configurations (if registered) first, then the process: SIGTERM, SIGKILL
        after 10 s; nothing if it is not running."""
        if self.webhooks:
            self.remove_webhooks()
        self.process.stop()

    async def stop_async(self) -> None:
        await asyncio.to_thread(self.stop)


def _manager(
    cluster: ControlPlane,
    build: UpstreamBuild | None,
    directory: Path | None,
    args: Sequence[str],
    report: Callable[[str], None] | None,
    webhooks: bool = False,
    leader_election_namespace: str | None = None,
) -> UpstreamManager:
    say = report or _stderr
    built = build or ensure_upstream(say)
    where = directory or cluster.state_dir / NAME
    return UpstreamManager(
        cluster,
        built,
        where,
        args=args,
        report=say,
        webhooks=webhooks,
        leader_election_namespace=leader_election_namespace,
    )


@contextlib.contextmanager
def running(
    cluster: ControlPlane,
    build: UpstreamBuild | None = None,
    *,
    directory: Path | None = None,
    args: Sequence[str] = (),
    install: bool = True,
    report: Callable[[str], None] | None = None,
) -> Iterator[UpstreamManager]:
    """Upstream's manager running against ``cluster`` for the block: its CRD installed (unless
    ``install`` is false), started and ready on entry, stopped on exit. Raises LaunchError with
    its log's tail if it exits while starting, or if it exited during the block (when the block
    itself did not raise). ``build``: ``ensure_upstream()`` by default (built if not cached)."""
    manager = _manager(cluster, build, directory, args, report)
    if install:
        install_crd(cluster, manager.build)
    manager.start()
    try:
        yield manager
        manager.check_running()
    finally:
        manager.stop()


@contextlib.asynccontextmanager
async def running_async(
    cluster: ControlPlane,
    build: UpstreamBuild | None = None,
    *,
    directory: Path | None = None,
    args: Sequence[str] = (),
    install: bool = True,
    report: Callable[[str], None] | None = None,
    webhooks: bool = False,
    leader_election_namespace: str | None = None,
) -> AsyncIterator[UpstreamManager]:
    """``running`` for async code: the build, the CRD's installation, the wait and the stop do
    not block the event loop (a controller running in it, say). ``webhooks`` and
    ``leader_election_namespace``: as ``UpstreamManager``'s."""
    manager = await asyncio.to_thread(
        _manager,
        cluster,
        build,
        directory,
        args,
        report,
        webhooks,
        leader_election_namespace,
    )
    if install:
        await asyncio.to_thread(install_crd, cluster, manager.build)
    await manager.start_async()
    try:
        yield manager
        manager.check_running()
    finally:
        await manager.stop_async()
