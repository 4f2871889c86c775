"""The claims a JobSet has had: a record of their uids, kept in the JobSet's status (pure).

A claim this JobSet created or adopted is recorded by the first group of its uid (8 hex digits).
A recorded claim that disappears, is being deleted by someone else, or whose name now belongs to
another object (another uid) is **Lost**: its data is gone or going, and the controller does not
replace it with an empty one unless the JobSet's ``replace-lost-claims`` annotation accepts
exactly that loss (the claim's name and the recorded uid prefix: an acceptance cannot apply to a
later loss of the same name). Without the record, a deleted checkpoint claim would simply be
"missing", and recreated empty.

Stored in ``status.volumes.claimUIDs``, one entry per template (JobSet scope) or per template and
replicated job (Job and Pod scope): ``{"template": "ckpt", "replicatedJob": "workers", "uids":
"a1b2c3d4,,9f8e7d6c"}``, the prefixes by Job index ("" where there is none). Pod scope says so,
and groups by Job index then pod index: ``{"template": "ckpt", "replicatedJob": "workers",
"scope": "Pod", "uids": "a1b2c3d4,b2c3d4e5;;c3d4e5f6"}`` (";" between Job indexes, "," between
pod indexes; without ``scope`` a one-Job entry would read as Job scope). Entries written before
Pod scope existed read as they always did. 9 bytes per claim: the 10,000 claims a JobSet may have
add 90 KB to its status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.jobset.jobsetstatus import ClaimUIDs, VolumesStatus
from controller.jobset.volumes.desired import Slot
from controller.runtime.store import Obj

PREFIX_LENGTH = 8
_JOBS = ";"  # between the Job indexes of a Pod-scope entry
_PODS = ","  # between the pod indexes of one Job (Pod scope), or the Job indexes (Job scope)


def uid_prefix(uid: str) -> str:
    """What the record keeps of a uid: its first group (a 2^-32 chance that another matches)."""
    return uid[:PREFIX_LENGTH]


@dataclass(frozen=True)
class ClaimRecord:
    """Slot (template, replicated job, job index, pod index) → uid prefix of the claim it had."""

    uids: Mapping[Slot, str] = field(default_factory=dict, hash=False)

    def get(self, slot: Slot) -> str | None:
        return self.uids.get(slot)

    def changed(self, add: Mapping[Slot, str], drop: Iterable[Slot] = ()) -> ClaimRecord:
        """A new record with ``add`` recorded and ``drop`` forgotten (``add`` wins)."""
        dropped = set(drop)
        if not add and not dropped & self.uids.keys():
            return self
        uids = {s: u for s, u in self.uids.items() if s not in dropped}
        uids.update(add)
        return ClaimRecord(uids)

    def entries(self) -> tuple[ClaimUIDs, ...]:
        """The status form: entries sorted by template, replicated job, then scope (Pod last)."""
        groups: dict[tuple[str, str | None, bool], dict[tuple[int | None, int | None], str]] = {}
        for (template, rjob, index, pod), uid in self.uids.items():
            groups.setdefault((template, rjob, pod is not None), {})[(index, pod)] = uid
        entries: list[ClaimUIDs] = []
        for (template, rjob, per_pod), places in sorted(
            groups.items(), key=lambda g: (g[0][0], g[0][1] or "", g[0][2])
        ):
            if rjob is None:
                entries.append(ClaimUIDs(template, places.get((None, None), "")))
            elif per_pod:
                entries.append(ClaimUIDs(template, _pods(places), rjob, "Pod"))
            else:
                entries.append(ClaimUIDs(template, _jobs(places), rjob))
        return tuple(entries)

    def render(self) -> list[Obj]:
        """``entries`` as stored (``status.volumes.claimUIDs``)."""
        return [entry.to_dict() for entry in self.entries()]


def _joined(by_index: Mapping[int, str], separator: str) -> str:
    """The values by index 0..max, "" where one has none."""
    return separator.join(by_index.get(i, "") for i in range(max(by_index) + 1))


def _jobs(places: Mapping[tuple[int | None, int | None], str]) -> str:
    return _joined({i: u for (i, _), u in places.items() if i is not None}, _PODS)


def _pods(places: Mapping[tuple[int | None, int | None], str]) -> str:
    by_job: dict[int, dict[int, str]] = {}
    for (index, pod), uid in places.items():
        if index is not None and pod is not None:
            by_job.setdefault(index, {})[pod] = uid
    return _joined({i: _joined(pods, _PODS) for i, pods in by_job.items()}, _JOBS)


def parse_record(volumes_status: Any) -> ClaimRecord:
    """The record stored in ``status.volumes`` (the raw object)."""
    return read_record(VolumesStatus.parse(volumes_status))


def read_record(volumes: VolumesStatus | None) -> ClaimRecord:
    """The record of ``status.volumes`` as the JobSet's status read it; malformed entries are
    ignored (a record that cannot be read proves nothing, and costs at most a Lost claim reported
    as missing)."""
    uids: dict[Slot, str] = {}
    for entry in volumes.claim_uids if volumes is not None else ():
        template, rjob, text = entry.template, entry.replicated_job, entry.uids
        if not template:
            continue
        if rjob is None:
            # JobSet scope: one claim, and no scope (Pod scope always has a replicated job).
            if text and _PODS not in text and _JOBS not in text and entry.scope is None:
                uids[(template, None, None, None)] = text
            continue
        if not rjob:
            continue
        if entry.scope == "Pod":
            for index, pods in enumerate(text.split(_JOBS)):
                for pod, uid in enumerate(pods.split(_PODS)):
                    if uid:
                        uids[(template, rjob, index, pod)] = uid
            continue
        if entry.scope is not None or _JOBS in text:
            continue  # a scope this version does not know: unreadable, so proves nothing
        for index, uid in enumerate(text.split(_PODS)):
            if uid:
                uids[(template, rjob, index, None)] = uid
    return ClaimRecord(uids)
