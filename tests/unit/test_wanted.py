"""WantedClaims: which JobSets a claim event goes to, by the claim's namespace and name."""

from __future__ import annotations

import pytest

from controller.jobset.wanted import WantedClaims

# Each step: ("want", key, names) or ("drop", key, ()); then who wants each probed claim.
Step = tuple[str, str, tuple[str, ...]]
PROBES = [("ns", "data-a"), ("ns", "t-a-b"), ("other", "t-a-b"), ("ns", "unrelated")]

CASES = [
    pytest.param([], {}, id="nothing-recorded"),
    pytest.param([("want", "ns/a", ("data-a",))], {("ns", "data-a"): ["ns/a"]}, id="one-jobset"),
    pytest.param(
        [("want", "ns/b", ("t-a-b",)), ("want", "ns/a-b", ("t-a-b",))],
        {("ns", "t-a-b"): ["ns/a-b", "ns/b"]},
        id="two-jobsets-want-one-name",
    ),
    pytest.param(
        [("want", "ns/b", ("t-a-b",)), ("want", "other/b", ("t-a-b",))],
        {("ns", "t-a-b"): ["ns/b"], ("other", "t-a-b"): ["other/b"]},
        id="namespaces-apart",
    ),
    pytest.param(
        [("want", "ns/a", ("data-a", "t-a-b")), ("want", "ns/a", ("data-a",))],
        {("ns", "data-a"): ["ns/a"]},
        id="a-name-no-longer-wanted",
    ),
    pytest.param(
        [("want", "ns/a", ("data-a",)), ("want", "ns/b", ("t-a-b",)), ("drop", "ns/a", ())],
        {("ns", "t-a-b"): ["ns/b"]},
        id="dropped-jobset-wants-nothing",
    ),
    pytest.param(
        [("want", "ns/a", ("data-a",)), ("want", "ns/a", ())],
        {},
        id="wanting-nothing-is-dropping",
    ),
    pytest.param([("drop", "ns/a", ())], {}, id="dropping-unknown-is-harmless"),
]


@pytest.mark.parametrize(("steps", "expected"), CASES)
def test_wanting(steps: list[Step], expected: dict[tuple[str, str], list[str]]) -> None:
    wanted = WantedClaims()
    for op, key, names in steps:
        if op == "want":
            wanted.want(key, names)
        else:
            wanted.drop(key)
    got = {probe: wanted.wanting(*probe) for probe in PROBES}
    assert {k: v for k, v in got.items() if v} == expected


def test_many_claims_per_jobset() -> None:
    """10,000 claims of one JobSet: recorded again unchanged (in another order) or one fewer."""
    wanted = WantedClaims()
    names = [f"ckpt-js-workers-{i}" for i in range(10_000)]
    wanted.want("ns/js", names)
    wanted.want("ns/js", reversed(names))
    assert wanted.wanting("ns", "ckpt-js-workers-9999") == ["ns/js"]
    wanted.want("ns/js", names[:-1])
    assert wanted.wanting("ns", "ckpt-js-workers-9999") == []
    assert wanted.wanting("ns", "ckpt-js-workers-0") == ["ns/js"]
