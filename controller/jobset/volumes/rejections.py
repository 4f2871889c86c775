"""Why entries of the adopt-claims and replace-lost-claims annotations were not accepted:
each entry checked against the state of the claim it names (``lifecycle``), for the
VolumeAnnotationsRejected condition (``status``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from controller.jobset.volumes.annotations import ADOPT_ANNOTATION, ClaimEntries, ClaimEntry
from controller.jobset.volumes.lifecycle import ClaimLifecycle
from controller.jobset.volumes.model import REPLACE_LOST_ANNOTATION
from controller.jobset.volumes.spec import VolumeModel

# Entries named one by one in a message before "and N more".
_SHOWN = 5


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
