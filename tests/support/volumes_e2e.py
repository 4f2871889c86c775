"""Volume end-to-end helpers: the controller as its own process, claims, pods, Events.

Shared by the e2e volume tests (tests/e2e/test_volumes_e2e.py, test_volume_expansion.py); the
fixtures that use them (``client``, ``controller``) are in tests/e2e/conftest.py.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from controller.jobset import api
from controller.jobset.quantity import parse_quantity
from controller.runtime.client import CLAIMS, PODS, ApiError, KubeClient, Resource
from tests.helpers import Kube, wait_for
from tests.support.examples import EXAMPLES
from tests.support.jobsets import (
    jobs_of,
    jobset,
    replicated_job,
    wait_condition,
    with_pod_annotations,
)
from tests.support.replicas import Replica, start_replica

Obj = dict[str, Any]

VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
RUN_DURATION = "localcluster.test/run-duration"
EXIT_CODE = "localcluster.test/exit-code"
# Every ApiError the reconciler raises is logged with its traceback ("reconcile failed; will
# retry with backoff"). A 409 on a status write (optimistic concurrency: the cache was stale) is
# the documented, expected way of retrying; anything else must be allowed by the test.
EXPECTED_ERRORS = (": 409 Conflict:",)


# ----------------------------------------------------------------------------- the controller


@dataclass
class ControllerProcesses:
    """The controller for one namespace; each ``start`` is a new replica (a new identity)."""

    kubeconfig: Path
    namespace: str
    log_dir: Path
    lease: str
    replicas: list[Replica] = field(default_factory=list)

    def start(self) -> Replica:
        replica = start_replica(
            self.kubeconfig,
            self.namespace,
            f"jobset-controller-{len(self.replicas)}",
            self.log_dir,
            lease_name=self.lease,
            module="controller",
        )
        self.replicas.append(replica)
        return replica

    def kill(self) -> None:
        """kill -9 the current replica."""
        self.replicas[-1].process.kill()

    def unexpected_errors(self, *allowed: str) -> list[str]:
        """Tracebacks in every replica's log whose exception is not one of ``allowed``."""
        found = []
        for replica in self.replicas:
            text = replica.process.log_path.read_text(errors="replace")
            for line in replica.log_lines():
                exception = str(line.get("exception") or "")
                if not exception:
                    continue
                last = exception.strip().splitlines()[-1]
                if not any(a in last for a in (*EXPECTED_ERRORS, *allowed)):
                    found.append(f"{replica.identity}: {line.get('msg')}: {last}")
            # Tracebacks outside the JSON log lines (a crash, the standard logging module).
            for raw in text.splitlines():
                if "Traceback" in raw and not raw.startswith("{"):
                    found.append(f"{replica.identity}: {raw}")
        return found

    def assert_clean(self, *allowed: str) -> None:
        errors = self.unexpected_errors(*allowed)
        logs = ", ".join(str(r.process.log_path) for r in self.replicas)
        assert not errors, f"unexpected errors in the controller log ({logs}):\n" + "\n".join(
            errors
        )


@asynccontextmanager
async def controller_processes(
    kube: Kube, namespace: str, client: KubeClient, log_dir: Path
) -> AsyncIterator[ControllerProcesses]:
    """One controller replica for ``namespace``; killed at the end, and the retention finalizer
    taken off what is left (without the controller it would keep the namespace Terminating)."""
    processes = ControllerProcesses(
        kube.cluster.kubeconfig, namespace, log_dir, f"jobset-volumes-{uuid.uuid4().hex[:6]}"
    )
    processes.start()
    try:
        yield processes
    finally:
        for replica in processes.replicas:
            replica.process.kill()
        for js in (await client.list(api.JOBSETS, namespace))["items"]:
            if js["metadata"].get("finalizers"):
                try:
                    await client.patch(
                        api.JOBSETS,
                        js["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                        namespace,
                    )
                except ApiError as err:
                    if not err.not_found:
                        raise


# ----------------------------------------------------------------------------- helpers


def example(name: str) -> Obj:
    loaded: Obj = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def quantity(value: Any) -> Decimal:
    return parse_quantity(str(value))


def pod_claims(pod_spec: Obj) -> dict[str, str]:
    """Pod volume name -> claim name of a pod spec's claim volumes."""
    return {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod_spec.get("volumes") or []
        if "persistentVolumeClaim" in v
    }


def job_claims(job: Obj) -> dict[str, str]:
    return pod_claims(job["spec"]["template"]["spec"])


def phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def mounting(rjob: Obj, volume: str, path: str = "/data") -> Obj:
    for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
        container.setdefault("volumeMounts", []).append({"name": volume, "mountPath": path})
    return rjob


def claim_template(name: str, storage: str = "1Gi", storage_class: str | None = None) -> Obj:
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name}, "spec": spec}


async def find(
    kube: KubeClient, resource: Resource, name: str, namespace: str | None
) -> Obj | None:
    """The object, or None when it does not exist."""
    try:
        return await kube.get(resource, name, namespace)
    except ApiError as err:
        if err.not_found:
            return None
        raise


async def wait_exists(
    kube: KubeClient, resource: Resource, name: str, namespace: str | None, seconds: float = 60
) -> Obj:
    found = await wait_for(
        lambda: find(kube, resource, name, namespace),
        lambda obj: obj is not None,
        f"{resource.kind} {name} to exist",
        seconds=seconds,
    )
    assert found is not None
    return found


async def wait_gone(
    kube: KubeClient, resource: Resource, name: str, namespace: str | None, seconds: float = 60
) -> None:
    await wait_for(
        lambda: find(kube, resource, name, namespace),
        lambda obj: obj is None,
        f"{resource.kind} {name} to be gone",
        seconds=seconds,
    )


async def wait_claim_phase(
    kube: KubeClient, namespace: str, name: str, wanted: str = "Bound", seconds: float = 60
) -> Obj:
    found = await wait_for(
        lambda: find(kube, CLAIMS, name, namespace),
        lambda obj: phase(obj) == wanted,
        f"claim {name} to be {wanted}",
        seconds=seconds,
    )
    assert found is not None
    return found


# The JobSet once a condition holds; e2e runs are slower, so a longer default timeout.
wait_jobset = functools.partial(wait_condition, seconds=90)


async def pods_of(kube: KubeClient, namespace: str, name: str, extra: str = "") -> list[Obj]:
    selector = f"{api.JOBSET_NAME}={name}" + (f",{extra}" if extra else "")
    listed = await kube.list(PODS, namespace, label_selector=selector)
    return sorted(listed["items"], key=lambda p: p["metadata"]["name"])


async def wait_running_pods(
    kube: KubeClient, namespace: str, name: str, count: int, extra: str = ""
) -> list[Obj]:
    async def running() -> list[Obj]:
        return [p for p in await pods_of(kube, namespace, name, extra) if phase(p) == "Running"]

    return await wait_for(
        running, lambda pods: len(pods) == count, f"{count} running pods of JobSet {name}"
    )


async def live_jobs(
    kube: KubeClient, namespace: str, name: str, attempt: int | None = None
) -> list[Obj]:
    return [
        j
        for j in await jobs_of(kube, namespace, name)
        if not j["metadata"].get("deletionTimestamp")
        and (attempt is None or j["metadata"]["labels"].get(api.RESTART_ATTEMPT) == str(attempt))
    ]


async def wait_live_jobs(
    kube: KubeClient, namespace: str, name: str, count: int, attempt: int | None = None
) -> list[Obj]:
    what = f"{count} Jobs of JobSet {name}" + ("" if attempt is None else f" (attempt {attempt})")
    return await wait_for(
        lambda: live_jobs(kube, namespace, name, attempt),
        lambda jobs: len(jobs) == count,
        what,
        seconds=60,
    )


@dataclass(frozen=True)
class Recorded:
    type: str
    reason: str
    message: str
    count: int


async def events_of(kube: Kube, namespace: str, name: str) -> list[Recorded]:
    """core/v1 Events about the JobSet ``name``."""
    listed = await kube.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind={api.KIND},involvedObject.name={name}"
    )
    return [
        # Written through events.k8s.io: a repeat counts in series, the deprecated count is unset.
        Recorded(
            e.type or "",
            e.reason or "",
            e.message or "",
            int((e.series.count if e.series else None) or e.count or 1),
        )
        for e in listed.items
    ]


async def wait_event(
    kube: Kube,
    namespace: str,
    name: str,
    reason: str,
    *,
    event_type: str = "Normal",
    contains: str = "",
    seconds: float = 60,
) -> Recorded:
    def match(events: list[Recorded]) -> Recorded | None:
        return next(
            (
                e
                for e in events
                if e.reason == reason and e.type == event_type and contains in e.message
            ),
            None,
        )

    events = await wait_for(
        lambda: events_of(kube, namespace, name),
        lambda found: match(found) is not None,
        f"a {event_type} Event {reason} on JobSet {name}"
        + (f" mentioning {contains!r}" if contains else ""),
        seconds=seconds,
    )
    found = match(events)
    assert found is not None
    return found


def template_status(obj: Obj, template: str) -> Obj:
    entries = ((obj.get("status") or {}).get("volumes") or {}).get("templates") or []
    return next((dict(e) for e in entries if e.get("name") == template), {})


# ----------------------------------------------------------------------------- expansion


def growing_jobset(name: str, storage_class: str) -> Obj:
    trainer = mounting(
        with_pod_annotations(replicated_job("trainer", 1), **{RUN_DURATION: "8s"}), "data"
    )
    return jobset(
        name,
        trainer,
        volumeClaimPolicies=[{"templates": [claim_template("data", "1Gi", storage_class)]}],
    )


async def raise_storage(kube: KubeClient, namespace: str, name: str, value: str) -> None:
    path = "/spec/volumeClaimPolicies/0/templates/0/spec/resources/requests/storage"
    await kube.patch(
        api.JOBSETS,
        name,
        [{"op": "replace", "path": path, "value": value}],
        namespace,
        patch_type="json",
    )


def capacity(claim: Obj | None) -> Decimal:
    value = (((claim or {}).get("status") or {}).get("capacity") or {}).get("storage")
    return quantity(value) if value is not None else Decimal(0)
