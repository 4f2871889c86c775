"""Typed views of a cache's objects, each made at most once per stored object.

A reconcile pass reads the same cached objects again and again (a JobSet's Jobs on every event
of any of them); parsing each into a frozen view once per object version instead of on every
read keeps passes cheap and the decisions typed. A view is made when it is first read, not when
the object arrives: most versions of a Job or a claim (each status step of each) are replaced
before any pass reads them, and a view made for each would cost more than it saves. The cache's
event handler drops the view of an object that changed or went. A read returns the view of
exactly the object the cache holds (the store changes before its handlers are called).
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
        cache.add_handler(EventHandler(None, lambda _, new: self._drop(new), self._drop))

    def _drop(self, obj: Obj) -> None:
        self._views.pop(object_key(obj), None)

    def of(self, obj: Obj) -> T:
        """The view of ``obj``, an object of the cache: made on the first read of it."""
        key = object_key(obj)
        known = self._views.get(key)
        if known is not None and known[0] is obj:
            return known[1]
        made = self._view(obj)
        self._views[key] = (obj, made)
        return made

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
