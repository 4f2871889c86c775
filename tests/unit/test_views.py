"""runtime.views: typed views of a cache's objects, made once per stored object."""

from __future__ import annotations

from typing import Any, cast

from controller.jobset import api, children
from controller.runtime.informer import EventHandler
from controller.runtime.store import Obj
from controller.runtime.views import Summary, Views
from tests.unit.jobset_factories import make_job, make_jobset, rjob

JS = make_jobset(replicated_jobs=[rjob("w", 2)])


class _Cache:
    """A cache as the views read it: its handlers, one index, get and items."""

    def __init__(self) -> None:
        self.handlers: list[EventHandler] = []
        self.objects: dict[str, Obj] = {}

    def add_handler(self, handler: EventHandler) -> None:
        self.handlers.append(handler)

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [o for o in self.objects.values() if o["metadata"]["labels"][index] == value]

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get(name)

    def items(self) -> list[Obj]:
        return list(self.objects.values())

    def put(self, obj: Obj) -> None:
        old = self.objects.get(obj["metadata"]["name"])
        self.objects[obj["metadata"]["name"]] = obj
        for handler in self.handlers:
            if old is None and handler.on_add:
                handler.on_add(obj)
            elif old is not None and handler.on_update:
                handler.on_update(old, obj)

    def delete(self, name: str) -> None:
        obj = self.objects.pop(name)
        for handler in self.handlers:
            if handler.on_delete:
                handler.on_delete(obj)


def _counting_view() -> tuple[list[Obj], Any]:
    viewed: list[Obj] = []

    def view(obj: Obj) -> children.ChildJob:
        viewed.append(obj)
        return children.view(obj)

    return viewed, view


def test_a_view_is_made_once_per_stored_object_and_only_when_read() -> None:
    cache, (viewed, view) = _Cache(), _counting_view()
    views = Views(cast(Any, cache), view)
    job = make_job(JS, "w", 0, active=1)
    cache.put(job)
    [first] = views.by_index(api.JOBSET_NAME, "js")
    assert first.raw is job and first.is_active
    assert views.by_index(api.JOBSET_NAME, "js")[0] is first
    assert views.get("default", "js-w-0") is first
    assert viewed == [job]  # made once, on the first read
    running = make_job(JS, "w", 0, active=2)
    cache.put(running)  # replaced before any read: never viewed
    done = make_job(JS, "w", 0, complete=True)
    cache.put(done)
    [second] = views.by_index(api.JOBSET_NAME, "js")
    assert viewed == [job, done]
    assert second.raw is done and second.is_complete
    cache.delete(second.name)
    assert views.by_index(api.JOBSET_NAME, "js") == []
    assert views.get("default", "js-w-0") is None


def test_an_object_the_handler_has_not_seen_is_viewed_on_read() -> None:
    cache, (viewed, view) = _Cache(), _counting_view()
    views = Views(cast(Any, cache), view)
    job = make_job(JS, "w", 1)
    cache.objects[job["metadata"]["name"]] = job  # stored, its handlers not run yet
    [found] = views.by_index(api.JOBSET_NAME, "js")
    assert found.raw is job and found.job_index == 1
    assert viewed == [job]


def test_a_summary_is_made_again_only_after_a_change() -> None:
    cache = _Cache()
    made: list[int] = []

    def summarise(items: list[Obj]) -> frozenset[str]:
        made.append(len(items))
        return frozenset(o["metadata"]["name"] for o in items)

    summary = Summary(cast(Any, cache), summarise)
    assert summary.get() == frozenset() and summary.get() == frozenset()
    cache.put({"metadata": {"name": "fast", "labels": {}}})
    assert summary.get() == {"fast"} and summary.get() == {"fast"}
    cache.delete("fast")
    assert summary.get() == frozenset()
    assert made == [0, 1, 0]
