"""Every number that bounds the JobSet's API, named once.

Kubernetes' own limits (what the API server refuses in the objects the controller makes from a
JobSet), and this API's bounds (most of them keep the estimated cost of the CRD's CEL rules
within the API server's budget: ``schema.py``). Each is read from here, at the time it is used,
by

- the records of ``fields`` (a field's or a list's bound: the CRD node, the docs' field table,
  the parser's check),
- the CEL of ``schema``'s rules and their messages, and the rules' Python predicates
  (``predicates``),
- the controller's own checks of the same limits (``jobset.placement``, ``jobset.model``,
  ``jobset.volumes.spec``, ``jobset.messagepatterns``),

so a changed bound changes each of them (tests/unit/test_fields.py). Read a bound as
``bounds.NAME``, not ``from bounds import NAME``: the tests change one for a test's duration.
"""

from __future__ import annotations

from typing import Final

# ------------------------------------------------------------------ Kubernetes' limits

MAX_DNS_LABEL: Final = 63  # a DNS-1123 or DNS-1035 label: object, volume and Service names
MAX_DNS_SUBDOMAIN: Final = 253  # a DNS-1123 subdomain: object names, label key prefixes
MAX_LABEL_VALUE: Final = 63  # a label value; also the name part of a label key
# A label key (qualified name): a DNS subdomain prefix, '/', a name.
MAX_LABEL_KEY: Final = MAX_DNS_SUBDOMAIN + 1 + MAX_LABEL_VALUE
MAX_ANNOTATIONS_SIZE: Final = 256 * 1024  # all annotations of an object, keys and values
MAX_INT32: Final = 2147483647  # the counters of Jobs and JobSets (pods, replicas)
# The '-' and five random characters the Job controller appends to a pod's name.
POD_NAME_SUFFIX: Final = 6
# A metav1.Condition's fields.
MAX_CONDITION_TYPE: Final = 316
MAX_CONDITION_REASON: Final = 1024
MAX_CONDITION_MESSAGE: Final = 32768

# ------------------------------------------------------------------ names in a JobSet

MAX_NAME: Final = MAX_DNS_LABEL  # replicated job, template, volume, container and mount names
MAX_OBJECT_NAME: Final = MAX_DNS_SUBDOMAIN  # names of other objects: JobSet, class, snapshot
MAX_RULE_NAME: Final = 128  # a failure policy rule's name
MAX_JOB_NAME: Final = MAX_DNS_LABEL  # a child Job's name, its pods' hostname: a DNS-1035 label
MAX_CLAIM_NAME: Final = MAX_DNS_SUBDOMAIN  # a claim made from a volume claim template
MAX_MANAGED_BY: Final = 63  # spec.managedBy, as upstream
MAX_PATTERN: Final = 1024  # one failure message pattern
MAX_QUANTITY: Final = 64  # a quantity written as a string, e.g. "1000Gi"

# ------------------------------------------------------------------ lists and maps (CEL cost)

MAX_REPLICATED_JOBS: Final = 100  # upstream: no bound; 128 exceeds untargeted-mount's CEL budget
MAX_DEPENDS_ON: Final = 5  # upstream's maxItems for replicatedJobs[].dependsOn
MAX_FAILURE_RULES: Final = 100  # upstream: no bound; 128 exceeds failure-rule-names-unique's
MAX_CONTAINERS: Final = 16  # containers, and initContainers, of one pod template
MAX_VOLUME_MOUNTS: Final = 64  # per container
MAX_POD_VOLUMES: Final = 256  # Kubernetes: no bound; 512 exceeds untargeted-mount's CEL budget
MAX_VOLUME_CLAIM_POLICIES: Final = 50
MAX_TEMPLATES_PER_POLICY: Final = 50  # upstream's maxItems for volumeClaimPolicies[].templates
MAX_CLAIM_RESOURCES: Final = 16  # keys of a claim template's resources.requests / limits
MAX_CLAIM_LABELS: Final = 32  # labels, and annotations, of a claim template
MAX_SNAPSHOT_HISTORY: Final = 100  # snapshotPolicy.historyLimit
