"""The Pod-scope admission policy: the shipped manifests and whether an installed one can work."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from controller.api import admissiongen
from controller.jobset.volumes import admission
from controller.jobset.volumes.podscope import POLICY_NAME

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[3]


def _as_installed(obj: Obj) -> Obj:
    """``obj`` as the API server returns it: metadata filled in, defaults added to the spec."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid="u-1", resourceVersion="7", generation=1)
    spec = out["spec"]
    if out["kind"] == "MutatingAdmissionPolicy":
        spec["matchConstraints"].update(matchPolicy="Equivalent", namespaceSelector={})
        spec["matchConstraints"]["resourceRules"][0]["scope"] = "*"
    return out


POLICY = _as_installed(admission.policy())
BINDING = _as_installed(admission.binding())


def _edited(obj: Obj, edit: Any) -> Obj:
    out = copy.deepcopy(obj)
    edit(out)
    return out


def test_the_committed_manifests_are_the_generated_ones() -> None:
    for name, text in admissiongen.manifests().items():
        path = ROOT / "manifests" / "pod-scope" / name
        assert path.read_text() == text, f"{path} is out of date: run `make crd`"


def test_installed_as_shipped_works_whatever_the_server_defaulted() -> None:
    assert admission.missing(None, POLICY, BINDING) is None


@pytest.mark.parametrize(
    ("unavailable", "policy", "binding", "says"),
    [
        pytest.param(
            admission.not_served(404), None, None,
            "the API server does not serve admissionregistration.k8s.io/v1 "
            "mutatingadmissionpolicies: Pod scope needs Kubernetes 1.36 or later",
            id="not-served",
        ),
        pytest.param(
            admission.not_served(403), None, None,
            "the controller may not read mutatingadmissionpolicies",
            id="forbidden",
        ),
        pytest.param(
            None, None, BINDING, f"MutatingAdmissionPolicy '{POLICY_NAME}', which is not installed",
            id="no-policy",
        ),
        pytest.param(
            None, _edited(POLICY, lambda p: p["metadata"].update(deletionTimestamp="2026-01-01")),
            BINDING, "which is not installed", id="policy-being-deleted",
        ),
        pytest.param(
            None,
            _edited(POLICY, lambda p: p["spec"]["mutations"][0]["applyConfiguration"].update(
                expression="Object{}")),
            BINDING,
            "the installed one differs at spec.mutations[0].applyConfiguration.expression",
            id="edited-mutation",
        ),
        pytest.param(
            None, _edited(POLICY, lambda p: p["spec"]["matchConditions"].pop()), BINDING,
            "differs at spec.matchConditions", id="a-condition-less",
        ),
        pytest.param(
            None, _edited(POLICY, lambda p: p["spec"].update(failurePolicy="Ignore")), BINDING,
            "differs at spec.failurePolicy", id="fails-open",
        ),
        pytest.param(
            None,
            _edited(POLICY, lambda p: p["spec"]["matchConstraints"].pop("objectSelector")),
            BINDING, "differs at spec.matchConstraints.objectSelector", id="selects-all-pods",
        ),
        pytest.param(
            None, POLICY, None,
            f"MutatingAdmissionPolicyBinding '{POLICY_NAME}' (without it the policy does "
            "nothing), which is not installed",
            id="no-binding",
        ),
        pytest.param(
            None, POLICY, _edited(BINDING, lambda b: b["spec"].update(policyName="other")),
            "and it binds 'other'", id="binding-binds-another",
        ),
    ],
)  # fmt: skip
def test_missing_says_what_is_wrong_and_how_to_install(
    unavailable: str | None, policy: Obj | None, binding: Obj | None, says: str
) -> None:
    message = admission.missing(unavailable, policy, binding)
    assert message is not None
    assert says in message
    assert POLICY_NAME in message


def test_every_missing_policy_message_names_the_install_command() -> None:
    for policy, binding in ((None, BINDING), (POLICY, None)):
        message = admission.missing(None, policy, binding)
        assert message is not None
        assert "kubectl apply --server-side -k manifests/pod-scope" in message


def test_fields_an_operator_adds_are_not_differences() -> None:
    """Labels, annotations, a narrowed binding: the policy still resolves what it selects."""
    labelled = _edited(POLICY, lambda p: p["metadata"].update(labels={"team": "ml"}))
    narrowed = _edited(
        BINDING,
        lambda b: b["spec"].update(
            matchResources={"namespaceSelector": {"matchLabels": {"ml": "true"}}}
        ),
    )
    assert admission.missing(None, labelled, narrowed) is None


def test_the_policy_selects_only_labelled_pods_and_fails_closed() -> None:
    spec = admission.policy()["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["objectSelector"] == {
        "matchLabels": {"jobset.sigs.k8s.io/pod-scope-volumes": "true"}
    }
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]


def test_unresolved_pods_are_named_with_their_placeholders_and_the_way_out() -> None:
    pods = {f"js-w-0-{i}-abcde": ["ckpt-js-w-0-POD-INDEX"] for i in range(5)}
    message = admission.unresolved("team-a", "js", pods)
    assert message.startswith("5 pod(s) of this JobSet were admitted without")
    assert "js-w-0-0-abcde (ckpt-js-w-0-POD-INDEX), js-w-0-1-abcde" in message
    assert "and 2 more" in message
    assert "excludes namespace 'team-a'" in message
    assert "kubectl patch jobset js -n team-a" in message


def test_settling_says_how_long_it_waits() -> None:
    assert "waiting 5s for the API server to load them" in admission.settling()


# ----------------------------------------------------------------------------- readiness


def _installed(version: str = "1") -> tuple[dict[str, Any], dict[str, Any]]:
    policy, binding = admission.policy(), admission.binding()
    policy["metadata"]["resourceVersion"] = version
    binding["metadata"]["resourceVersion"] = "7"
    return policy, binding


def _ready(
    unavailable: str | None = None,
    installed: tuple[dict[str, Any], dict[str, Any]] | None = None,
    stuck: dict[str, list[str]] | None = None,
    seen: admission.Seen | None = None,
    now: float = 100.0,
) -> admission.Readiness:
    policy, binding = installed if installed is not None else (None, None)
    return admission.readiness(
        unavailable,
        policy,
        binding,
        lambda: stuck or {},
        namespace="ns",
        jobset="js",
        seen=seen,
        now=now,
    )


SEEN_LONG_AGO = admission.Seen(("1", "7"), 0.0)


@pytest.mark.parametrize(
    ("case", "reason", "look_again", "seen"),
    [
        pytest.param(
            _ready(unavailable=admission.NOT_WATCHED), admission.REASON_POLICY_MISSING, None, None,
            id="not-watched",
        ),
        pytest.param(_ready(), admission.REASON_POLICY_MISSING, None, None, id="not-installed"),
        # First seen now: the settle window starts, and the pass looks again when it ends.
        pytest.param(
            _ready(installed=_installed()), admission.REASON_POLICY_MISSING,
            admission.SETTLE_SECONDS, admission.Seen(("1", "7"), 100.0), id="just-installed",
        ),
        pytest.param(
            _ready(installed=_installed(), seen=admission.Seen(("1", "7"), 98.0)),
            admission.REASON_POLICY_MISSING, admission.SETTLE_SECONDS - 2,
            admission.Seen(("1", "7"), 98.0), id="settling",
        ),
        # Changed since (another resourceVersion): the window starts again.
        pytest.param(
            _ready(installed=_installed("2"), seen=SEEN_LONG_AGO), admission.REASON_POLICY_MISSING,
            admission.SETTLE_SECONDS, admission.Seen(("2", "7"), 100.0), id="changed",
        ),
        pytest.param(
            _ready(installed=_installed(), seen=SEEN_LONG_AGO), None, None, SEEN_LONG_AGO,
            id="ready",
        ),
        pytest.param(
            _ready(installed=_installed(), seen=SEEN_LONG_AGO, stuck={"p": ["x-POD-INDEX"]}),
            admission.REASON_PODS_UNRESOLVED, None, SEEN_LONG_AGO, id="pods-unresolved",
        ),
    ],
)  # fmt: skip
def test_readiness(
    case: admission.Readiness, reason: str | None, look_again: float | None, seen: object
) -> None:
    assert (case.blocked.reason if case.blocked else None) == reason
    assert case.look_again == look_again
    assert case.seen == seen
