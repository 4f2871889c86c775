"""Which JobSets want a claim of a given name, so that a claim event reaches them (and only them).

A claim that blocks a JobSet (a conflict: another JobSet's claim, or a foreign one) does not carry
the blocked JobSet's name label, so its events cannot be mapped to that JobSet by label, and
there is no periodic resync: when such a claim went, the blocked JobSet was never looked at again.
The reconciler records here, per JobSet, the claim names it wants (it computes them anyway); the
claim event handler looks the claim's name up.

Owned by the reconciler (no global state); a JobSet's entry goes when the JobSet goes, is being
deleted, or is invalid. Cheap at 10,000 claims per JobSet: an unchanged set of names is compared,
not indexed again, and a change re-indexes only the names that differ.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.runtime.store import split_key


class WantedClaims:
    def __init__(self) -> None:
        self._names: dict[str, frozenset[str]] = {}  # JobSet key → claim names it wants
        self._keys: dict[tuple[str, str], set[str]] = {}  # (namespace, claim) → JobSet keys

    def want(self, key: str, names: Iterable[str]) -> None:
        """The JobSet ``key`` (namespace/name) wants exactly the claims ``names`` now."""
        new = frozenset(names)
        old = self._names.get(key, frozenset())
        if new == old:
            return
        namespace = split_key(key)[0] or ""
        for name in old - new:
            keys = self._keys.get((namespace, name))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._keys[(namespace, name)]
        for name in new - old:
            self._keys.setdefault((namespace, name), set()).add(key)
        if new:
            self._names[key] = new
        else:
            self._names.pop(key, None)

    def drop(self, key: str) -> None:
        """The JobSet ``key`` wants nothing (gone, being deleted, or invalid)."""
        self.want(key, ())

    def wanting(self, namespace: str, name: str) -> list[str]:
        """The keys of the JobSets that want the claim ``namespace/name``, sorted."""
        return sorted(self._keys.get((namespace, name), ()))
