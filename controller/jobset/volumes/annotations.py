"""The JobSet annotations by which a user acts on claims, read and checked (pure).

Two annotations, each a comma-separated list of ``<claim name>@<uid prefix>`` entries (the first
8 hex digits of the claim's uid, or more of it, up to the whole uid):

- ``jobset.sigs.k8s.io/adopt-claims``: adopt these existing claims, which carry no proof that they
  are this JobSet's (retained by upstream JobSet, restored from a backup, made by hand). The uid
  pins the claim: a later, different claim of the same name is never adopted by the entry.
- ``jobset.sigs.k8s.io/replace-lost-claims``: accept an empty replacement of these Lost claims
  (the uid is the lost claim's, as the ClaimsLost message prints it): one-shot, since the uid names
  that loss only.

An entry that cannot be acted on is never ignored silently: ``rejections`` says, per annotation,
which entries were not accepted and why; the JobSet reports them in the condition
``VolumeAnnotationsRejected`` and a Warning Event (status.py). Entries that were acted on and have
nothing left to do (an adopted claim, a replaced loss) are not rejections.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.jobset.volumes.model import REPLACE_LOST_ANNOTATION
from controller.jobset.volumes.record import PREFIX_LENGTH, uid_prefix

if TYPE_CHECKING:  # lifecycle.py imports this module
    from controller.jobset.volumes.lifecycle import ClaimLifecycle
    from controller.jobset.volumes.spec import VolumeModel

ADOPT_ANNOTATION = "jobset.sigs.k8s.io/adopt-claims"

# A claim name (a DNS subdomain) and a uid's beginning: 8 hex digits, then more of the uid.
_ENTRY = re.compile(
    r"(?P<claim>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)@(?P<uid>[0-9a-f]{8}[-0-9a-f]{0,28})"
)
# Entries named one by one in a message before "and N more".
_SHOWN = 5


@dataclass(frozen=True)
class ClaimEntry:
    """One ``<claim>@<uid prefix>`` entry."""

    claim: str
    uid: str  # as written, lower case: 8 hex digits or more of the uid

    @property
    def prefix(self) -> str:
        """The part the status record keeps (``record.uid_prefix``)."""
        return self.uid[:PREFIX_LENGTH]

    def names(self, uid: str) -> bool:
        """Whether the entry names the claim of ``uid``."""
        return bool(uid) and uid.lower().startswith(self.uid)

    def __str__(self) -> str:
        return f"{self.claim}@{self.uid}"


@dataclass(frozen=True)
class ClaimEntries:
    """An annotation's entries, and its items that are not entries (quoted in the rejection)."""

    entries: tuple[ClaimEntry, ...] = ()
    malformed: tuple[str, ...] = ()

    def named(self, claim: str) -> tuple[ClaimEntry, ...]:
        return tuple(e for e in self.entries if e.claim == claim)

    def pairs(self) -> frozenset[tuple[str, str]]:
        """(claim name, uid prefix) of every entry."""
        return frozenset((e.claim, e.prefix) for e in self.entries)


def parse(value: Any) -> ClaimEntries:
    """The entries of an annotation's value (anything but a string has none)."""
    if not isinstance(value, str):
        return ClaimEntries()
    entries: list[ClaimEntry] = []
    malformed: list[str] = []
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        found = _ENTRY.fullmatch(item.lower())
        if found is None:
            malformed.append(item)
        elif (entry := ClaimEntry(found["claim"], found["uid"])) not in entries:
            entries.append(entry)
    return ClaimEntries(tuple(entries), tuple(malformed))


def of(annotations: Mapping[str, Any], key: str) -> ClaimEntries:
    return parse(annotations.get(key))


# ----------------------------------------------------------------------------- rejections


def _malformed(entries: ClaimEntries) -> list[str]:
    return [
        f'"{item}" is not <claim name>@<uid prefix> (at least the first 8 hex digits of the '
        "claim's uid)"
        for item in entries.malformed
    ]


def _unknown(entry: ClaimEntry, wanted: Sequence[str]) -> str:
    shown = ", ".join(wanted[:_SHOWN]) + (
        f" and {len(wanted) - _SHOWN} more" if len(wanted) > _SHOWN else ""
    )
    return f'"{entry}": {entry.claim} is not a claim of this JobSet (its claims: {shown or "none"})'


def _known(
    entries: ClaimEntries,
    states: Mapping[str, ClaimLifecycle],
    wanted: Sequence[str],
    found: list[str],
) -> Iterator[tuple[ClaimEntry, ClaimLifecycle]]:
    """Each entry naming a claim of this JobSet, with that claim's state; the others are
    reported into ``found`` as they come (messages keep the entries' order)."""
    for entry in entries.entries:
        at = states.get(entry.claim)
        if at is None:
            found.append(_unknown(entry, wanted))
        else:
            yield entry, at


def _adopt_rejections(
    entries: ClaimEntries,
    states: Mapping[str, ClaimLifecycle],
    wanted: Sequence[str],
    namespace: str,
) -> list[str]:
    found = _malformed(entries)
    for entry, at in _known(entries, states, wanted, found):
        if at.recorded is not None and at.recorded == entry.prefix:
            continue  # adopted (or created) and remembered: the entry has done its work
        claim = at.claim
        if at.state == "Lost" and claim is not None and entry.names(claim.uid):
            # A claim restored from a backup, say, where the JobSet's own was lost: adopting it
            # needs the loss accepted too, so that a loss is never passed over silently.
            found.append(
                f'"{entry}": the claim {entry.claim} this JobSet had (uid {at.recorded}) was '
                f"lost; the one of that name now (uid {claim.uid}) is adopted once the loss is "
                f"accepted: add {entry.claim}@{at.recorded} to {REPLACE_LOST_ANNOTATION}"
            )
        elif claim is None:
            found.append(f'"{entry}": there is no claim {entry.claim} in namespace {namespace}')
        elif not entry.names(claim.uid):
            found.append(
                f'"{entry}": the claim {entry.claim} has uid {claim.uid}, not one that starts '
                f"with {entry.uid}: it is not the claim the entry names, and is not adopted"
            )
    return found


def _replace_rejections(
    entries: ClaimEntries, states: Mapping[str, ClaimLifecycle], wanted: Sequence[str]
) -> list[str]:
    found = _malformed(entries)
    for entry, at in _known(entries, states, wanted, found):
        if at.state == "Lost":
            if at.recorded != entry.prefix:
                found.append(
                    f'"{entry}": the claim {entry.claim} that was lost had uid {at.recorded}, '
                    f"not {entry.prefix}: not replaced (the entry must name the lost claim's uid)"
                )
            elif at.volume_lost:
                found.append(
                    f'"{entry}": the claim {entry.claim} still exists, its persistent volume is '
                    "lost: delete the claim first, then it is replaced"
                )
        elif at.recorded == entry.prefix and at.claim is not None and not at.claim.terminating:
            found.append(
                f'"{entry}": the claim {entry.claim} (uid {entry.prefix}) is not lost: there is '
                "nothing to replace"
            )
        # Otherwise the entry names an earlier loss, already replaced (the annotation may stay).
    return found


def rejections(model: VolumeModel, claims: Iterable[ClaimLifecycle]) -> dict[str, list[str]]:
    """Per annotation key, its entries that were not accepted and why; {} when none (or the
    JobSet has finished: it takes and replaces no claim any more)."""
    if model.jobset.status.terminal_state:
        return {}
    states = {at.name: at for at in claims}
    wanted = sorted(states)
    result: dict[str, list[str]] = {}
    adopt = _adopt_rejections(model.adopt, states, wanted, model.jobset.namespace)
    if adopt:
        result[ADOPT_ANNOTATION] = adopt
    replace = _replace_rejections(model.replace_lost, states, wanted)
    if replace:
        result[REPLACE_LOST_ANNOTATION] = replace
    return result


def adopt_command(namespace: str, jobset: str, entries: Iterable[str]) -> str:
    """The command that adopts ``entries`` (``claim@uid``), keeping the annotation's others."""
    return (
        f"kubectl annotate jobset {jobset} -n {namespace} --overwrite "
        f"{ADOPT_ANNOTATION}={','.join(entries)}"
    )


def entry_for(claim: str, uid: str) -> str:
    """The entry naming the claim ``claim`` of ``uid``, as the messages print it."""
    return f"{claim}@{uid_prefix(uid)}"
