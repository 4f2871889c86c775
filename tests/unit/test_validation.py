"""The API contract in Python (``controller/api/validation.py``) against the definition and the
API server's own answers.

- Built from an installed CRD, the contract rebuilds that CRD and its admission policy byte for
  byte: the rules it runs are the ones installed (one definition, ``schema.py``).
- Every rule a create can break has its Python predicate beside its CEL.
- Every create case of ``tests/integration/test_crd.py`` (each checked there against the real API
  server: accepted, or refused with that message) gets the same verdict and message here. The
  admission fuzz (``tests/integration/test_admission_fuzz.py``, property (c)) compares the two on
  generated JobSets, field error by field error.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from controller.api import crdgen, schema, specpolicy
from controller.api.validation import Contract, ContractMismatch, embedded_types
from tests.integration.test_crd import CREATE_CASES, base
from tests.support.crd import CRD_FILE, REPO

ALPHA_CRD = REPO / crdgen.ALPHA_OUT
INSTALLED = {
    "default": (CRD_FILE, REPO / crdgen.DEFAULT_POLICY_OUT),
    "alpha": (ALPHA_CRD, REPO / crdgen.ALPHA_POLICY_OUT),
}


def _load(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    return loaded


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract.from_crd(_load(CRD_FILE))


@pytest.mark.parametrize("which", sorted(INSTALLED))
def test_the_installed_crd_and_policy_are_rebuilt_from_the_one_definition(which: str) -> None:
    crd_path, policy_path = INSTALLED[which]
    installed = _load(crd_path)
    contract = Contract.from_crd(installed)
    job_template, claim = embedded_types(installed)
    full = schema.custom_resource_definition(job_template, claim, contract.gates)
    crd, sites = specpolicy.split(full)
    assert crd == installed
    assert specpolicy.policy(sites) == _load(policy_path)
    # The policy's rules are the ones the contract runs after the CRD's, in the same order.
    assert [p.rule.cel for p in contract.policy] == [
        s.rule["rule"] for s in sites if "oldSelf" not in s.rule["rule"]
    ]


@pytest.mark.parametrize("which", sorted(INSTALLED))
def test_every_rule_a_create_can_break_has_its_python_predicate(which: str) -> None:
    contract = Contract.from_crd(_load(INSTALLED[which][0]))
    rules = set(contract.rules.values())
    assert len(rules) >= 50
    missing = sorted(r.id for r in rules if r.check is None and not r.on_update)
    assert missing == []


@pytest.mark.parametrize(
    ("mutation", "expected"), [pytest.param(m, e, id=i) for i, m, e in CREATE_CASES]
)
def test_a_create_case_gets_the_api_servers_verdict(
    contract: Contract, mutation: object, expected: str
) -> None:
    body = base()
    mutation(body)  # type: ignore[operator]
    refusal = contract.refusal(body)
    if not expected:
        assert refusal is None
    else:
        assert refusal is not None, f"admitted; the API server refuses it with {expected!r}"
        assert expected in refusal.message


def test_the_alpha_crd_admits_what_its_gates_allow(contract: Contract) -> None:
    body = base()
    body["spec"]["failurePolicy"]["rules"][0]["action"] = "RestartJob"
    refusal = contract.refusal(body)
    assert refusal is not None and "RestartJob feature gate is disabled" in refusal.message
    assert Contract.from_crd(_load(ALPHA_CRD)).refusal(body) is None


def test_defaults_are_the_schemas(contract: Contract) -> None:
    body = base()
    del body["spec"]["replicatedJobs"][0]["replicas"]
    body["spec"].pop("network", None)
    before = copy.deepcopy(body)
    stored = contract.defaulted(body)
    assert body == before, "defaulted must not change its argument"
    assert stored["spec"]["replicatedJobs"][0]["replicas"] == 1
    assert stored["spec"]["network"] == {
        "enableDNSHostnames": True,
        "publishNotReadyAddresses": True,
    }


def test_several_field_errors_are_listed_as_the_api_server_lists_them(contract: Contract) -> None:
    body = base()
    body["spec"]["replicatedJobs"][0]["replicas"] = -1
    body["spec"]["ttlSecondsAfterFinished"] = -1
    refusal = contract.refusal(body)
    assert refusal is not None
    assert refusal.message.startswith('JobSet.jobset.x-k8s.io "train" is invalid: [')
    assert (
        "spec.ttlSecondsAfterFinished: Invalid value: -1: spec.ttlSecondsAfterFinished in body "
        "should be greater than or equal to 0" in refusal.errors
    )
    assert len(refusal.errors) == 2


def test_a_crd_of_another_release_is_refused() -> None:
    """The contract runs this version's rules: a CRD whose schema differs (another release's)
    is refused rather than checked against rules it does not have."""
    crd = _load(CRD_FILE)
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[index]
    root["properties"]["spec"]["properties"]["replicatedJobs"]["maxItems"] = 7
    with pytest.raises(ContractMismatch, match="a CRD of another release"):
        Contract.from_crd(crd)
