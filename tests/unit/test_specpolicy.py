"""controller.api.specpolicy: which CRD rules move to the admission policy, and how they read.

The policy's behaviour on a real API server (every rule, on create and update, on the oldest
supported release too) is tests/integration/test_crd.py's and test_oldest_kubernetes.py's; these
check the translation itself and the committed files.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller import features
from controller.api import schema, specpolicy
from controller.jobset import api

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "manifests/crd/jobsets.jobset.x-k8s.io.yaml"
POLICIES = {
    features.DEFAULT: ROOT / "manifests/crd/policy.yaml",
    features.ALPHA: ROOT / "manifests/components/alpha-features/policy.yaml",
}


def _crd(root: Obj) -> Obj:
    return {"spec": {"versions": [{"schema": {"openAPIV3Schema": root}}]}}


def _rule(cel: str, message: str = "m", **extra: str) -> Obj:
    return {"rule": cel, "message": message, **extra}


TOY = _crd(
    {
        "type": "object",
        "x-kubernetes-validations": [_rule("size(self.metadata.name) < 9", "short")],
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [_rule("self == oldSelf", "frozen")],
                "properties": {
                    "network": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            _rule("self.__namespace__ != 'x'", "ns", fieldPath=".subdomain")
                        ],
                    },
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "x-kubernetes-validations": [_rule("has(self.name)", "named")],
                        },
                    },
                },
            }
        },
    }
)


def test_split_moves_the_rules_of_object_nodes_and_keeps_those_of_list_items() -> None:
    crd, sites = specpolicy.split(TOY)
    assert [(s.path, s.rule["message"]) for s in sites] == [
        (("spec", "network"), "ns"),  # the deepest first
        (("spec",), "frozen"),
        ((), "short"),
    ]
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "x-kubernetes-validations" not in root
    assert "x-kubernetes-validations" not in root["properties"]["spec"]
    item = root["properties"]["spec"]["properties"]["items"]["items"]
    assert item["x-kubernetes-validations"] == [_rule("has(self.name)", "named")]
    assert "x-kubernetes-validations" in TOY["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_a_rule_runs_only_where_its_node_is_present_with_self_bound_to_it() -> None:
    site = specpolicy.Site(("spec", "network"), _rule("self.__namespace__ != 'x'"))
    assert specpolicy.expression(site) == (
        "!has(object.spec) || !has(object.spec.network) || "
        "[object.spec.network].all(self, self.namespace != 'x') || "
        "(oldObject != null && has(oldObject.spec) && has(oldObject.spec.network) && "
        "![oldObject.spec.network].all(self, self.namespace != 'x'))"
    )
    root = specpolicy.Site((), _rule("size(self.metadata.name) < 9"))
    assert specpolicy.expression(root) == (
        "[object].all(self, size(self.metadata.name) < 9) || "
        "(oldObject != null && ![oldObject].all(self, size(self.metadata.name) < 9))"
    )


def test_a_transition_rule_holds_on_create_and_where_the_old_object_lacks_the_node() -> None:
    site = specpolicy.Site(("spec", "network"), _rule("self == oldSelf"))
    assert site.transition
    assert specpolicy.expression(site) == (
        "!has(object.spec) || !has(object.spec.network) || oldObject == null || "
        "!has(oldObject.spec) || !has(oldObject.spec.network) || [object.spec.network].all("
        "self, [oldObject.spec.network].all(oldSelf, self == oldSelf))"
    )


def test_unescape_only_touches_escaped_reserved_words() -> None:
    assert specpolicy.unescape("self.__namespace__ + self.__in__") == "self.namespace + self.in"
    assert specpolicy.unescape("self.__custom__ + self.a__namespace__b") == (
        "self.__custom__ + self.a__namespace__b"
    )


def test_where_joins_the_node_path_and_the_rules_field_path() -> None:
    assert specpolicy.Site(("spec",), _rule("x", fieldPath=".coordinator.jobIndex")).where == (
        "spec.coordinator.jobIndex"
    )
    assert specpolicy.Site((), _rule("x", fieldPath=".spec")).where == "spec"
    assert specpolicy.Site(("spec", "network"), _rule("x")).where == "spec.network"


def test_one_validation_lists_every_failing_rule_with_where_it_is() -> None:
    _, sites = specpolicy.split(TOY)
    sites = [*sites, specpolicy.Site(("spec",), _rule("true", "d", messageExpression="'d: ' + x"))]
    variables, (check,) = specpolicy.validations(sites)
    assert [v["name"] for v in variables] == ["rule0", "rule1", "rule2", "rule3"]
    assert check["expression"] == (
        "variables.rule0 && variables.rule1 && variables.rule2 && variables.rule3"
    )
    message = check["messageExpression"]
    assert "(variables.rule0 ? '' : '; ' + 'spec.network.subdomain: ns')" in message
    assert "(variables.rule2 ? '' : '; ' + 'short')" in message  # the root: no where
    assert "'spec: ' + string([object.spec].map(self, 'd: ' + x)[0])" in message
    assert message.endswith(".map(m, m == '' ? '' : m.substring(2))[0]")
    assert check["reason"] == "Invalid"


def test_the_policy_matches_creates_and_spec_changes_of_jobsets_only() -> None:
    policy = specpolicy.policy([])
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["jobsets"]  # not jobsets/status
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert spec["matchConditions"] == [
        {"name": "spec-written", "expression": specpolicy.SPEC_CHANGED}
    ]
    binding = specpolicy.binding()
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }


@pytest.mark.parametrize("value", [api.CONTROLLER_NAME, "example.com/it's-a-canary"])
def test_the_policy_holds_the_managed_by_value_as_a_string_literal(value: str) -> None:
    """Its first variable, a CEL string in double quotes (a managedBy value has none to
    escape), which the installs set and ``managed_by_of`` reads back."""
    policy = specpolicy.policy([], value)
    first = policy["spec"]["variables"][0]
    assert first == {"name": "managedBy", "expression": f'"{value}"'}
    assert specpolicy.managed_by_of(policy) == value
    assert specpolicy.managed_by_of(specpolicy.installed_view(policy)) == value


def test_the_committed_policies_hold_upstreams_value_once() -> None:
    """The text the chart replaces (and a kustomize overlay's replacement targets) is there
    exactly once."""
    literal = f"'\"{api.CONTROLLER_NAME}\"'"
    for path in POLICIES.values():
        assert path.read_text().count(literal) == 1, path
        assert specpolicy.managed_by_of(yaml.safe_load(path.read_text())) == api.CONTROLLER_NAME


def test_our_rules_judge_our_jobsets_and_upstreams_crd_rules_the_others() -> None:
    """One validation per side of ``managedHere``: this project's rules for the JobSets the
    controller manages, upstream CRD's for the others (its transition rules and the
    startupPolicy/dependsOn exclusion, on the same nodes, as a CRD rule runs)."""
    spec = specpolicy.policy(specpolicy.split(TOY)[1])["spec"]
    names = [v["name"] for v in spec["variables"]]
    assert names[:2] == [specpolicy.MANAGED_BY, specpolicy.MANAGED_HERE]
    assert names[2:5] == ["rule0", "rule1", "rule2"]
    assert names[5:] == [f"upstream{i}" for i in range(len(specpolicy.UPSTREAM_SITES))]
    ours, theirs = spec["validations"]
    assert ours["expression"].startswith("!variables.managedHere || (variables.rule0 && ")
    assert theirs["expression"].startswith("variables.managedHere || (variables.upstream0 && ")
    assert [(s.path, s.transition) for s in specpolicy.UPSTREAM_SITES] == [
        (("spec",), False),
        (("spec", "network"), True),
        (("spec", "successPolicy"), True),
        (("spec", "failurePolicy"), True),
        (("spec", "startupPolicy"), True),
        (("spec", "volumeClaimPolicies"), True),
    ]
    assert "'spec.network: is immutable'" in theirs["messageExpression"]
    # Ours: every JobSet with upstream's reserved value, else the JobSets naming the value, in
    # the new or in the stored object (a change of managedBy is judged), as preflight reads it.
    here = specpolicy.MANAGED_HERE_CEL
    assert here.startswith("[variables.managedBy].all(m, ")
    assert f"m == '{api.CONTROLLER_NAME}'" in here
    assert "object.?spec.?managedBy.orValue('') == m" in here
    assert "oldObject != null && oldObject.?spec.?managedBy.orValue('') == m" in here


def _full_crd(gates: features.FeatureGates) -> Obj:
    """The CRD with every rule (before the split), from the committed CRD's embedded types."""
    committed = yaml.safe_load(CRD_FILE.read_text())
    root = committed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rjob = root["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    claim = root["properties"]["spec"]["properties"]["volumeClaimPolicies"]["items"]
    job_template = copy.deepcopy(rjob["properties"]["template"])
    claim_template = copy.deepcopy(claim["properties"]["templates"]["items"])
    for node in (job_template, claim_template):
        _strip_rules(node)
    return schema.custom_resource_definition(job_template, claim_template, gates)


def _strip_rules(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("x-kubernetes-validations", None)
        for value in node.values():
            _strip_rules(value)
    elif isinstance(node, list):
        for value in node:
            _strip_rules(value)


def _count_rules(node: Any) -> int:
    if isinstance(node, dict):
        own = len(node.get("x-kubernetes-validations", []))
        return own + sum(_count_rules(v) for v in node.values())
    if isinstance(node, list):
        return sum(_count_rules(v) for v in node)
    return 0


@pytest.mark.parametrize("gates", list(POLICIES), ids=["default", "alpha"])
def test_the_committed_policy_holds_exactly_the_rules_the_crd_does_not(
    gates: features.FeatureGates,
) -> None:
    full = _full_crd(gates)
    stripped, sites = specpolicy.policy_sites(full)
    committed = yaml.safe_load(POLICIES[gates].read_text())
    assert committed["spec"] == specpolicy.policy(sites)["spec"]
    # Every rule of the CRD is in one of them; the policy also has the rules on the metadata.
    metadata = len(specpolicy.METADATA_SITES)
    assert _count_rules(stripped) + len(sites) - metadata == _count_rules(full)
    variables = committed["spec"]["variables"]
    assert len([v for v in variables if v["name"].startswith("rule")]) == len(sites)


def _installed() -> tuple[Obj, Obj]:
    return (
        specpolicy.installed_view(specpolicy.policy([])),
        specpolicy.installed_view(specpolicy.binding()),
    )


def test_installed_view_keeps_what_missing_reads_and_not_the_cel() -> None:
    full = specpolicy.policy(specpolicy.split(TOY)[1])
    view = specpolicy.installed_view(full)
    assert set(view["spec"]) == {"failurePolicy", "matchConstraints", "variables"}
    assert view["spec"]["variables"] == [
        {"name": "managedBy", "expression": f'"{api.CONTROLLER_NAME}"'}
    ]
    assert view["metadata"] == {"name": specpolicy.POLICY_NAME}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda p, b: (None, b), "is not installed"),
        (lambda p, b: (p, None), "binding 'jobsets.jobset.x-k8s.io' of"),
        (lambda p, b: ({**p, "spec": {**p["spec"], "failurePolicy": "Ignore"}}, b), "Ignore"),
        (lambda p, b: (p, {**b, "spec": {**b["spec"], "validationActions": ["Warn"]}}), "deny"),
        (lambda p, b: (p, {**b, "spec": {**b["spec"], "policyName": "other"}}), "deny"),
        (
            lambda p, b: ({**p, "metadata": {**p["metadata"], "deletionTimestamp": "x"}}, b),
            "is not installed",
        ),
    ],
)
def test_missing_says_why_the_rules_are_not_enforced(change: Any, says: str) -> None:
    policy, binding = change(*_installed())
    why = specpolicy.missing(None, policy, binding)
    assert why is not None and says in why


def test_missing_is_none_when_installed_and_says_so_when_it_may_not_look() -> None:
    assert specpolicy.missing(None, *_installed()) is None
    assert "may not read" in str(specpolicy.missing(403, *_installed()))
    assert "does not serve" in str(specpolicy.missing(404, None, None))


CANARY = "example.com/canary"


def _without_variables(policy: Obj) -> Obj:
    return {**policy, "spec": {k: v for k, v in policy["spec"].items() if k != "variables"}}


@pytest.mark.parametrize(
    ("policy", "serves", "says"),
    [
        # An older release's policy: no managedBy variable, every JobSet judged.
        (_without_variables(specpolicy.policy([])), api.CONTROLLER_NAME,
         "older release's, without the variable 'managedBy': it judges every JobSet"),
        (specpolicy.policy([], CANARY), api.CONTROLLER_NAME,
         f"judges the JobSets of {CANARY!r} but this controller serves {api.CONTROLLER_NAME!r}"),
        (specpolicy.policy([]), CANARY,
         f"judges the JobSets of {api.CONTROLLER_NAME!r} but this controller serves {CANARY!r}"),
    ],
)  # fmt: skip
def test_missing_says_when_the_policy_judges_another_controllers_jobsets(
    policy: Obj, serves: str, says: str
) -> None:
    installed = specpolicy.installed_view(policy)
    why = specpolicy.missing(None, installed, _installed()[1], serves)
    assert why is not None and says in why, why


@pytest.mark.parametrize("serves", [api.CONTROLLER_NAME, CANARY])
def test_missing_is_none_when_the_policy_holds_the_value_served(serves: str) -> None:
    installed = specpolicy.installed_view(specpolicy.policy([], serves))
    assert specpolicy.missing(None, installed, _installed()[1], serves) is None
