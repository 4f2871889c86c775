"""The API contract in Python (``controller/api/validation.py``) against the definition and the
API server's own answers.

- Built from an installed CRD, the contract rebuilds that CRD and its admission policy byte for
  byte: the rules it runs are the ones installed (one definition, ``schema.py``).
- Every rule has its Python predicate beside its CEL (a transition rule: one of the new and the
  stored node).
- Every create case of ``tests/integration/test_crd.py`` (each checked there against the real API
  server: accepted, or refused with that message) gets the same verdict and message here. The
  admission fuzz (``tests/integration/test_admission_fuzz.py``, property (c)) compares the two on
  generated JobSets, field error by field error.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import crdgen, schema, specpolicy, validation
from controller.api.validation import Contract, ContractMismatch, embedded_types
from tests.integration.test_crd import CREATE_CASES, UPDATE_CASES, base
from tests.integration.upstream.test_webhook import IMMUTABLE_WHILE_RUNNING, rjob
from tests.support.crd import CRD_FILE, REPO
from tests.support.jobsets import jobset

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
    crd, sites = specpolicy.policy_sites(full)
    assert crd == installed
    assert specpolicy.policy(sites) == _load(policy_path)
    # The policy's rules are the ones the contract runs after the CRD's, in the same order.
    assert [p.rule.cel for p in contract.policy] == [s.rule["rule"] for s in sites]


@pytest.mark.parametrize("which", sorted(INSTALLED))
def test_every_rule_has_its_python_predicate(which: str) -> None:
    contract = Contract.from_crd(_load(INSTALLED[which][0]))
    rules = set(contract.rules.values())
    assert len(rules) >= 50
    missing = sorted(r.id for r in rules if (r.check_update if r.on_update else r.check) is None)
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


@pytest.mark.parametrize(
    ("before", "change", "expected"), [pytest.param(b, c, e, id=i) for i, b, c, e in UPDATE_CASES]
)
def test_an_update_case_gets_the_api_servers_verdict(
    contract: Contract, before: object, change: object, expected: str
) -> None:
    """The update cases of test_crd (each checked there against the real API server): a stored
    JobSet replaced with a changed one."""
    body = base()
    before(body)  # type: ignore[operator]
    assert contract.refusal(body) is None
    stored = contract.defaulted(body)
    updated = copy.deepcopy(stored)
    change(updated)  # type: ignore[operator]
    refusal = contract.refusal(updated, stored)
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


def _sized(mode: str = "Indexed") -> dict[str, object]:
    """upstream/test_webhook_elastic's JobSet: one replicated job, parallelism = completions = 2."""
    return jobset("elastic", rjob("rjob", completionMode=mode, parallelism=2, completions=2))


def _resized(stored: dict[str, Any], parallelism: int, completions: int) -> dict[str, Any]:
    updated = copy.deepcopy(stored)
    spec = updated["spec"]["replicatedJobs"][0]["template"]["spec"]
    spec["parallelism"], spec["completions"] = parallelism, completions
    return updated


@pytest.mark.parametrize(
    ("mode", "size", "finished", "expected"),
    [
        ("Indexed", (4, 4), False, []),
        ("Indexed", (4, 5), False, ["completions must equal parallelism", "rjob"]),
        ("NonIndexed", (4, 4), False, [IMMUTABLE_WHILE_RUNNING]),
        ("Indexed", (0, 0), False, ["parallelism must be >= 1", "completions must be >= 1"]),
        ("Indexed", (4, 4), True, ["cannot change once the JobSet is Completed or Failed"]),
    ],
)
def test_elastic_resizes_get_the_api_servers_verdict(
    mode: str, size: tuple[int, int], finished: bool, expected: list[str]
) -> None:
    """The alpha CRD's transition rules (ElasticJobSet), on upstream/test_webhook_elastic's
    scenarios (each checked there against the real API server)."""
    alpha = Contract.from_crd(_load(ALPHA_CRD))
    stored = alpha.defaulted(_sized(mode))
    if finished:
        stored["status"] = {"terminalState": "Completed"}
    refusal = alpha.refusal(_resized(stored, *size), stored)
    if not expected:
        assert refusal is None
    else:
        assert refusal is not None
        for text in expected:
            assert text in refusal.message


def test_without_the_gate_sizes_are_immutable(contract: Contract) -> None:
    stored = contract.defaulted(_sized())
    refusal = contract.refusal(_resized(stored, 4, 4), stored)
    assert refusal is not None and IMMUTABLE_WHILE_RUNNING in refusal.message


def test_the_packaged_embedded_types_are_the_installed_crds() -> None:
    """``controller/api/embedded-types.json`` (the controller's own contract; its image has no
    manifests/) is what ``make crd`` writes for the committed CRD: out of date, this fails."""
    packaged = (REPO / crdgen.EMBEDDED_OUT).read_text()
    assert packaged == validation.embedded_types_json(_load(CRD_FILE)), "run `make crd`"
    for which, (crd_path, _) in INSTALLED.items():
        installed = Contract.from_crd(_load(crd_path))
        built = validation.packaged(installed.gates)
        assert (built.root, built.policy) == (installed.root, installed.policy), which
