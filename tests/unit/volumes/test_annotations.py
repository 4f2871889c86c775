"""annotations: the adopt-claims and replace-lost-claims annotations read, and the entries that
are not accepted, each with why (never ignored silently)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.jobset import volumes
from controller.jobset.model import parse as parse_jobset
from controller.jobset.volumes import StorageClasses
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.annotations import ADOPT_ANNOTATION, of, parse
from controller.jobset.volumes.lifecycle import REASON_CLAIM_ADOPTED, ClaimState
from controller.jobset.volumes.model import REPLACE_LOST_ANNOTATION
from controller.jobset.volumes.rejections import rejections
from controller.jobset.volumes.status import ANNOTATIONS_REJECTED
from tests.unit.volumes.factories import (
    ckpt,
    claim,
    make,
    mounting,
    prefix_of,
    recorded,
    tpl,
    uid_of,
    views,
)

A, B = "aaaaaaaa", "bbbbbbbb"

# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, set(), id="absent"),
        pytest.param(7, set(), id="not-a-string"),
        pytest.param("", set(), id="empty"),
        pytest.param(f"data-js@{A}", {("data-js", A)}, id="one"),
        pytest.param(f"data-js@{A},ckpt-js-w-0@{B}", {("data-js", A), ("ckpt-js-w-0", B)},
                     id="two"),
        pytest.param(f" data-js@{A} ,, ", {("data-js", A)}, id="spaces-and-empty-items"),
        pytest.param(f"data-js@{A}-1234-5678", {("data-js", A)}, id="whole-uid-cut-to-prefix"),
        pytest.param(f"Data-JS@{A.upper()}", {("data-js", A)}, id="upper-case"),
        # The name alone would accept every later loss of it too: not an acceptance.
        pytest.param("data-js", set(), id="name-only"),
        pytest.param("data-js@", set(), id="no-prefix"),
        pytest.param(f"@{A}", set(), id="no-name"),
        pytest.param("data-js@abc", set(), id="prefix-too-short"),
        pytest.param("data-js@zzzzzzzz", set(), id="not-hex"),
    ],
)  # fmt: skip
def test_entries(value: Any, expected: set[tuple[str, str]]) -> None:
    annotations = {} if value is None else {REPLACE_LOST_ANNOTATION: value}
    assert of(annotations, REPLACE_LOST_ANNOTATION).pairs() == frozenset(expected)


def test_malformed_items_are_kept_to_quote() -> None:
    found = parse(f"data-js@{A}, data-js ,x@abc,data-js@{A}")
    assert [str(e) for e in found.entries] == [f"data-js@{A}"]  # duplicates once
    assert found.malformed == ("data-js", "x@abc")


def test_entry_names_a_uid_by_its_beginning() -> None:
    (entry,) = parse(f"data-js@{A}-1").entries
    assert entry.names(f"{A}-1234")
    assert entry.names(f"{A.upper()}-1234")
    assert not entry.names(f"{A}-2234")
    assert not entry.names("")
    assert entry.prefix == A


# ----------------------------------------------------------------------------- rejections


def _rejected(js: Any, found: list[Any]) -> dict[str, list[str]]:
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views(found), StorageClasses(), terminal_state="")
    return rejections(model, vplan.claims)


def test_adopt_entries_rejected_each_with_why() -> None:
    hand_made = claim("data-js", jobset=None, owner_uid=None)
    value = f"data-js@{A},nope@{B},bad"
    js = make([{"templates": [tpl("data")]}], annotations={ADOPT_ANNOTATION: value})
    assert _rejected(js, [hand_made]) == {
        ADOPT_ANNOTATION: [
            '"bad" is not <claim name>@<uid prefix> (at least the first 8 hex digits of the '
            "claim's uid)",
            f'"data-js@{A}": the claim data-js has uid {uid_of("data-js")}, not one that starts '
            f"with {A}: it is not the claim the entry names, and is not adopted",
            f'"nope@{B}": nope is not a claim of this JobSet (its claims: data-js)',
        ]
    }


def test_adopt_entry_for_a_missing_claim() -> None:
    js = make([{"templates": [tpl("data")]}], annotations={ADOPT_ANNOTATION: f"data-js@{A}"})
    assert _rejected(js, []) == {
        ADOPT_ANNOTATION: [f'"data-js@{A}": there is no claim data-js in namespace default']
    }


def test_adopt_entry_that_matches_is_accepted_and_then_done() -> None:
    hand_made = claim("data-js", jobset=None, owner_uid=None)
    entry = f"data-js@{prefix_of('data-js')}"
    js = make([{"templates": [tpl("data")]}], annotations={ADOPT_ANNOTATION: entry})
    assert _rejected(js, [hand_made]) == {}
    # Adopted and recorded: the entry has done its work, whatever becomes of the claim.
    assert _rejected(recorded(js, [claim("data-js")]), []) == {}


def test_nothing_is_rejected_once_the_jobset_finished() -> None:
    js = make(
        [{"templates": [tpl("data")]}],
        annotations={ADOPT_ANNOTATION: "bad", REPLACE_LOST_ANNOTATION: "worse"},
        terminal_state="Completed",
    )
    assert _rejected(js, []) == {}


def _lost_ckpt_jobset(value: str) -> Any:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}],
        rjobs=[mounting("workers", 2, ("ckpt",))],
        annotations={REPLACE_LOST_ANNOTATION: value},
    )
    return recorded(js, [ckpt(0), ckpt(1)])


def test_replace_entries_rejected_each_with_why() -> None:
    lost0 = prefix_of("ckpt-js-workers-0")
    live1 = prefix_of("ckpt-js-workers-1")
    js = _lost_ckpt_jobset(f"ckpt-js-workers-0@{A},ckpt-js-workers-1@{live1},x")
    assert _rejected(js, [ckpt(1)]) == {
        REPLACE_LOST_ANNOTATION: [
            '"x" is not <claim name>@<uid prefix> (at least the first 8 hex digits of the '
            "claim's uid)",
            f'"ckpt-js-workers-0@{A}": the claim ckpt-js-workers-0 that was lost had uid '
            f"{lost0}, not {A}: not replaced (the entry must name the lost claim's uid)",
            f'"ckpt-js-workers-1@{live1}": the claim ckpt-js-workers-1 (uid {live1}) is not '
            "lost: there is nothing to replace",
        ]
    }


def test_replace_entry_that_matches_is_accepted_and_a_spent_one_is_quiet() -> None:
    lost0 = prefix_of("ckpt-js-workers-0")
    js = _lost_ckpt_jobset(f"ckpt-js-workers-0@{lost0}")
    assert _rejected(js, [ckpt(1)]) == {}
    # Replaced: the record has the new claim's uid, the entry names the old loss (may stay).
    new0 = ckpt(0, uid=uid_of("ckpt-js-workers-0", 1))
    assert _rejected(recorded(js, [new0, ckpt(1)]), [new0, ckpt(1)]) == {}


def test_replace_entry_for_a_lost_volume_says_delete_the_claim_first() -> None:
    lost0 = prefix_of("ckpt-js-workers-0")
    js = _lost_ckpt_jobset(f"ckpt-js-workers-0@{lost0}")
    assert _rejected(js, [ckpt(0, phase="Lost"), ckpt(1)]) == {
        REPLACE_LOST_ANNOTATION: [
            f'"ckpt-js-workers-0@{lost0}": the claim ckpt-js-workers-0 still exists, its '
            "persistent volume is lost: delete the claim first, then it is replaced"
        ]
    }


def test_condition_and_event_name_the_annotation() -> None:
    js = make([{"templates": [tpl("data")]}], annotations={ADOPT_ANNOTATION: "bad"})
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, {}, StorageClasses(), terminal_state="")
    found = [c for c in volume_status.conditions(model, vplan) if c.type == ANNOTATIONS_REJECTED]
    assert [(c.status, c.reason, c.event_type) for c in found] == [
        ("True", "AdoptClaimsRejected", "Warning")
    ]
    assert found[0].message.startswith(f'entries not accepted: {ADOPT_ANNOTATION}: "bad" is not')


def test_a_claim_left_by_the_finalizer_escape_hatch_is_adopted_only_when_named() -> None:
    """The retention finalizer removed by hand (the controller gone): a whenDeleted: Retain claim
    stays with this controller's labels and the earlier JobSet's uid annotation, but without
    retained-from-uid. The JobSet applied again reports it as a conflict whose message is the
    one command that adopts it; with that annotation it is adopted and recorded."""
    left = claim("data-js", owner_uid="uid-earlier", refs=[])
    entry = f"data-js@{prefix_of('data-js')}"
    retain = [{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}]
    js = make(retain)
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views([left]), StorageClasses(), terminal_state="")
    conflict = next(
        c for c in volume_status.conditions(model, vplan) if c.type == "VolumeClaimConflict"
    )
    assert conflict.status == "True"
    assert conflict.message.endswith(
        f"kubectl annotate jobset js -n default --overwrite {ADOPT_ANNOTATION}={entry}"
    )
    named = volumes.model(make(retain, annotations={ADOPT_ANNOTATION: entry}))
    vplan = volume_lifecycle.plan(named, views([left]), StorageClasses(), terminal_state="")
    assert [p.reason for p in vplan.patch] == [REASON_CLAIM_ADOPTED]
    assert "as the annotation jobset.sigs.k8s.io/adopt-claims asks" in vplan.patch[0].message
    assert dict(vplan.record.uids) == {("data", None, None, None): prefix_of("data-js")}


def test_a_claim_restored_where_the_jobsets_own_was_lost() -> None:
    """The JobSet's claim was lost and a claim restored from a backup now has the name. Named in
    adopt-claims alone it is not taken (the loss is not accepted) and the entry says what else it
    needs; with the loss accepted as well, the restored claim is adopted on the next pass: no
    empty claim is created, nothing is deleted."""
    lost = prefix_of("data-js")
    restored = claim("data-js", uid=uid_of("data-js", 1), jobset=None, owner_uid=None, refs=[])
    entry = f"data-js@{prefix_of('data-js', 1)}"
    js = recorded(make([{"templates": [tpl("data")]}]), [claim("data-js")])
    named = make_obj_with(js, {ADOPT_ANNOTATION: entry})
    model = volumes.model(named)
    vplan = volume_lifecycle.plan(model, views([restored]), StorageClasses(), terminal_state="")
    assert [at.state for at in vplan.claims] == [ClaimState.LOST]
    assert (vplan.create, vplan.patch, vplan.deleted) == ([], [], [])
    assert rejections(model, vplan.claims) == {
        ADOPT_ANNOTATION: [
            f'"{entry}": the claim data-js this JobSet had (uid {lost}) was lost; the one of '
            f"that name now (uid {uid_of('data-js', 1)}) is adopted once the loss is accepted: "
            f"add data-js@{lost} to {REPLACE_LOST_ANNOTATION}"
        ]
    }
    both = make_obj_with(js, {ADOPT_ANNOTATION: entry, REPLACE_LOST_ANNOTATION: f"data-js@{lost}"})
    first = volume_lifecycle.plan(
        volumes.model(both), views([restored]), StorageClasses(), terminal_state=""
    )
    assert (first.create, first.patch, first.deleted) == ([], [], [])
    assert dict(first.record.uids) == {}  # the lost claim forgotten
    after = make_obj_with(both, {}, record=first.record)
    second = volume_lifecycle.plan(
        volumes.model(after), views([restored]), StorageClasses(), terminal_state=""
    )
    assert [p.reason for p in second.patch] == [REASON_CLAIM_ADOPTED]
    assert (second.create, second.deleted) == ([], [])
    assert dict(second.record.uids) == {("data", None, None, None): prefix_of("data-js", 1)}


def make_obj_with(js: Any, notes: dict[str, str], record: Any = None) -> Any:
    """``js`` with these annotations added (and the stored record replaced by ``record``)."""
    raw = copy.deepcopy(js.raw)
    raw["metadata"].setdefault("annotations", {}).update(notes)
    if record is not None:
        raw["status"]["volumes"]["claimUIDs"] = record.render()
    return parse_jobset(raw)
