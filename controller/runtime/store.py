"""An in-memory object store with indexes: the informer's cache.

Keys are ``namespace/name`` (or ``name`` for cluster-scoped objects), like client-go's
MetaNamespaceKeyFunc. Indexers map an object to index values; ``by_index`` answers "all objects
with this value" in O(matches). One event loop owns the store, so no locks are needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

Obj = dict[str, Any]
Indexer = Callable[[Obj], list[str]]


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


# Metadata every write changes (resourceVersion) or that the cache drops (managedFields).
_VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def stable_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object's metadata without what every write changes or the cache drops: two versions
    of an object compare equal on it when no one changed its metadata."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return {}
    return {k: v for k, v in meta.items() if k not in _VOLATILE_METADATA}


def namespace_of(obj: Obj) -> str | None:
    """An object's namespace, None when it has none (cluster-scoped, or malformed)."""
    namespace = (obj.get("metadata") or {}).get("namespace")
    return namespace if isinstance(namespace, str) else None


def split_key(key: str) -> tuple[str | None, str]:
    namespace, _, name = key.rpartition("/")
    return (namespace or None, name)


def by_namespace(obj: Obj) -> list[str]:
    namespace = (obj.get("metadata") or {}).get("namespace")
    return [namespace] if namespace else []


def by_controller_uid(obj: Obj) -> list[str]:
    """The uid of the object's controller ownerReference, if any (none of a malformed one)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") and ref.get("uid"):
            return [str(ref["uid"])]
    return []


def by_label(label: str) -> Indexer:
    """Index by ``namespace/<label value>``, for children that name their parent in a label."""

    def index(obj: Obj) -> list[str]:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        value = labels.get(label) if isinstance(labels, dict) else None
        if not isinstance(value, str):
            return []
        namespace = meta.get("namespace")
        return [f"{namespace}/{value}" if namespace else value]

    return index


NAMESPACE_INDEX = "namespace"
CONTROLLER_INDEX = "controller-uid"


class Store:
    def __init__(self, indexers: dict[str, Indexer] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, Indexer] = {
            NAMESPACE_INDEX: by_namespace,
            CONTROLLER_INDEX: by_controller_uid,
        }
        self._indexers.update(indexers or {})
        self._indexes: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_indexer(self, name: str, indexer: Indexer) -> None:
        self._indexers[name] = indexer
        self._indexes[name] = {}
        for key, obj in self._items.items():
            self._index_one(name, key, obj)

    def _index_one(self, name: str, key: str, obj: Obj) -> None:
        for value in self._indexers[name](obj):
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, indexer in self._indexers.items():
            index = self._indexes[name]
            for value in indexer(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def put(self, obj: Obj) -> Obj | None:
        """Insert or replace; returns the previous object under that key."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name in self._indexers:
            self._index_one(name, key, obj)
        return old

    def remove(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def get_by(self, namespace: str | None, name: str) -> Obj | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def by_index(self, name: str, value: str) -> list[Obj]:
        keys = self._indexes[name].get(value, ())
        return [self._items[k] for k in sorted(keys)]

    def keys(self) -> list[str]:
        return list(self._items)

    def values(self) -> list[Obj]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Obj]:
        return iter(list(self._items.values()))

    def __contains__(self, key: object) -> bool:
        return key in self._items
