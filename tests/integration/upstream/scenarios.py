# ruff: noqa: E501  (upstream's names are kept verbatim, whatever their length)
"""The names of upstream JobSet's integration scenarios (kubernetes-sigs/jobset at 08dfbdf:
test/integration/controller and test/integration/webhook), one port each in this package.

Names are identifiers, kept verbatim so that a port can be found from upstream's name; the tests
are written here from each scenario's inputs and observable outcomes, not from upstream's code.
``scenario`` tags a test with the name it ports and refuses a name that is not in the list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., object])

CONTROLLER = "controller"
WEBHOOK = "webhook"

SCENARIOS: tuple[tuple[str, str], ...] = (
    (CONTROLLER, "setting suspend is allowed"),
    (CONTROLLER, "jobset should successfully create jobs"),
    (CONTROLLER, "jobset should succeed after all jobs succeed"),
    (CONTROLLER, "jobset should ignore jobs with same owner name but different owner UID"),
    (CONTROLLER, "jobset should not succeed if any job is not completed"),
    (CONTROLLER, "success policy 'all' with empty replicated jobs list"),
    (CONTROLLER, "success policy 'all' with replicated jobs specified"),
    (CONTROLLER, "success policy 'any' with replicated job specified"),
    (CONTROLLER, "success policy 'any' without replicated job specified"),
    (CONTROLLER, "[failure policy] jobset with no failure policy should fail if any jobs fail"),
    (
        CONTROLLER,
        "jobset with DNS hostnames enabled should created 1 headless service per job and succeed when all jobs succeed",
    ),
    (CONTROLLER, "succeeds from first run"),
    (CONTROLLER, "fails from first run, no restarts"),
    (CONTROLLER, "jobset fails after reaching max restarts"),
    (
        CONTROLLER,
        "[failure policy] jobset fails immediately with FailJobSet failure policy action.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure reason is not matched.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure message is not matched.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure message is not matched, even if reason is matched.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset fails immediately with FailJobSet failure policy action as the failure reason and message are matched.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset fails immediately with FailJobSet failure policy action as the failure reason and message are matched, even if message string is not exactly equal to pattern string.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset restarts with RestartJobSet failure policy action (without RestartJob feature gate).",
    ),
    (CONTROLLER, "jobset restarting condition transitions"),
    (
        CONTROLLER,
        "[failure policy] jobset restarts with RestartJobSet failure policy action (with RestartJob feature gate).",
    ),
    (CONTROLLER, "[failure policy] jobset restarts with RestartJob failure policy action."),
    (
        CONTROLLER,
        "[failure policy] jobset restarts with RestartJobAndIgnoreMaxRestarts failure policy action.",
    ),
    (CONTROLLER, "[failure policy] jobs are restarted individually with Recreate strategy."),
    (
        CONTROLLER,
        "[failure policy] jobs are recreated after all Jobs are deleted with BlockingRecreate strategy.",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset restarts with RestartJobSetAndIgnoreMaxRestarts failure policy action (without RestartJob feature gate).",
    ),
    (
        CONTROLLER,
        "[failure policy] jobset restarts with RestartJobSetAndIgnoreMaxRestarts failure policy action (with RestartJob feature gate).",
    ),
    (
        CONTROLLER,
        "[failure policy] job fails and the parent replicated job is contained in TargetReplicatedJobs.",
    ),
    (
        CONTROLLER,
        "[failure policy] job fails and the parent replicated job is not contained in TargetReplicatedJobs.",
    ),
    (CONTROLLER, "[failure policy] failure policy rules order verification test 1"),
    (CONTROLLER, "[failure policy] failure policy rules order verification test 2"),
    (CONTROLLER, "[failure policy] failure policy rules order verification test 3"),
    (CONTROLLER, "job succeeds after one failure"),
    (CONTROLLER, "jobset created in suspended state"),
    (CONTROLLER, "resume a suspended jobset"),
    (CONTROLLER, "suspend a running jobset"),
    (CONTROLLER, "service deleted"),
    (
        CONTROLLER,
        "jobset with VolumeClaimPolicies should create two PVC with Delete and Retain policies",
    ),
    (CONTROLLER, "suspended jobset with VolumeClaimPolicies should create PVCs"),
    (CONTROLLER, "update replicatedJobsStatuses after all jobs succeed"),
    (CONTROLLER, "jobset replicatedJobsStatuses should create and update"),
    (CONTROLLER, "active jobs are deleted after jobset succeeds"),
    (CONTROLLER, "active jobs are deleted after jobset fails"),
    (
        CONTROLLER,
        "jobset using generateName with enableDNSHostnames should have headless service name set to the jobset name",
    ),
    (CONTROLLER, "startupPolicy with InOrder; suspend should keep jobs suspended"),
    (CONTROLLER, "startupPolicy with AnyOrder; suspend should keep jobs suspended"),
    (CONTROLLER, "startupPolicy with AnyOrder; resume suspended JobSet"),
    (CONTROLLER, "startupPolicy with InOrder; resume suspended JobSet"),
    (
        CONTROLLER,
        "startupPolicy InOrder; replicated-job-a not ready then replicated-job-b should not run",
    ),
    (
        CONTROLLER,
        "startupPolicy with InOrder; success policy restart; replicated-job-a ready than replicated-job-b should run",
    ),
    (CONTROLLER, "jobset with coordinator set should have annotation and label set on all jobs"),
    (CONTROLLER, "DependsOn: rjob-b depends on ready status of rjob-a"),
    (
        CONTROLLER,
        "DependsOn: rjob-b depends on complete status of rjob-a, and rjob-c depends on ready status of rjob-b",
    ),
    (CONTROLLER, "DependsOn: rjob-c depends on complete status of rjob-a and rjob-b"),
    (
        CONTROLLER,
        "DependsOn: rjob-c depends on ready status of rjob-a and complete status of rjob-b",
    ),
    (
        CONTROLLER,
        "DependsOn: resume suspended JobSet when rjob-b depends on ready status of rjob-a",
    ),
    (CONTROLLER, "Should not create any jobs for it, while suspended"),
    (CONTROLLER, "Should not create any jobs for it, when unsuspended"),
    (CONTROLLER, "Updates to its status are preserved"),
    (CONTROLLER, "JobSet controller should delete it after configured ttl duration passes"),
    (CONTROLLER, "should emit a warning event"),
    (
        CONTROLLER,
        "dynamic horizontal pod scaling propagates parallelism and completions to child jobs",
    ),
    (CONTROLLER, "rejects updates to parallelism and completions"),
    (WEBHOOK, "job.spec.completionMode defaults to indexed if unset"),
    (WEBHOOK, "job.spec.completionMode unchanged if already set"),
    (WEBHOOK, "enableDNSHostnames defaults to true if unset"),
    (WEBHOOK, "publishNotReadyAddresses defaults to true if unset"),
    (WEBHOOK, "pod restart policy defaults to OnFailure if unset"),
    (WEBHOOK, "validate jobSet should not fail on NodeSelectors Update when jobset is suspended"),
    (WEBHOOK, "validate jobSet should fail on NodeSelectors Update"),
    (
        WEBHOOK,
        "validate jobSet immutable for fields over than NodeSelector when jobSet is not suspended",
    ),
    (WEBHOOK, "success policy defaults to all"),
    (WEBHOOK, "success policy with invalid replicatedJob name is rejected"),
    (WEBHOOK, "negative replicated job replicas are rejected"),
    (WEBHOOK, "zero replicated job replicas are accepted"),
    (WEBHOOK, "suspend jobset"),
    (WEBHOOK, "resume jobset"),
    (WEBHOOK, "SuccessPolicy should be immutable"),
    (WEBHOOK, "FailurePolicy should be immutable"),
    (WEBHOOK, "FailurePolicy defaults are applied when empty"),
    (WEBHOOK, "validate jobSet immutable for managedBy field"),
    (WEBHOOK, "updating pod template in suspended jobset is allowed"),
    (WEBHOOK, "updating pod template in running jobset is not allowed"),
    (WEBHOOK, "DependsOn and StartupPolicy: AnyOrder can be set together"),
    (WEBHOOK, "DependsOn and StartupPolicy: InOrder can't be set together"),
    (WEBHOOK, "DependsOn can't be set for the first ReplicatedJob"),
    (WEBHOOK, "DependsOn list must contain valid ReplicatedJob status"),
    (WEBHOOK, "DependsOn must be immutable"),
    (WEBHOOK, "JobSet can create with no replicated jobs"),
    (
        WEBHOOK,
        "spec that will lead to invalid coordinator label value (in this case too long due to long JobSet name) should be rejected",
    ),
    (WEBHOOK, "VolumeClaimPolicies defaults are applied when empty"),
    (WEBHOOK, "VolumeClaimPolicies must be immutable"),
    (WEBHOOK, "VolumeClaimPolicies template with namespace should be rejected"),
    (WEBHOOK, "VolumeClaimPolicies exceeding MaxItems=50 should be rejected"),
    (WEBHOOK, "VolumeClaimPolicies templates exceeding MaxItems=50 should be rejected"),
    (
        WEBHOOK,
        "validate updating parallelism and completions is ALLOWED when ElasticJobSet is enabled",
    ),
    (WEBHOOK, "validate updating parallelism and completions FAILS when values are not equal"),
    (WEBHOOK, "validate updating parallelism and completions FAILS for NonIndexed jobs"),
    (WEBHOOK, "validate updating parallelism and completions FAILS when scaling to < 1"),
    (WEBHOOK, "validate updating parallelism and completions FAILS when ElasticJobSet is disabled"),
)

NAMES = frozenset(name for _, name in SCENARIOS)


def scenario(name: str) -> Callable[[F], F]:
    """Mark a test as the port of upstream's scenario ``name`` (exactly as upstream spells it)."""
    if name not in NAMES:
        raise ValueError(f"not an upstream integration scenario: {name!r}")

    def mark(test: F) -> F:
        test.upstream_scenario = name  # type: ignore[attr-defined]
        marked: F = pytest.mark.upstream_scenario(name)(test)
        return marked

    return mark
