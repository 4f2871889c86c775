"""A small dynamic Kubernetes client on top of kubernetes_asyncio's ApiClient.

Objects are plain JSON dicts, not generated models: the controller reads and writes custom
resources and only ever needs a handful of fields, and decoding every watch event into model
classes would cost more CPU than the rest of the controller. kubernetes_asyncio still does what
it does well: kubeconfig / in-cluster configuration, authentication, TLS, the HTTP session.

Added here, because kubernetes_asyncio has neither:
- client-side rate limiting (QPS + burst token bucket, like client-go's default limiter);
- ``rest_client_requests_total{code,method}`` (client-go's metric name);
- a *write guard*: a callable consulted for every mutating request, so that a replica that is no
  longer sure it holds the leader lease refuses to write (see leaderelection.py). It is asked
  when the request is made and again immediately before its first byte is sent, once the rate
  limiter's token and a pooled connection are in hand: either wait can outlast the guard (seconds
  under load), and only the last answer decides what the server sees;
- a field manager on every write, so writes can be audited by replica.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from aiohttp.connector import Connection
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry, Counter, Histogram
from yarl import URL

from controller.runtime.store import Obj

PatchType = Literal["merge", "json", "strategic", "apply"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: enough to build any URL for it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        return base


CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")  # how kubectl reads Events
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event")  # how the recorder writes them
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
JOBS = Resource("batch", "v1", "jobs", "Job")
PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
# The snapshots of retention Snapshot, and what restorePolicy restores from (the CRDs of the
# external-snapshotter project, installed in the cluster with a snapshot controller).
VOLUME_SNAPSHOTS = Resource("snapshot.storage.k8s.io", "v1", "volumesnapshots", "VolumeSnapshot")
VOLUME_GROUP_SNAPSHOTS = Resource(
    "groupsnapshot.storage.k8s.io", "v1", "volumegroupsnapshots", "VolumeGroupSnapshot"
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
STORAGE_CLASSES = Resource(
    "storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False
)
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False)
MUTATING_ADMISSION_POLICIES = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies",
    "MutatingAdmissionPolicy", namespaced=False,
)  # fmt: skip
MUTATING_ADMISSION_POLICY_BINDINGS = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings",
    "MutatingAdmissionPolicyBinding", namespaced=False,
)  # fmt: skip
VALIDATING_ADMISSION_POLICIES = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy", namespaced=False,
)  # fmt: skip
VALIDATING_ADMISSION_POLICY_BINDINGS = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding", namespaced=False,
)  # fmt: skip


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status object when there was one."""

    def __init__(self, status: int, body: Obj | None, method: str, path: str) -> None:
        self.status = status
        self.body = body or {}
        self.reason = str(self.body.get("reason", ""))
        self.message = str(self.body.get("message", "")) or f"HTTP {status}"
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410


class WriteRefused(Exception):
    """The write guard said no (this replica is not, or no longer surely, the leader)."""


# The write guard of the request this task is sending (None: not a write, or no guard). Set by
# KubeClient around the request, read by _FencedRequest.send in the same task.
_SENDING_GUARD: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "stateful_jobset_write_guard", default=None
)


class _FencedRequest(aiohttp.ClientRequest):
    """aiohttp's request, asking the write guard once a connection is ready and before any byte
    of the request is written: the last moment its answer can change what the server sees.

    A refusal raises out of ``send``; aiohttp then closes the fresh connection (no leak).
    """

    async def send(self, conn: Connection) -> aiohttp.ClientResponse:
        guard = _SENDING_GUARD.get()
        if guard is not None and not guard():
            raise WriteRefused(f"{self.method} {self.url.path} refused: not the leader")
        return await super().send(conn)


def _install_fence(api: ApiClient) -> None:
    """Make the API client's HTTP session build fenced requests (idempotent).

    kubernetes_asyncio creates its aiohttp session itself; ``_request_class`` is the session's
    ``request_class`` argument (one of the attributes aiohttp lets a caller set).
    """
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if not isinstance(session, aiohttp.ClientSession) or not hasattr(session, "_request_class"):
        raise TypeError("cannot fence writes: the API client has no aiohttp session")
    if not issubclass(session._request_class, _FencedRequest):
        session._request_class = _FencedRequest


def _settle_environment(api: ApiClient) -> bool:
    """Look the environment up once, not on every request, when it has nothing for the API
    server (the usual case). Returns whether per-request lookups were turned off.

    kubernetes_asyncio's session trusts the environment, so before each request aiohttp looks
    in two worker threads for ``~/.netrc`` credentials for the host (reading the file) and for a
    proxy in the environment: two thread hand-offs per request. The controller talks to one
    host; when neither lookup finds anything for it now, the session stops repeating them.
    When one does (a proxy, netrc credentials), nothing changes.
    """
    rest = getattr(api, "rest_client", None)
    session = getattr(rest, "pool_manager", None)
    host = getattr(getattr(api, "configuration", None), "host", None)
    if not isinstance(session, aiohttp.ClientSession) or not isinstance(host, str):
        return False
    if not session.trust_env or getattr(rest, "proxy", None):
        return False
    url = URL(host)
    if url.host is None:
        return False
    try:
        get_env_proxy_for_url(url)
    except LookupError:
        pass  # no proxy for this host: the only outcome that lets the lookups go
    else:
        return False
    if session._get_netrc_auth(url.host) is not None:
        return False
    session._trust_env = False
    return True


def decode(data: bytes | str) -> Any:
    """A JSON document (a response body, a watch event) as Python values.

    orjson, which decodes what the API server sends about twice as fast as ``json`` (measured
    in bench/HISTORY.md, "CPU cuts, second round"): the same values for every document the API
    server writes (its integers are 64-bit, its strings valid UTF-8, no NaN). Whatever orjson
    refuses that ``json`` reads (a lone surrogate escape, NaN, a float beyond double range) is
    read by ``json``, so both accept the same documents; ``ValueError`` when neither does.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


# Types orjson would write its own way that the library writes differently (or not at all): they
# go the library's way (``_encode``).
_ORJSON_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _encode(body: object, api: ApiClient) -> bytes:
    """A request body as JSON bytes.

    The controller's bodies are plain JSON (dicts, lists, strings, numbers, booleans, None):
    orjson writes them, several times faster than kubernetes_asyncio's way (rebuild the body
    with ``sanitize_for_serialization``, then ``json.dumps``), and the API server reads the same
    values. Anything else (a generated model, a datetime) goes the library's way.
    """
    try:
        return orjson.dumps(body, option=_ORJSON_PASSTHROUGH)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(api.sanitize_for_serialization(body)).encode()


class TokenBucket:
    """Client-side request limiter: ``qps`` tokens per second, at most ``burst`` saved up.

    ``acquire`` waits for a token. Waiters are served in arrival order (one lock), like
    client-go's flowcontrol token bucket limiter.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic):
        if qps <= 0 or burst <= 0:
            raise ValueError("qps and burst must be positive")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now

    async def acquire(self) -> None:
        async with self._lock:
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.qps)
                self._refill()
            self._tokens -= 1


class ClientMetrics:
    """client-go's REST client metrics, registered once per registry."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code and method.",
            ["code", "method"],
            registry=registry,
        )
        # Time spent waiting for the client-side QPS limit: non-zero means we throttle ourselves.
        self.rate_limiter_wait = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb.",
            ["verb"],
            buckets=(0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0),
            registry=registry,
        )
        # Labelled series by their labels, looked up once each (``labels()`` takes a lock and
        # builds a key on every call; a request would make two such calls).
        self._requests: dict[tuple[str, str], Counter] = {}
        self._waits: dict[str, Histogram] = {}

    def request(self, code: str, method: str) -> Counter:
        """The ``rest_client_requests_total`` series of ``code`` and ``method``."""
        found = self._requests.get((code, method))
        if found is None:
            found = self._requests[code, method] = self.requests.labels(code=code, method=method)
        return found

    def wait(self, verb: str) -> Histogram:
        """The ``rest_client_rate_limiter_duration_seconds`` series of ``verb``."""
        found = self._waits.get(verb)
        if found is None:
            found = self._waits[verb] = self.rate_limiter_wait.labels(verb=verb)
        return found


_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# How long a request other than a watch may go without a byte from the API server. The API server
# answers every such request within its own --request-timeout (60 s by default: a 504 at worst),
# so a silence longer than this is a connection that died without a reset (a host gone, a
# partition, a frozen process): without a limit the request would wait on it for the kernel's
# retransmission timeout, about 15 minutes, and hold its reconcile worker all that time.
REQUEST_READ_TIMEOUT = 70.0


class KubeClient:
    """Dict-in, dict-out access to any resource, rate limited and metered."""

    def __init__(
        self,
        api: ApiClient,
        *,
        qps: float = 50.0,
        burst: int = 100,
        field_manager: str = "stateful-jobset",
        metrics: ClientMetrics | None = None,
        write_guard: Callable[[], bool] | None = None,
        read_timeout: float = REQUEST_READ_TIMEOUT,
    ) -> None:
        self.api = api
        # Per read, not in total: a request waiting for a pooled connection is not at fault.
        self.request_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10, sock_read=read_timeout
        )
        self.limiter = TokenBucket(qps, burst)
        self.field_manager = field_manager
        self.metrics = metrics
        self.write_guard = write_guard
        if write_guard is not None:
            _install_fence(api)
        _settle_environment(api)

    def _refuse_unless_allowed(self, method: str, path: str) -> None:
        if method in _MUTATING and self.write_guard is not None and not self.write_guard():
            raise WriteRefused(f"{method} {path} refused: not the leader")

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: object | None = None,
        content_type: str = "application/json",
        request_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        # Asked three times: no point waiting for a token when already refused; after the token
        # wait; and, decisively, in _FencedRequest.send once a connection is ready.
        self._refuse_unless_allowed(method, path)
        waiting_since = time.monotonic()
        await self.limiter.acquire()
        if self.metrics:
            self.metrics.wait(method).observe(time.monotonic() - waiting_since)
        self._refuse_unless_allowed(method, path)
        query_params = [
            (k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()
        ]
        sending = _SENDING_GUARD.set(self.write_guard if method in _MUTATING else None)
        try:
            response = await self._request(
                method, path, query_params, body, content_type, request_timeout
            )
        except WriteRefused:
            raise  # nothing was sent
        except Exception:
            if self.metrics:
                self.metrics.request("<error>", method).inc()
            raise
        finally:
            _SENDING_GUARD.reset(sending)
        if self.metrics:
            self.metrics.request(str(response.status), method).inc()
        if response.status >= 300:
            text = await response.text()
            response.release()
            try:
                status_body = json.loads(text)
            except ValueError:
                status_body = {"message": text[:500]}
            raise ApiError(response.status, status_body, method, path)
        return response

    async def _request(
        self,
        method: str,
        path: str,
        query_params: list[tuple[str, str]],
        body: object | None,
        content_type: str,
        request_timeout: aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        """One request on kubernetes_asyncio's session, with its configuration's host, headers
        and credentials, as its ``call_api`` sends it, without the generic work around it
        (parameter sanitising, body rebuilding, ``json.dumps``): about 8 % of the controller's
        CPU under load went to that (bench/HISTORY.md, "Results (2026-12-01, evening ...)")."""
        api = self.api
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        headers.update(api.default_headers)
        if api.cookie:
            headers["Cookie"] = api.cookie
        # The bearer token, refreshed as the library does (in-cluster tokens rotate).
        await api.update_params_for_auth(headers, query_params, ["BearerToken"])
        url = f"{api.configuration.host}{path}"
        if query_params:
            url += "?" + urlencode(query_params)
        rest = api.rest_client
        extra: dict[str, Any] = {}
        if rest.proxy:
            extra["proxy"] = rest.proxy
        if rest.proxy_headers:
            extra["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            extra["server_hostname"] = rest.server_hostname
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method,
            url,
            headers=headers,
            data=None if body is None else _encode(body, api),
            timeout=request_timeout or self.request_timeout,
            **extra,
        )
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> Obj:
        response = await self._send(method, path, **kwargs)
        async with response:
            body = await response.read()
            # An empty body reads as None, as aiohttp's ``response.json()`` has it.
            found: Any = decode(body) if body.strip() else None
            result: Obj = found
            return result

    def _write_query(self, extra: Mapping[str, str | int | bool] | None = None) -> dict[str, Any]:
        query: dict[str, Any] = {"fieldManager": self.field_manager}
        query.update(extra or {})
        return query

    # ---------------------------------------------------------------- reads

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return await self._json("GET", resource.path(namespace, name))

    async def get_path(self, path: str) -> Obj:
        """A path that is not a resource's, e.g. ``/version``."""
        return await self._json("GET", path)

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        query: dict[str, str | int | bool] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if limit:
            query["limit"] = limit
        if continue_token:
            query["continue"] = continue_token
        if resource_version is not None:
            query["resourceVersion"] = resource_version
        return await self._json("GET", resource.path(namespace), query=query)

    @asynccontextmanager
    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a watch; yields an iterator over the raw event lines (one JSON object each)."""
        query: dict[str, str | int | bool] = {
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        if label_selector:
            query["labelSelector"] = label_selector
        # No total timeout: the server ends the stream after timeoutSeconds. A read timeout
        # somewhat longer than that catches a silently dead connection.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30)
        response = await self._send(
            "GET", resource.path(namespace), query=query, request_timeout=timeout
        )
        async with response:
            yield _lines(response)

    # --------------------------------------------------------------- writes

    async def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        return await self._json(
            "POST", resource.path(namespace), body=obj, query=self._write_query()
        )

    async def replace(
        self, resource: Resource, obj: Obj, namespace: str | None = None, *, subresource: str = ""
    ) -> Obj:
        path = resource.path(namespace, obj["metadata"]["name"])
        if subresource:
            path += f"/{subresource}"
        return await self._json("PUT", path, body=obj, query=self._write_query())

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: object,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str = "",
        force: bool = False,
    ) -> Obj:
        path = resource.path(namespace, name)
        if subresource:
            path += f"/{subresource}"
        extra: dict[str, str | int | bool] = {"force": True} if force else {}
        return await self._json(
            "PATCH",
            path,
            body=patch,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
            query=self._write_query(extra),
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str | None = None,
        precondition_uid: str | None = None,
        precondition_resource_version: str | None = None,
    ) -> Obj:
        """Deletes the object; with preconditions, only if it still has that uid (and that
        resourceVersion): 409 Conflict otherwise."""
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation:
            options["propagationPolicy"] = propagation
        preconditions = {"uid": precondition_uid, "resourceVersion": precondition_resource_version}
        if any(preconditions.values()):
            options["preconditions"] = {k: v for k, v in preconditions.items() if v}
        return await self._json("DELETE", resource.path(namespace, name), body=options)


class LineSplitter:
    """A chunked watch stream cut into its lines (one JSON event each), whatever their length.

    (aiohttp's readline() refuses lines above its buffer limit; big objects exceed it.) A chunk
    holding many events is cut by index, and a line spread over many chunks is joined once, when
    it is whole: each byte is copied at most twice. (Adding each chunk to a growing buffer, and
    splitting the rest off after each line, copied it again at every chunk and every line.)
    """

    def __init__(self) -> None:
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines that ``chunk`` completes, blank ones left out."""
        lines = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            line = chunk[start:end]
            if self._partial:
                self._partial.append(line)
                line = b"".join(self._partial)
                self._partial.clear()
            if line and not line.isspace():
                lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._partial.append(chunk[start:] if start else chunk)
        return lines

    def rest(self) -> bytes | None:
        """What the stream ended with after its last newline, if anything but blanks."""
        line = b"".join(self._partial)
        self._partial.clear()
        return line if line and not line.isspace() else None


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The lines of a watch stream (``LineSplitter``)."""
    splitter = LineSplitter()
    async for chunk in response.content.iter_any():
        for line in splitter.feed(chunk):
            yield line
    rest = splitter.rest()
    if rest is not None:
        yield rest
