"""Bad input never crashes the decision functions: it is a typed, explained error or it is fine.

Hypothesis mutates the specification's example JobSets (and builds wild ones): any field may be
dropped, retyped or replaced. ``parse`` + ``volumes.policies`` + ``decide`` must then either
succeed or raise ``InvalidJobSet`` with a non-empty message — never anything else. The same holds
for malformed observed children (Jobs and claims with missing labels, wrong types, foreign owners).
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.jobset import volumes
from controller.jobset.decide import decide
from controller.jobset.model import InvalidJobSet, parse
from tests.support.examples import SUPPORTED

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
BASES = [yaml.safe_load(p.read_text()) for p in SUPPORTED]

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.text(max_size=12) | st.floats(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            found += _paths(value, (*prefix, index))
    return found


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return obj


@st.composite
def mutated_jobsets(draw: st.DrawFn) -> dict[str, Any]:
    base = copy.deepcopy(draw(st.sampled_from(BASES)))
    base["metadata"].update({"namespace": "ns", "uid": "uid-1", "generation": 1})
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(base) if p and p[0] in ("spec", "status")]
        path = draw(st.sampled_from(paths))
        base = _set(base, path, draw(junk))
    return base


def _outcome(obj: dict[str, Any], jobs: list[Any], claims: dict[str, Any]) -> None:
    try:
        jobset = parse(obj)
        decide(jobset, jobs, None, NOW, claims=claims)
    except InvalidJobSet as err:
        assert str(err), "an InvalidJobSet must explain itself"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_jobsets())
def test_mutated_specs_are_fine_or_explained(obj: dict[str, Any]) -> None:
    _outcome(obj, [], {})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(BASES),
    st.lists(junk, max_size=4),
    st.dictionaries(st.text(max_size=20), junk, max_size=3),
)
def test_malformed_children_are_tolerated(
    base: dict[str, Any], jobs: list[Any], claims: dict[str, Any]
) -> None:
    obj = copy.deepcopy(base)
    obj["metadata"].update({"namespace": "ns", "uid": "uid-1", "generation": 1})
    jobset = parse(obj)
    policies = volumes.policies(jobset)
    wanted = [c.name for c in volumes.desired_claims(jobset, policies)]
    # What the informer lets through is a dict with a metadata.name; everything else may be junk
    # (missing or wrongly typed labels, status, spec; foreign ownerReferences).
    shaped = [
        {
            "metadata": {"name": f"x-{i}", "labels": value, "ownerReferences": [{"uid": "other"}]},
            "spec": value,
            "status": value,
        }
        for i, value in enumerate(jobs)
    ]
    shaped += [
        {
            "metadata": {
                "name": f"y-{i}",
                "labels": {
                    "jobset.sigs.k8s.io/replicatedjob-name": "A",
                    "jobset.sigs.k8s.io/job-index": value,
                    "jobset.sigs.k8s.io/restart-attempt": value,
                },
            },
            "status": {"conditions": value, "ready": value, "active": value},
        }
        for i, value in enumerate(jobs)
    ]
    claim_map = {
        name: {"metadata": {"name": name, "labels": v}, "spec": v}
        for name, v in zip(wanted, claims.values(), strict=False)
    }
    _outcome(obj, shaped, claim_map)
