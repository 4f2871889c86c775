"""Every entry of docs/api.md's Compatibility lists names the tests that prove it.

"Extensions over upstream" and "Differences from upstream" are what a platform engineer reads
before moving JobSets over from upstream JobSet. Each entry is one bullet that starts with a bold
title. ``PROOF`` maps each title to the tests that check what this project does there (file,
optional class, function, optional parameter id: pytest's node id). This fails when an entry has
no tests, when a title of ``PROOF`` is no entry (renamed or removed), or when a named test does not
exist. The tests are found without importing them (``ast``): the file defines the function, at the
top level or in the class named, and a parameter id in brackets is a string in that file.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
API_MD = REPO / "docs" / "api.md"
SECTIONS = ("### Extensions over upstream", "### Differences from upstream")

CRD = "tests/integration/test_crd.py"
CONTROLLER = "tests/integration/test_jobset_controller.py"
DECIDE = "tests/unit/test_decide.py"
VOLUMES = "tests/integration/test_volumes_controller.py"
VOLUMES_E2E = "tests/e2e/test_volumes_e2e.py"
WRITES = "tests/integration/test_write_failures.py"
MIGRATION = "tests/node/test_migration.py"
OLDEST = "tests/integration/test_oldest_kubernetes.py"
FAILURE = "tests/unit/test_failure.py"
STARTUP = "tests/unit/test_startup.py"
MANIFESTS = "tests/unit/test_deploy_manifests.py"
EVENTS = "tests/integration/test_events.py"
SNAPSHOTS = "tests/integration/test_snapshot_retention.py"
SUSPENDED = "tests/integration/test_suspended_claims.py"
LOST = "tests/integration/test_lost_claims.py"
COLOCATION = "tests/integration/test_colocation_switch.py"
SINGLE_NODE = "tests/unit/volumes/test_singlenode.py"
ANNOTATIONS = "tests/unit/volumes/test_annotations.py"
ELASTIC = "tests/integration/upstream/test_webhook_elastic.py"
COMMAND_LINE = "tests/unit/test_upstream_command_line.py"

# title -> the tests proving it, in the order of docs/api.md.
PROOF: dict[str, tuple[str, ...]] = {
    # ---------------------------------------------------------- Extensions over upstream
    "Volume policies declared in annotations": (
        "tests/integration/test_volume_annotations.py::test_the_api_server_refuses_in_the_"
        "controllers_words",
        "tests/integration/test_volume_annotations.py::test_the_keys_complete_the_spec_and_an_"
        "override_is_reported",
        "tests/node/queued/test_trainer_checkpoints.py::test_every_rank_resumes_from_its_own_rank"
        "_of_the_previous_trainjobs_group_snapshot",
    ),
    "`replicatedJobs[].replicas` may change": (
        f"{CRD}::test_rule_on_update[replicated-jobs-immutable-replicas-raised]",
        f"{CRD}::test_rule_on_update[replicated-jobs-immutable-replicas-lowered]",
        f"{DECIDE}::test_decide[scale-down-deletes-beyond-replicas]",
        f"{DECIDE}::test_jobs_keep_the_replica_labels_they_were_created_with",
        "tests/e2e/test_kueue.py::test_raising_replicas_of_an_admitted_jobset_makes_kueue_stop_and"
        "_readmit_it",
    ),
    "Claims per Job or per pod": (
        f"{VOLUMES_E2E}::test_restarted_jobs_mount_the_same_job_scope_claims",
        "tests/e2e/test_pod_scope_volumes_e2e.py::test_each_pod_mounts_its_own_claim_and_a_restart"
        "_keeps_them",
        "tests/node/test_pod_scope.py::test_each_rank_reads_back_its_own_checkpoint_after_a_restart",
    ),
    "`targetReplicatedJobs`": (
        "tests/unit/volumes/test_desired.py::test_targeted_explicit_in_spec_order_and_implicit",
        f"{CRD}::test_rule_on_create[volume-targets]",
    ),
    "Retention when the JobSet completes, fails or scales down": (
        "tests/unit/volumes/test_lifecycle.py::test_claims_to_delete",
        f"{VOLUMES_E2E}::test_failed_jobset_deletes_claims_with_when_failed_delete",
        f"{VOLUMES}::test_scale_down_with_when_scaled_delete",
        "tests/node/test_data.py::test_release_deletes_the_claims_and_their_directories",
        "tests/unit/test_status.py::test_finished_counts",
    ),
    "Snapshot retention and restore": (
        f"{SNAPSHOTS}::test_a_completed_jobsets_claim_goes_only_through_a_ready_snapshot_and_comes"
        "_back_from_it",
        f"{SNAPSHOTS}::test_a_suspended_jobsets_claim_goes_through_a_snapshot_and_comes_back_on"
        "_resume",
        "tests/node/test_snapshot_checkpoints.py::test_a_rerun_reads_the_checkpoint_of_the_run"
        "_before_from_its_snapshot",
    ),
    "`volumePolicy`": (
        f"{VOLUMES}::test_seed_example_claim_and_mounts",
        f"{VOLUMES_E2E}::test_seed_example_claim_binds_is_mounted_and_jobset_completes",
    ),
    "Claim templates that may change": (
        f"{CRD}::test_rule_on_update[volume-claim-policies-labels-changed]",
        f"{CRD}::test_rule_on_update[volume-claim-policies-storage-raised]",
        "tests/unit/volumes/test_ownership.py::test_update_patch_metadata",
        f"{VOLUMES_E2E}::test_raising_the_storage_request_expands_the_claim",
    ),
    "Annotations that act on claims": (
        f"{ANNOTATIONS}::test_adopt_entry_that_matches_is_accepted_and_then_done",
        f"{ANNOTATIONS}::test_replace_entry_that_matches_is_accepted_and_a_spent_one_is_quiet",
        f"{SINGLE_NODE}::test_pinning_follows_the_annotation_then_the_controller_then_the_storage",
    ),
    "A canary beside upstream": (
        f"{CONTROLLER}::test_canary_serves_only_its_managed_by_value",
        "tests/unit/test_config.py::test_managed_by_defaults_to_upstream_and_reads_flag_and"
        "_environment",
    ),
    # --------------------------------------------------------- Differences from upstream
    (
        "Pods that share a `ReadWriteOnce` claim at the same time are kept on one node where its "
        "storage attaches volumes to nodes"
    ): (
        "tests/e2e/test_single_node_claims.py::test_pods_sharing_a_read_write_once_claim_run_on"
        "_one_node_and_read_write_many_spread",
        f"{COLOCATION}::test_a_csidriver_that_attaches_nothing_frees_the_jobs_made_after_it",
        f"{COLOCATION}::test_never_leaves_the_pods_free_even_where_the_storage_attaches",
        f"{SINGLE_NODE}::test_pinning_follows_the_annotation_then_the_controller_then_the_storage",
    ),
    "Status counters are paced": (
        "tests/integration/test_status_pacing.py::test_counters_ride_on_the_next_milestone",
        "tests/integration/test_status_pacing.py::test_period_zero_writes_every_change",
        "tests/unit/test_pacing.py::test_what_kueue_reads_is_a_milestone",
    ),
    "Kubernetes 1.35 or newer": (
        f"{OLDEST}::test_both_crds_install",
        f"{OLDEST}::test_the_controller_creates_the_jobs_and_completes_the_jobset",
        f"{OLDEST}::test_pod_scope_says_it_needs_a_newer_release",
        "tests/integration/test_helm_chart.py::test_kubernetes_older_than_1_35_is_refused",
        "tests/unit/test_kubeversion.py::test_the_refusal_names_the_servers_version_and_the_minimum",
    ),
    "Installed under its own names": (
        f"{MANIFESTS}::test_installed_under_its_own_names_with_no_webhook",
    ),
    "Upstream's command line, with a few differences": (
        f"{COMMAND_LINE}::test_upstreams_command_lines_and_files_mean_the_same_here",
        f"{COMMAND_LINE}::test_a_certificate_folder_without_the_certificate_is_refused",
        "tests/unit/test_zapflags.py::test_log_level_and_zap_log_level",
    ),
    "Admission without a webhook server": (
        "tests/unit/test_validation.py::test_the_installed_crd_and_policy_are_rebuilt_from_the_one"
        "_definition",
        f"{CRD}::test_template_without_replicated_jobs_is_unmounted_not_an_error",
        "tests/integration/test_restart_job.py::test_default_crd_refuses_restart_job_and_alpha_crd"
        "_bounds_replicas",
        f"{MANIFESTS}::test_installed_under_its_own_names_with_no_webhook",
    ),
    "No pod webhook": (
        "tests/unit/test_construct.py::test_no_pod_webhook_no_priority_label_and_exclusive_terms"
        "_on_every_pod",
        "tests/e2e/test_exclusive_placement.py::test_each_job_gets_a_domain_of_its_own",
        "tests/integration/test_exclusive_placement.py::test_bad_jobset_topology_key_is_refused"
        "_until_fixed",
    ),
    "User roles that aggregate": (
        f"{MANIFESTS}::test_user_roles_are_upstreams_and_aggregate_into_the_builtin_roles",
        "tests/e2e/test_user_roles.py::test_builtin_roles_carry_the_jobset_roles",
    ),
    "JobSets with volumes carry a finalizer": (
        f"{VOLUMES}::test_seed_example_claim_and_mounts",
        f"{VOLUMES_E2E}::test_deletion_converges_after_the_controller_is_killed",
        f"{MIGRATION}::test_the_way_back_to_upstream_keeps_the_claim_and_the_finalizer_must_go",
    ),
    "A claim that already exists is used only with proof that it is the JobSet's": (
        f"{VOLUMES}::test_foreign_claim_is_a_conflict_until_removed",
        f"{VOLUMES}::test_copied_name_label_is_no_proof_of_ownership",
        f"{MIGRATION}::test_a_running_upstream_jobset_restarts_here_with_the_same_claim_and_its"
        "_data",
        f"{MIGRATION}::test_a_claim_upstream_retained_is_adopted_by_the_manifest_applied_again",
    ),
    "A lost claim is not made again, empty": (
        f"{LOST}::test_a_claim_deleted_out_of_band_is_lost_not_recreated_empty",
        f"{LOST}::test_a_copy_of_a_deleted_claim_is_not_the_claim",
        "tests/node/test_data.py::test_a_lost_claim_is_not_silently_replaced_by_an_empty_one",
    ),
    "A suspended JobSet's claims wait for its resume": (
        f"{SUSPENDED}::test_a_suspended_jobset_makes_its_claims_once_resumed_and_keeps_them",
        f"{SUSPENDED}::test_creation_policy_create_makes_the_claims_while_suspended",
        f"{DECIDE}::test_a_queued_jobsets_jobs_that_wait_for_their_claims_count_as_no_suspended"
        "_job",
    ),
    "Volume claim templates are checked as Kubernetes checks a claim": (
        f"{CRD}::test_rule_on_create[template-access-modes-required]",
        f"{CRD}::test_rule_on_create[template-storage-positive]",
        f"{CRD}::test_rule_on_create[template-label-keys]",
        f"{CRD}::test_rule_on_create[volume-policy-template-name]",
        f"{CRD}::test_rule_on_create[claim-names-jobset-scope-over-63]",
    ),
    "`spec.coordinator` is immutable": (f"{CRD}::test_rule_on_update[coordinator-immutable]",),
    "A coordinator's replicated job without `completions` is admitted": (
        f"{CRD}::test_rule_on_create[coordinator-pod-index-without-completions]",
        f"{WRITES}::test_job_the_api_refuses_is_reported_and_status_stays_truthful",
    ),
    "`restartStrategy: InPlaceRestart` is refused": (
        f"{CRD}::test_rule_on_create[restart-strategy-in-place-restart]",
        "tests/unit/test_features.py::test_in_place_restart_is_in_neither_crd_nor_the_parser",
        "tests/unit/test_features.py::test_refused",
    ),
    "Upper-case replicated job names": (
        f"{CRD}::test_base_and_uppercase_names_are_accepted",
        f"{CRD}::test_rule_on_create[replicated-job-names-unique]",
        "tests/unit/test_construct.py::test_capitalised_replicated_job_names_give_valid_job_names",
    ),
    "`dependsOn` naming the replicated job itself": (
        f"{CRD}::test_rule_on_create[depends-on-itself]",
    ),
    "Bounds": (
        f"{CRD}::test_rule_on_create[child-jobs-bounded]",
        f"{CRD}::test_large_volume_spec_fits_the_cel_runtime_budget",
        "tests/unit/test_fields.py::test_the_parsers_refuse_a_list_longer_than_its_bound",
        "tests/unit/test_reconcile_cost.py::test_claims_per_jobset_are_bounded",
    ),
    "Defaults are the schema's": (
        f"{CRD}::test_defaults_applied_by_the_api_server",
        f"{CRD}::test_a_default_an_update_leaves_out_comes_back",
        f"{FAILURE}::test_rule_name_defaulted_by_model",
    ),
    "Extension fields and clients that know only upstream's types": (
        f"{CRD}::test_rule_on_update[volume-policy-kept]",
        f"{CRD}::test_rule_on_update[volume-claim-policies-immutable-retention]",
        f"{CRD}::test_rule_on_update[volume-claim-policies-snapshot-and-restore-changed]",
    ),
    "ElasticJobSet messages": (
        f"{ELASTIC}::test_elastic_resize_unequal",
        f"{ELASTIC}::test_elastic_resize_non_indexed",
        f"{ELASTIC}::test_elastic_resize_gate_off",
    ),
    "A spec the controller cannot act on stops it acting on that JobSet": (
        f"{CONTROLLER}::test_a_running_jobset_made_spec_invalid_is_left_alone_until_fixed",
        f"{CONTROLLER}::test_invalid_regex_is_a_condition_and_event_not_a_crash",
        "tests/integration/test_volume_deletion.py::test_jobset_that_became_invalid_is_deleted"
        "_with_its_retention",
        "tests/unit/test_messagepatterns.py::test_parse_refuses_patterns_too_large_together",
    ),
    "RestartJob, gate off in the controller": (
        "tests/integration/test_restart_job.py::test_gate_off_in_controller_is_a_condition_not_a"
        "_restart",
        f"{FAILURE}::test_the_parser_refuses_restart_job_as_the_crd_of_its_gates",
        f"{FAILURE}::test_individually_restarted_job_is_stale",
        f"{FAILURE}::test_carry_job_restarts_keeps_history",
    ),
    "`dependsOn` and `InOrder` are met at `>=`": (
        f"{STARTUP}::test_depends_on[over]",
        f"{STARTUP}::test_in_order[a-counted-over-replicas]",
        f"{STARTUP}::test_existing_jobs_stay_allowed_after_regression",
        f"{STARTUP}::test_depends_on_regression_keeps_existing",
    ),
    "The headless Service must be the JobSet's": (
        f"{CONTROLLER}::test_a_service_upstream_made_is_adopted_not_created_on_every_pass",
    ),
    "A refused write is reported once, in the status": (
        f"{WRITES}::test_job_the_api_refuses_is_reported_and_status_stays_truthful",
        f"{WRITES}::test_job_name_held_by_a_job_not_ours_is_reported",
        f"{WRITES}::test_quota_refused_claim_is_reported_and_unrelated_jobs_run",
        "tests/unit/test_writefailures.py::test_held_job_name_not_created_and_reported",
    ),
    "Events": (
        f"{EVENTS}::test_an_event_is_written_through_events_k8s_io_with_what_it_requires",
        f"{EVENTS}::test_repeats_become_one_event_with_a_series",
        f"{EVENTS}::test_distinct_notes_and_a_new_resource_version_are_distinct_events",
        f"{EVENTS}::test_a_long_note_is_cut_to_what_the_api_server_accepts",
        f"{EVENTS}::test_an_event_that_cannot_be_written_is_dropped_and_counted",
    ),
    "Status details": (
        "tests/unit/test_status.py::test_replicated_jobs_status_spec_order_and_mixture",
        f"{DECIDE}::test_spec_edit_moves_observed_generation",
        "tests/unit/test_jobsetstatus.py::test_to_dict",
    ),
    "MultiKueue carries none of the extensions": (
        f"{CONTROLLER}::test_managed_by_another_controller_is_left_alone",
    ),
}


def _title(text: str) -> str:
    """A bold title as the registry spells it: on one line, without its closing stop."""
    return " ".join(text.split()).rstrip(".:")


def _section_lines(markdown: str) -> list[str]:
    """The lines of the two lists' sections (each up to the next heading)."""
    kept: list[str] = []
    inside = False
    for line in markdown.splitlines():
        if line.startswith("#"):
            inside = line.strip() in SECTIONS
        elif inside:
            kept.append(line)
    return kept


def entries(markdown: str) -> list[str]:
    """The bullets of the Compatibility lists, each as its first line, in order."""
    return [line for line in _section_lines(markdown) if line.startswith("- ")]


def titles(markdown: str) -> list[str]:
    """The bold titles of the Compatibility lists' bullets (a title may run over lines)."""
    text = "\n".join(_section_lines(markdown))
    return [_title(m.group(1)) for m in re.finditer(r"^- \*\*(.+?)\*\*", text, re.M | re.S)]


@functools.cache
def _module(path: str) -> ast.Module | None:
    file = REPO / path
    return ast.parse(file.read_text(), path) if file.is_file() else None


def _defines(body: list[ast.stmt], name: str) -> bool:
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
        for node in body
    )


def missing(node_id: str) -> str | None:
    """Why ``node_id`` names no test of this repository; None when it does."""
    path, _, rest = node_id.partition("::")
    match = re.fullmatch(r"(?:(\w+)::)?(test_\w+)(?:\[([^\]]+)\])?", rest)
    if not path.startswith("tests/") or not Path(path).name.startswith("test_") or not match:
        return "not a node id of a test: tests/.../test_*.py::[Class::]test_name[param]"
    tree = _module(path)
    if tree is None:
        return f"no file {path}"
    owner, function, param = match.groups()
    body = tree.body
    if owner is not None:
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner]
        if not classes:
            return f"{path} defines no class {owner}"
        body = classes[0].body
    if not _defines(body, function):
        return f"{path} defines no {function}"
    if param is not None:
        nodes = ast.walk(tree)
        strings = {
            n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        if param not in strings:
            return f"{path} has no parameter id {param!r}"
    return None


def test_every_entry_is_one_bullet_with_a_bold_title() -> None:
    markdown = API_MD.read_text()
    bullets = entries(markdown)
    assert len(bullets) >= 30, "the Compatibility lists were not found in docs/api.md"
    untitled = [b for b in bullets if not b.startswith("- **")]
    assert untitled == [], "each entry starts with a bold title"
    found = titles(markdown)
    assert len(found) == len(bullets)
    assert sorted(t for t in set(found) if found.count(t) > 1) == []


def test_every_entry_names_its_tests() -> None:
    untested = [t for t in titles(API_MD.read_text()) if not PROOF.get(t)]
    assert untested == [], "entries of docs/api.md's Compatibility lists with no tests in PROOF"


def test_every_title_of_the_registry_is_an_entry() -> None:
    documented = set(titles(API_MD.read_text()))
    stale = [t for t in PROOF if t not in documented]
    assert stale == [], "titles in PROOF that no entry of docs/api.md has (renamed or removed?)"


def test_every_named_test_exists() -> None:
    broken = {
        node_id: why
        for tests in PROOF.values()
        for node_id in tests
        if (why := missing(node_id)) is not None
    }
    assert broken == {}


def test_a_missing_test_is_found_missing() -> None:
    """The check itself: what it must refuse."""
    here = "tests/unit/test_differences.py"
    assert missing(f"{here}::test_every_named_test_exists") is None
    assert missing(f"{here}::test_no_such_test") == f"{here} defines no test_no_such_test"
    assert missing("tests/unit/test_nothing_here.py::test_x") == (
        "no file tests/unit/test_nothing_here.py"
    )
    assert missing(f"{CRD}::test_rule_on_create[no-such-case]") == (
        f"{CRD} has no parameter id 'no-such-case'"
    )
    assert missing(f"{here}::Nobody::test_every_named_test_exists") == (
        f"{here} defines no class Nobody"
    )
    assert missing("controller/app.py::main") is not None
