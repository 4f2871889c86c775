"""Typed views of a cache's objects, each made once, when the informer stores the object.

A reconcile pass reads the same cached objects again and again (a JobSet's Jobs on every event
of any of them); parsing each into a frozen view once per object version, in the cache's event
handler, instead of on every read, keeps passes cheap and the decisions typed. A read returns
the view of exactly the object the cache holds: an object whose handler has not run yet (the
store changes before its handlers are called) is viewed on the spot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from controller.runtime.informer import EventHandler
from controller.runtime.manager import Cache
from controller.runtime.store import Obj, object_key

T = TypeVar("T")


class Views(Generic[T]):
    """``view(obj)`` of every object of ``cache``, kept current by its events."""

    def __init__(self, cache: Cache, view: Callable[[Obj], T]) -> None:
        self._cache = cache
        self._view = view
        self._views: dict[str, tuple[Obj, T]] = {}
        cache.add_handler(EventHandler(self._store, lambda _, new: self._store(new), self._drop))

    def _store(self, obj: Obj) -> None:
        self._views[object_key(obj)] = (obj, self._view(obj))

    def _drop(self, obj: Obj) -> None:
        self._views.pop(object_key(obj), None)

    def of(self, obj: Obj) -> T:
        """The view of ``obj``, an object of the cache."""
        known = self._views.get(object_key(obj))
        return known[1] if known is not None and known[0] is obj else self._view(obj)

    def by_index(self, index: str, value: str) -> list[T]:
        """``cache.by_index``, as views."""
        return [self.of(obj) for obj in self._cache.by_index(index, value)]

    def get(self, namespace: str | None, name: str) -> T | None:
        """``cache.get``, as a view."""
        found = self._cache.get(namespace, name)
        return None if found is None else self.of(found)


class Summary(Generic[T]):
    """One view of all of a cache's objects (``summarise(items)``), made again only after the
    cache changed: for small caches read whole by every pass (storage classes)."""

    def __init__(self, cache: Cache, summarise: Callable[[list[Obj]], T]) -> None:
        self._cache = cache
        self._summarise = summarise
        self._current: T | None = None
        cache.add_handler(
            EventHandler(self._invalidate, lambda _, __: self._invalidate(None), self._invalidate)
        )

    def _invalidate(self, _: Obj | None) -> None:
        self._current = None

    def get(self) -> T:
        if self._current is None:
            self._current = self._summarise(self._cache.items())
        return self._current
