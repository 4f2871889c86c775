"""Authentication and authorization of ``/metrics`` requests by the API server.

The equivalent of controller-runtime's ``filters.WithAuthenticationAndAuthorization`` (what
upstream JobSet's secure metrics endpoint uses): the caller's bearer token is checked with a
``TokenReview`` (authentication.k8s.io/v1), then the user it names is checked with a
``SubjectAccessReview`` (authorization.k8s.io/v1) for the request's verb on the non-resource URL
(``get`` on ``/metrics``). RBAC: the controller needs ``create`` on both review resources, the
scraper a ClusterRole allowing ``get`` on the nonResourceURL ``/metrics``.

Answers are cached as controller-runtime's filter caches them: a token's review for 1 minute
(authenticated or not), an allowed access review for 5 minutes, a denied one for 30 seconds.
Errors (API server unreachable, the controller lacks the RBAC) are not cached and answer 500.
A scrape every 30 s by one Prometheus thus costs about two API requests per 5 minutes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from controller.runtime.client import KubeClient, Resource

log = structlog.get_logger("metrics-auth")

TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)

# controller-runtime's filter: DelegatingAuthenticatorConfig.CacheTTL (successes and failures)
# and DelegatingAuthorizerConfig.AllowCacheTTL / DenyCacheTTL; a 10 s timeout per review.
AUTHN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
REVIEW_TIMEOUT = 10.0
# Unauthenticated callers choose the tokens, so the caches are bounded.
MAX_ENTRIES = 4096


@dataclass(frozen=True)
class Decision:
    """The answer to one request: ``status`` 200 lets it through."""

    status: int
    message: str
    user: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class _User:
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


class _TtlCache:
    """Entries expire after their own TTL; beyond ``max_entries`` the oldest go first."""

    def __init__(self, clock: Callable[[], float], max_entries: int) -> None:
        self._clock = clock
        self._max = max_entries
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        return value

    def put(self, key: str, value: Any, ttl: float) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (self._clock() + ttl, value)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class MetricsAuthorizer:
    """Decides whether a request may read metrics; see the module docstring.

    ``client`` must not carry the leader fence: the reviews are POSTs, and a standby serves its
    metrics too.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        authn_ttl: float = AUTHN_TTL,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
        timeout: float = REVIEW_TIMEOUT,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.authn_ttl = authn_ttl
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.timeout = timeout
        self._tokens = _TtlCache(clock, max_entries)
        self._access = _TtlCache(clock, max_entries)

    async def check(self, authorization: str | None, method: str, path: str) -> Decision:
        token = bearer_token(authorization)
        if token is None:
            return Decision(401, "Unauthorized")
        try:
            user = await self._authenticate(token)
        except Exception as err:  # unreachable API server, missing RBAC, timeout, bad answer
            log.warning("token review failed", error=f"{type(err).__name__}: {err}")
            return Decision(500, "Authentication failed")
        if user is None:
            return Decision(401, "Unauthorized")
        verb = method.lower()
        try:
            allowed, reason = await self._authorize(user, verb, path)
        except Exception as err:
            log.warning(
                "subject access review failed", user=user.name, error=f"{type(err).__name__}: {err}"
            )
            return Decision(500, f"Authorization for user {user.name} failed", user.name)
        if not allowed:
            log.debug("metrics access denied", user=user.name, verb=verb, path=path, reason=reason)
            return Decision(403, f"Authorization denied for user {user.name}", user.name)
        return Decision(200, "ok", user.name)

    async def _authenticate(self, token: str) -> _User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None:
            user: _User | None = cached[0]
            return user
        review = {
            "apiVersion": TOKEN_REVIEWS.api_version,
            "kind": TOKEN_REVIEWS.kind,
            "spec": {"token": token},
        }
        async with asyncio.timeout(self.timeout):
            answer = await self.client.create(TOKEN_REVIEWS, review)
        status = answer.get("status") or {}
        found: _User | None = None
        if status.get("authenticated") is True:
            info = status.get("user") or {}
            extra = info.get("extra") or {}
            found = _User(
                name=str(info.get("username") or ""),
                uid=str(info.get("uid") or ""),
                groups=tuple(str(g) for g in info.get("groups") or []),
                extra=tuple(sorted((str(k), tuple(str(v) for v in vs)) for k, vs in extra.items())),
            )
        # A one-element tuple, so that "not authenticated" is cached too (None means a miss).
        self._tokens.put(key, (found,), self.authn_ttl)
        return found

    async def _authorize(self, user: _User, verb: str, path: str) -> tuple[bool, str]:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(vs) for k, vs in user.extra}
        key = json.dumps(spec, sort_keys=True)
        cached = self._access.get(key)
        if cached is not None:
            allowed_cached: tuple[bool, str] = cached
            return allowed_cached
        review = {
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "kind": SUBJECT_ACCESS_REVIEWS.kind,
            "spec": spec,
        }
        async with asyncio.timeout(self.timeout):
            answer = await self.client.create(SUBJECT_ACCESS_REVIEWS, review)
        status = answer.get("status") or {}
        allowed = status.get("allowed") is True and status.get("denied") is not True
        result = (allowed, str(status.get("reason") or ""))
        self._access.put(key, result, self.allow_ttl if allowed else self.deny_ttl)
        return result
