"""The JobSets' parses and volume models, kept between passes (``Parses``).

A JobSet is parsed again only when the cache holds a new object for it (a watch event), not on
every pass its children's events cause: the parse and the volume model are pure functions of
the object, which the cache replaces, never changes. A new object that differs from the one
parsed before only in its status (the echo of a status write: most new objects) is not parsed
again (``model.with_new_status``), and its volume model keeps the policies read before. Only the
JobSets reconciled last are kept (a parse with its model is about the size of the object).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Set

from controller import features
from controller.features import FeatureGates
from controller.jobset.model import JobSet, parse, with_new_status
from controller.jobset.volumes import VolumeModel, model
from controller.runtime.store import Obj

# About 11 KiB each for a small JobSet, so 22 MiB at most. Fewer than the JobSets moving at once
# thrash (1,000 JobSets run at once in the scale benchmark: with 512 kept, most passes re-parsed).
KEPT = 2048


class Parses:
    def __init__(self, kept: int = KEPT, gates: FeatureGates = features.DEFAULT) -> None:
        self.kept = kept
        # The controller's feature gates: which CRD's rules ``parse`` runs (the installed CRD
        # must be the one made for them, docs/api.md "Feature gates").
        self.gates = gates
        # Per JobSet, the cached object last parsed and its parse, and the model of that parse.
        self._parsed: OrderedDict[str, tuple[Obj, JobSet]] = OrderedDict()
        self._models: dict[str, tuple[JobSet, VolumeModel]] = {}
        # A parse made from the one before (``with_new_status``) and the model of that one, whose
        # policies its own model takes (same spec), until ``model`` reads it.
        self._same_spec: dict[str, tuple[JobSet, VolumeModel]] = {}

    def parse(self, key: str, obj: Obj) -> JobSet:
        """``model.parse(obj, gates)``, once per cached object (raises ``InvalidJobSet`` as it
        does); a new object that differs in its status only is not checked again."""
        cached = self._parsed.get(key)
        if cached is not None and cached[0] is obj:
            self._parsed.move_to_end(key)
            return cached[1]
        self._parsed.pop(key, None)
        self._same_spec.pop(key, None)
        before = self._models.pop(key, None)
        jobset = None
        if cached is not None:
            jobset = with_new_status(cached[1], obj)
            if jobset is not None and before is not None and before[0] is cached[1]:
                self._same_spec[key] = (jobset, before[1])
        if jobset is None:
            jobset = parse(obj, self.gates)
        self._parsed[key] = (obj, jobset)
        while len(self._parsed) > self.kept:
            oldest, _ = self._parsed.popitem(last=False)
            self._models.pop(oldest, None)
            self._same_spec.pop(oldest, None)
        return jobset

    def model(self, key: str, jobset: JobSet) -> VolumeModel:
        """``volumes.model(jobset)``, once per parse (raises ``InvalidJobSet`` as it does)."""
        cached = self._models.get(key)
        if cached is not None and cached[0] is jobset:
            return cached[1]
        same = self._same_spec.pop(key, None)
        found = model(jobset, same[1] if same is not None and same[0] is jobset else None)
        if key in self._parsed:  # only beside its parse (bounded with it)
            self._models[key] = (jobset, found)
        return found

    def forget(self, key: str) -> None:
        """Drop the JobSet's parse and model (it was deleted)."""
        self._parsed.pop(key, None)
        self._models.pop(key, None)
        self._same_spec.pop(key, None)

    def kept_keys(self) -> tuple[Set[str], Set[str]]:
        """The JobSets whose parse, and whose volume model, are kept (read-only views)."""
        return self._parsed.keys(), self._models.keys()
