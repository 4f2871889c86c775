"""Names on the outside: the JobSet API's group, labels, annotations, conditions and reasons.

These are facts of the upstream JobSet API (jobset.x-k8s.io/v1alpha2) that clients and tools rely
on; they must not change.
"""

from __future__ import annotations

from typing import Final

from controller.runtime.client import Resource

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "JobSet"
JOBSETS = Resource(GROUP, VERSION, "jobsets", KIND)

# The API's defaults (upstream's). Each is written once: the CRD's schema writes it into a stored
# JobSet (controller/api/schema.py), and the parser applies the same value to an object that lacks
# it (stored before the CRD had the default, or hand-made in a test).
DEFAULT_REPLICAS: Final = 1
DEFAULT_GROUP_NAME: Final = "default"
DEFAULT_COMPLETION_MODE: Final = (
    "Indexed"  # of a replicated job's Job template (upstream's webhook)
)
DEFAULT_POD_RESTART_POLICY: Final = "OnFailure"  # of its pod template (upstream's webhook)
DEFAULT_ENABLE_DNS_HOSTNAMES: Final = True
DEFAULT_PUBLISH_NOT_READY_ADDRESSES: Final = True
DEFAULT_SUCCESS_OPERATOR: Final = "All"
DEFAULT_RESTART_STRATEGY: Final = "Recreate"
DEFAULT_STARTUP_ORDER: Final = "AnyOrder"
DEFAULT_VOLUME_SCOPE: Final = "JobSet"
DEFAULT_WHEN_DELETED: Final = "Delete"
DEFAULT_WHEN_COMPLETED: Final = "Retain"
DEFAULT_WHEN_FAILED: Final = "Retain"
DEFAULT_WHEN_SCALED: Final = "Retain"
DEFAULT_WHEN_SUSPENDED: Final = "Retain"

# The built-in controller's reserved managedBy value (JobSets with another value are skipped).
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"

# Labels and annotations on child Jobs and their pods.
_PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = _PREFIX + "jobset-name"
JOBSET_UID = _PREFIX + "jobset-uid"
REPLICATED_JOB_NAME = _PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = _PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS = _PREFIX + "global-replicas"
JOB_INDEX = _PREFIX + "job-index"
JOB_GLOBAL_INDEX = _PREFIX + "job-global-index"
JOB_KEY = _PREFIX + "job-key"
RESTART_ATTEMPT = _PREFIX + "restart-attempt"
# Label and annotation (RestartJob gate on): the Job's individual restart attempt, i.e.
# status.replicatedJobsStatus[<replicated job>].jobRestarts[<job index>] when it was created.
JOB_RESTART_ATTEMPT = _PREFIX + "job-restart-attempt"
GROUP_NAME = _PREFIX + "group-name"
GROUP_REPLICAS = _PREFIX + "group-replicas"
JOB_GROUP_INDEX = _PREFIX + "job-group-index"
COORDINATOR = _PREFIX + "coordinator"

# Condition types.
COMPLETED = "Completed"
FAILED = "Failed"
SUSPENDED = "Suspended"
STARTUP_POLICY_IN_PROGRESS = "StartupPolicyInProgress"
STARTUP_POLICY_COMPLETED = "StartupPolicyCompleted"
# True from a restart by the failure policy until the new attempt's Jobs are all ready.
RESTARTING = "RestartingJobSet"
# Ours: the spec is valid per the schema but the controller cannot act on it.
SPEC_INVALID = "SpecInvalid"

# Condition and Event reasons, with upstream's messages where upstream has them.
REASON_ALL_JOBS_COMPLETED = "AllJobsCompleted"
MESSAGE_ALL_JOBS_COMPLETED = "jobset completed successfully"
REASON_FAILED_JOBS = "FailedJobs"
MESSAGE_FAILED_JOBS = "jobset failed due to one or more job failures"
REASON_REACHED_MAX_RESTARTS = "ReachedMaxRestarts"
MESSAGE_REACHED_MAX_RESTARTS = "jobset failed due to reaching max number of restarts"
REASON_JOB_CREATION_FAILED = "JobCreationFailed"
REASON_SERVICE_CREATION_FAILED = "HeadlessServiceCreationFailed"
REASON_SUSPENDED = "SuspendedJobs"
MESSAGE_SUSPENDED = "jobset is suspended"
REASON_RESUMED = "ResumeJobs"
MESSAGE_RESUMED = "jobset is resumed"
REASON_IN_ORDER_IN_PROGRESS = "InOrderStartupPolicyInProgress"
MESSAGE_IN_ORDER_IN_PROGRESS = "in order startup policy is in progress"
REASON_IN_ORDER_COMPLETED = "InOrderStartupPolicyCompleted"
MESSAGE_IN_ORDER_COMPLETED = "in order startup policy has completed"
REASON_RESTARTING = "Restarting"
REASON_FAIL_ACTION = "FailJobSetFailurePolicyAction"
MESSAGE_FAIL_ACTION = "applying FailJobSet failure policy action"
REASON_RESTART_ACTION = "RestartJobSetFailurePolicyAction"
MESSAGE_RESTART_ACTION = "applying RestartJobSet failure policy action"
REASON_RESTART_IGNORE_MAX_ACTION = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
MESSAGE_RESTART_IGNORE_MAX_ACTION = (
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"
)
# RestartJob feature gate (upstream alpha): only the failed Job is recreated.
REASON_RESTART_JOB_ACTION = "RestartJobFailurePolicyAction"
MESSAGE_RESTART_JOB_ACTION = "applying RestartJob failure policy action"
REASON_RESTART_JOB_IGNORE_MAX_ACTION = "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
MESSAGE_RESTART_JOB_IGNORE_MAX_ACTION = (
    "applying RestartJobAndIgnoreMaxRestarts failure policy action"
)
# RestartingJobSet: True with FailurePolicy_<rule name> (the rule that matched) or the default
# reason (no rule matched); False once the new attempt's Jobs are ready, or the JobSet failed,
# completed or was suspended.
REASON_RESTARTING_DEFAULT = "DefaultFailurePolicy"
REASON_RESTARTING_RULE_PREFIX = "FailurePolicy_"
REASON_JOBS_READY = "JobsReady"
MESSAGE_JOBS_READY = "all jobs are ready"
REASON_RESTART_ENDED_FAILED = "JobSetFailed"
MESSAGE_RESTART_ENDED_FAILED = "jobset failed"
REASON_RESTART_ENDED_COMPLETED = "JobSetCompleted"
REASON_RESTART_ENDED_SUSPENDED = "JobSetSuspended"
REASON_SPEC_INVALID = "InvalidSpec"
# SpecInvalid=False once an edit made the JobSet valid again.
REASON_SPEC_VALID = "ValidSpec"
MESSAGE_SPEC_VALID = "the spec is valid: the controller acts on it"

# Failure policy actions.
FAIL_JOBSET = "FailJobSet"
RESTART_JOBSET = "RestartJobSet"
RESTART_JOBSET_IGNORE_MAX = "RestartJobSetAndIgnoreMaxRestarts"
# Behind the RestartJob feature gate: restart only the failed Job.
RESTART_JOB = "RestartJob"
RESTART_JOB_IGNORE_MAX = "RestartJobAndIgnoreMaxRestarts"
RESTART_JOB_ACTIONS = (RESTART_JOB, RESTART_JOB_IGNORE_MAX)
# Upstream's message (its webhook) for those actions while the gate is off.
MESSAGE_RESTART_JOB_GATED = (
    "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
    "RestartJob feature gate is disabled"
)
# Upstream's limit: jobRestarts holds one entry per Job index, at most this many.
MAX_REPLICAS_RESTART_JOB = 1024
MESSAGE_RESTART_JOB_REPLICAS = (
    "JobSet cannot have a failure policy rule with RestartJob or RestartJobAndIgnoreMaxRestarts "
    f"action and a replicated job with replicas > {MAX_REPLICAS_RESTART_JOB}"
)
# Status fields per replicated job (int arrays indexed by job index).
JOB_RESTARTS = "jobRestarts"
JOB_RESTARTS_TOWARDS_MAX = "jobRestartsCountTowardsMax"

TERMINAL_COMPLETED = "Completed"
TERMINAL_FAILED = "Failed"

# Child Jobs of one JobSet at most (admission and parse): every reconcile plans each of them
# (about 0.15 ms per Job with a Job-scope claim), so one reconcile of the largest JobSet stays
# near a second of the event loop.
MAX_CHILD_JOBS = 10_000

# The volumes' condition (ours, not upstream's) and the reasons a refused claim write gives it:
# here, beside the other conditions, for both the volumes package and writefailures to read.
VOLUMES_READY: Final = "VolumesReady"
REASON_CLAIMS_MISSING: Final = "ClaimsNotCreated"
# Upstream JobSet's Event reason for a claim it could not create (PVCCreationFailed), kept so
# that alerts on it carry over; here it is the condition's reason too.
REASON_CLAIM_CREATION_FAILED: Final = "PVCCreationFailed"
