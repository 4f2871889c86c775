"""Claims that wait on the cluster (issue 12, item 9): a storage class that does not exist is named
in VolumesReady, and which JobSets a quota or storage-class event retries (tables)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import volumes
from controller.jobset.volumes import StorageClasses
from controller.jobset.volumes.lifecycle import lifecycle
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.status import volumes_ready, waits_for_volumes
from tests.unit.jobset_factories import condition, make_jobset_obj
from tests.unit.volumes.factories import claim, make, mounting, tpl

Obj = dict[str, Any]


def _tpl(name: str, storage_class: str | None) -> Obj:
    """A claim template; ``storage_class`` None leaves storageClassName out."""
    return tpl(name) if storage_class is None else tpl(name, storageClassName=storage_class)


@pytest.mark.parametrize(
    ("names", "storage_class", "missing"),
    [
        (frozenset({"standard"}), "standard", False),
        (frozenset({"standard"}), "gone", True),
        (frozenset(), "gone", True),
        # No class: the default class (set at creation) or none; "" asks for no class at all.
        (frozenset({"standard"}), None, False),
        (frozenset({"standard"}), "", False),
        # Classes unknown (no cache): nothing is called missing.
        (None, "gone", False),
    ],
)
def test_storage_class_missing(
    names: frozenset[str] | None, storage_class: str | None, missing: bool
) -> None:
    assert StorageClasses(names=names).missing(storage_class) is missing


# Claim classes as the API server stores them: (template class, claim class, phase) per template.
Claims = dict[str, tuple[str | None, str | None, str]]
KNOWN = frozenset({"standard", "wffc"})

READY_CASES: list[tuple[str, Claims, frozenset[str] | None, str, list[str], list[str]]] = [
    (
        "a class that does not exist is named, with its claims only",
        {"data": ("gone", "gone", "Pending"), "static": ("", "", "Pending")},
        KNOWN,
        "StorageClassNotFound",
        ["gone (claims data-js)", "1 of 2 claims"],
        ["static-js"],
    ),
    (
        "several missing classes, each with its claims",
        {
            "a": ("gone", "gone", "Pending"),
            "b": ("gone", "gone", "Pending"),
            "c": ("lost", "lost", "Pending"),
        },
        KNOWN,
        "StorageClassNotFound",
        ["gone (claims a-js, b-js); lost (claims c-js)", "classes do not exist"],
        [],
    ),
    (
        "no class in the template: the default class the API server set, which exists",
        {"plain": (None, "standard", "Pending")},
        KNOWN,
        "ClaimsPending",
        ["plain-js"],
        [],
    ),
    (
        "no class and no default class: pending, not missing",
        {"plain": (None, None, "Pending")},
        KNOWN,
        "ClaimsPending",
        ["plain-js"],
        [],
    ),
    (
        "the empty class (static binding): pending, not missing",
        {"static": ("", "", "Pending")},
        KNOWN,
        "ClaimsPending",
        ["static-js"],
        [],
    ),
    (
        "classes unknown: pending, never missing",
        {"data": ("gone", "gone", "Pending")},
        None,
        "ClaimsPending",
        ["data-js"],
        [],
    ),
    (
        "a Bound claim whose class was deleted since is ready",
        {"data": ("gone", "gone", "Bound")},
        KNOWN,
        "ClaimsBound",
        [],
        [],
    ),
    (
        "an existing WaitForFirstConsumer class is ready",
        {"data": ("wffc", "wffc", "Pending")},
        KNOWN,
        "WaitingForFirstConsumer",
        ["data-js"],
        [],
    ),
]


@pytest.mark.parametrize(
    ("claims", "names", "reason", "says", "not_said"),
    [case[1:] for case in READY_CASES],
    ids=[case[0] for case in READY_CASES],
)
def test_volumes_ready_names_a_missing_storage_class(
    claims: Claims,
    names: frozenset[str] | None,
    reason: str,
    says: list[str],
    not_said: list[str],
) -> None:
    templates = [_tpl(t, template_class) for t, (template_class, _, _) in claims.items()]
    jobset = make([{"templates": templates}], rjobs=[mounting("workers", 1, tuple(claims))])
    found = claim_views(
        claim(f"{t}-js", template=t, spec=_tpl(t, claim_class)["spec"], phase=phase)
        for t, (_, claim_class, phase) in claims.items()
    )
    classes = StorageClasses(wait_for_first_consumer=frozenset({"wffc"}), names=names)
    model = volumes.model(jobset)
    ready = volumes_ready(model, lifecycle(model, found, classes))
    assert ready.reason == reason, ready
    assert ready.status == (
        "False" if reason in ("StorageClassNotFound", "ClaimsPending") else "True"
    )
    if reason == "StorageClassNotFound":
        assert ready.event_type == "Warning"
    for text in says:
        assert text in ready.message, ready.message
    for text in not_said:
        assert text not in ready.message, ready.message


_VOLUMES = {"volumeClaimPolicies": [{"templates": [_tpl("data", None)]}]}
_REQUEST = {
    "volumePolicy": {
        "replicatedJobs": [{"name": "workers"}],
        "volumeClaimTemplates": [_tpl("data", None)],
    }
}

WAITING_CASES: list[tuple[str, Obj, bool]] = [
    ("no status written yet (a refused pass)", make_jobset_obj(spec=_VOLUMES), True),
    (
        "a refused claim",
        make_jobset_obj(
            spec=_VOLUMES,
            conditions=[condition("VolumesReady", "False", reason="PVCCreationFailed")],
        ),
        True,
    ),
    (
        "claims pending",
        make_jobset_obj(
            spec=_REQUEST, conditions=[condition("VolumesReady", "False", reason="ClaimsPending")]
        ),
        True,
    ),
    (
        "volumes ready",
        make_jobset_obj(
            spec=_VOLUMES, conditions=[condition("VolumesReady", "True", reason="ClaimsBound")]
        ),
        False,
    ),
    ("no volumes", make_jobset_obj(), False),
    (
        "finished",
        make_jobset_obj(
            spec=_VOLUMES,
            terminal_state="Completed",
            conditions=[condition("VolumesReady", "False", reason="ClaimsReleased")],
        ),
        False,
    ),
]


@pytest.mark.parametrize(
    ("jobset", "waits"),
    [case[1:] for case in WAITING_CASES],
    ids=[case[0] for case in WAITING_CASES],
)
def test_waits_for_volumes(jobset: Obj, waits: bool) -> None:
    assert waits_for_volumes(jobset) is waits
