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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.jobset.volumes.record import PREFIX_LENGTH, uid_prefix

ADOPT_ANNOTATION = "jobset.sigs.k8s.io/adopt-claims"

# A claim name (a DNS subdomain) and a uid's beginning: 8 hex digits, then more of the uid.
_ENTRY = re.compile(
    r"(?P<claim>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)@(?P<uid>[0-9a-f]{8}[-0-9a-f]{0,28})"
)


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


def adopt_command(namespace: str, jobset: str, entries: Iterable[str]) -> str:
    """The command that adopts ``entries`` (``claim@uid``), keeping the annotation's others."""
    return (
        f"kubectl annotate jobset {jobset} -n {namespace} --overwrite "
        f"{ADOPT_ANNOTATION}={','.join(entries)}"
    )


def entry_for(claim: str, uid: str) -> str:
    """The entry naming the claim ``claim`` of ``uid``, as the messages print it."""
    return f"{claim}@{uid_prefix(uid)}"
