"""record: the uid prefixes of the claims a JobSet had, kept in ``status.volumes.claimUIDs``:
the stored form (render), reading it back (parse, ignoring what is malformed), changing it
(``changed``), and the acceptances of Lost claims read from the JobSet's annotation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset.volumes.desired import Slot
from controller.jobset.volumes.record import ClaimRecord, parse_record, uid_prefix
from controller.runtime.store import Obj

A, B, C = "aaaaaaaa", "bbbbbbbb", "cccccccc"
DATA: Slot = ("data", None, None, None)  # JobSet scope
W0: Slot = ("ckpt", "w", 0, None)  # Job scope
W1: Slot = ("ckpt", "w", 1, None)
W9: Slot = ("ckpt", "w", 9, None)

# ----------------------------------------------------------------------------- the stored form

FORMS = [
    pytest.param({}, [], id="empty"),
    pytest.param({DATA: A}, [{"template": "data", "uids": A}], id="jobset-scope"),
    pytest.param(
        {("ckpt", "workers", 0, None): A, ("ckpt", "workers", 1, None): B},
        [{"template": "ckpt", "replicatedJob": "workers", "uids": f"{A},{B}"}],
        id="job-scope-by-index",
    ),
    # Indexes without a claim (not created yet, or forgotten) are empty places.
    pytest.param(
        {("ckpt", "workers", 2, None): C, ("ckpt", "workers", 0, None): A},
        [{"template": "ckpt", "replicatedJob": "workers", "uids": f"{A},,{C}"}],
        id="job-scope-gaps",
    ),
    # Sorted by template, then replicated job (JobSet scope first).
    pytest.param(
        {
            ("logs", "workers", 0, None): C,
            ("ckpt", "workers", 0, None): A,
            ("ckpt", "leader", 0, None): B,
            ("ckpt", None, None, None): C,
        },
        [
            {"template": "ckpt", "uids": C},
            {"template": "ckpt", "replicatedJob": "leader", "uids": B},
            {"template": "ckpt", "replicatedJob": "workers", "uids": A},
            {"template": "logs", "replicatedJob": "workers", "uids": C},
        ],
        id="sorted",
    ),
    # Pod scope: ";" between Job indexes, "," between pod indexes, said by "scope".
    pytest.param(
        {
            ("ckpt", "workers", 0, 0): A,
            ("ckpt", "workers", 0, 1): B,
            ("ckpt", "workers", 1, 0): C,
            ("ckpt", "workers", 1, 2): A,
        },
        [{"template": "ckpt", "replicatedJob": "workers", "scope": "Pod",
          "uids": f"{A},{B};{C},,{A}"}],
        id="pod-scope",
    ),
    # One Job of one pod: without "scope" it would read as Job scope's index 0.
    pytest.param(
        {("ckpt", "workers", 0, 0): A},
        [{"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": A}],
        id="pod-scope-one-claim",
    ),
    # A Job with no recorded claim (not created yet, forgotten) is an empty place between ";".
    pytest.param(
        {("ckpt", "workers", 2, 1): C, ("ckpt", "workers", 0, 0): A},
        [{"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": f"{A};;,{C}"}],
        id="pod-scope-gaps",
    ),
    # Both scopes for one template and replicated job (its scope was changed): two entries,
    # Job scope first.
    pytest.param(
        {("ckpt", "workers", 0, 0): A, ("ckpt", "workers", 0, None): B, DATA: C},
        [
            {"template": "ckpt", "replicatedJob": "workers", "uids": B},
            {"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": A},
            {"template": "data", "uids": C},
        ],
        id="pod-and-job-scope",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("uids", "stored"), FORMS)
def test_render(uids: dict[Slot, str], stored: list[Obj]) -> None:
    assert ClaimRecord(uids).render() == stored


@pytest.mark.parametrize(("uids", "stored"), FORMS)
def test_parse(uids: dict[Slot, str], stored: list[Obj]) -> None:
    assert parse_record({"claimUIDs": stored}) == ClaimRecord(uids)


templates = st.sampled_from(["ckpt", "data", "a-b"])
rjobs = st.sampled_from(["workers", "leader", "A"])
slots = st.one_of(
    st.tuples(templates, st.none(), st.none(), st.none()),
    st.tuples(templates, rjobs, st.integers(0, 40), st.none()),
    st.tuples(templates, rjobs, st.integers(0, 12), st.integers(0, 12)),
)
prefixes = st.text(alphabet="0123456789abcdef", min_size=1, max_size=8)


@given(st.dictionaries(slots, prefixes, max_size=30))
def test_round_trip(uids: dict[Slot, str]) -> None:
    record = ClaimRecord(uids)
    assert parse_record({"claimUIDs": record.render()}) == record
    assert parse_record({"claimUIDs": record.render()}).render() == record.render()


# A record that cannot be read proves nothing: the entry is skipped, never raised on.
MALFORMED = [
    pytest.param(None, {}, id="no-volumes"),
    pytest.param("junk", {}, id="volumes-not-a-map"),
    pytest.param({"claimUIDs": "a"}, {}, id="not-a-list"),
    pytest.param({"claimUIDs": [7, None, "x", []]}, {}, id="entries-not-maps"),
    pytest.param({"claimUIDs": [{"uids": A}]}, {}, id="no-template"),
    pytest.param({"claimUIDs": [{"template": "", "uids": A}]}, {}, id="empty-template"),
    pytest.param({"claimUIDs": [{"template": 3, "uids": A}]}, {}, id="template-not-a-string"),
    pytest.param({"claimUIDs": [{"template": "data"}]}, {}, id="no-uids"),
    pytest.param({"claimUIDs": [{"template": "data", "uids": 12345678}]}, {}, id="uids-number"),
    pytest.param({"claimUIDs": [{"template": "data", "uids": ""}]}, {}, id="jobset-scope-empty"),
    # One claim per JobSet-scope template: a list there is not one.
    pytest.param({"claimUIDs": [{"template": "data", "uids": f"{A},{B}"}]}, {}, id="jobset-list"),
    pytest.param(
        {"claimUIDs": [{"template": "ckpt", "replicatedJob": "", "uids": A}]}, {},
        id="empty-replicated-job",
    ),
    pytest.param(
        {"claimUIDs": [{"template": "ckpt", "replicatedJob": 1, "uids": A}]}, {},
        id="replicated-job-not-a-string",
    ),
    pytest.param(
        {"claimUIDs": [{"template": "ckpt", "replicatedJob": "w", "uids": ",,"}]}, {},
        id="job-scope-all-empty",
    ),
    pytest.param(
        {"claimUIDs": [{"template": "ckpt", "replicatedJob": "w", "scope": "Pod", "uids": ";,;"}]},
        {}, id="pod-scope-all-empty",
    ),
    # Pod scope without its replicated job: no place to put the claims.
    pytest.param({"claimUIDs": [{"template": "ckpt", "scope": "Pod", "uids": A}]}, {},
                 id="pod-scope-no-replicated-job"),
    # Pod scope's separator in an entry that does not say Pod: not a record this version wrote.
    pytest.param({"claimUIDs": [{"template": "ckpt", "replicatedJob": "w", "uids": f"{A};{B}"}]},
                 {}, id="job-scope-with-semicolon"),
    pytest.param({"claimUIDs": [{"template": "data", "uids": f"{A};{B}"}]}, {},
                 id="jobset-scope-with-semicolon"),
    # A scope this version does not know proves nothing.
    pytest.param(
        {"claimUIDs": [{"template": "ckpt", "replicatedJob": "w", "scope": "Node", "uids": A}]},
        {}, id="unknown-scope",
    ),
    # The good entries of a record with bad ones are kept.
    pytest.param(
        {"claimUIDs": [{"template": 3}, {"template": "data", "uids": A}, "x",
                       {"template": "ckpt", "replicatedJob": "w", "uids": f",{B}"}]},
        {DATA: A, W1: B},
        id="good-among-bad",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("stored", "expected"), MALFORMED)
def test_malformed_input_is_ignored(stored: Any, expected: dict[Slot, str]) -> None:
    assert parse_record(stored) == ClaimRecord(expected)


# ----------------------------------------------------------------------------- changing it


@pytest.mark.parametrize(
    ("add", "drop", "expected"),
    [
        pytest.param({}, [], {DATA: A, W0: B}, id="nothing"),
        pytest.param(
            {W1: C}, [],
            {DATA: A, W0: B, W1: C}, id="add",
        ),
        pytest.param({W0: C}, [], {DATA: A, W0: C},
                     id="replace"),
        pytest.param({}, [W0], {DATA: A}, id="forget"),
        pytest.param({}, [W9], {DATA: A, W0: B},
                     id="forget-unknown"),
        # Forgetting the lost claim and recording its replacement in one pass: the new one wins.
        pytest.param(
            {W0: C}, [W0],
            {DATA: A, W0: C}, id="add-wins-over-drop",
        ),
    ],
)  # fmt: skip
def test_changed(add: dict[Slot, str], drop: list[Slot], expected: dict[Slot, str]) -> None:
    before = {DATA: A, W0: B}
    record = ClaimRecord(dict(before))
    after = record.changed(add, drop)
    assert after == ClaimRecord(expected)
    assert record == ClaimRecord(before)  # a new record; this one is unchanged
    if after == record:
        assert after is record  # nothing changed: the same record, no new status to write


def test_get_and_uid_prefix() -> None:
    record = ClaimRecord({DATA: A})
    assert record.get(DATA) == A
    assert record.get(W0) is None
    assert uid_prefix("3f9c1a27-0b1e-4c8a-9d2f-6e5b4a3c2d1e") == "3f9c1a27"
    assert uid_prefix("") == ""
