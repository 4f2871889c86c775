"""--feature-gates: parsing, refusals, and the flag value a CRD records."""

from __future__ import annotations

import pytest
import yaml

from controller import config, features
from controller.api import crdgen
from controller.features import FeatureGateError, FeatureGates
from controller.jobset.model import InvalidJobSet, parse
from tests.support.crd import CRD_FILE, REPO
from tests.unit.jobset_factories import make_jobset_obj

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", FeatureGates()),
        ("RestartJob=true", FeatureGates(restart_job=True)),
        ("ElasticJobSet=True, RestartJob=false", FeatureGates(elastic_jobset=True)),
        ("RestartJob=true,ElasticJobSet=true", features.ALPHA),
        ("InPlaceRestart=false", FeatureGates()),
    ],
)
def test_parse(text: str, expected: FeatureGates) -> None:
    assert features.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RestartJob", "expected Name=true or Name=false, got 'RestartJob'"),
        ("RestartJob=yes", "expected Name=true or Name=false"),
        ("Restartjob=true", "unknown feature gate 'Restartjob' (known: ElasticJobSet, "),
        ("RestartJob=true,RestartJob=false", "feature gate RestartJob is given twice"),
        ("InPlaceRestart=true", "InPlaceRestart is not supported"),
    ],
)
def test_refused(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message.replace("(", r"\(")):
        features.parse(text)


def test_flag_names_every_gate_in_a_stable_order() -> None:
    assert features.DEFAULT.flag() == "ElasticJobSet=false,RestartJob=false"
    assert features.ALPHA.flag() == "ElasticJobSet=true,RestartJob=true"
    assert features.parse(features.ALPHA.flag()) == features.ALPHA


def test_config_flag_and_environment() -> None:
    base: list[str] = []
    assert config.parse(base, env={}).feature_gates == features.DEFAULT
    by_flag = config.parse([*base, "--feature-gates=RestartJob=true"], env={})
    assert by_flag.feature_gates == FeatureGates(restart_job=True)
    by_env = config.parse(base, env={"STATEFUL_JOBSET_FEATURE_GATES": "ElasticJobSet=true"})
    assert by_env.feature_gates == FeatureGates(elastic_jobset=True)
    with pytest.raises(config.ConfigError, match="--feature-gates: unknown feature gate 'Nope'"):
        config.parse([*base, "--feature-gates=Nope=true"], env={})


def test_in_place_restart_is_in_neither_crd_nor_the_parser() -> None:
    """Upstream's restartStrategy InPlaceRestart (behind its gate) and the two status fields of
    its in-place restart agent: both CRDs leave them out, so the API server refuses the value and
    drops the fields (the status schema is closed), and a JobSet stored with the value under
    upstream's CRD is refused by the parser (SpecInvalid)."""
    for path in (CRD_FILE, REPO / crdgen.ALPHA_OUT):
        root = yaml.safe_load(path.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        policy = root["properties"]["spec"]["properties"]["failurePolicy"]["properties"]
        assert policy["restartStrategy"]["enum"] == ["Recreate", "BlockingRecreate"], path
        status = root["properties"]["status"]
        assert "x-kubernetes-preserve-unknown-fields" not in status, path
        in_place = {"previousInPlaceRestartAttempt", "currentInPlaceRestartAttempt"}
        assert not in_place & set(status["properties"]), path
    stored = make_jobset_obj(failure_policy={"restartStrategy": "InPlaceRestart"})
    with pytest.raises(InvalidJobSet) as refused:
        parse(stored)
    # The API server's words, as the parser runs its schema.
    assert str(refused.value).startswith(
        'spec.failurePolicy.restartStrategy: Unsupported value: "InPlaceRestart": supported '
        'values: "Recreate", "BlockingRecreate"'
    )
