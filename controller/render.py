"""``python -m controller render FILE``: print the objects the controller would create, offline.

First it does what the API server does on create (``controller.api.validation``): the CRD's
defaults, its schema and every rule of the CRD and the admission policy, run by each rule's Python
predicate; a JobSet ``kubectl apply`` would refuse is refused with the API server's message
(``--crd`` names the CRD to check against: by default the repository's
``manifests/crd/jobsets.jobset.x-k8s.io.yaml``; the alpha-features CRD, or one read from a cluster
with ``kubectl get crd jobsets.jobset.x-k8s.io -o yaml``, work too). Then the reconciler's own
planning, ``decide``, pass after pass on a simulated cluster (``fresh_reconcile``), so what it
prints is what the controller creates for a fresh JobSet, in its order; it cannot drift from the
controller because it is the controller's code. No cluster is needed. Invalid input ends with a
message naming the problem and exit status 1; a replicated job that gets no Job is named on
stderr.

A Job whose pods get Pod-scope claims mounts a placeholder; after it comes a sample Pod (completion
index 0 of the first Job of each such replicated job) as the admission policy admits it
(``volumes.admitted_pod``): with its own claim.

Whether the pods that share a ReadWriteOnce claim are kept on one node depends on the cluster's
storage (the claim's class, its CSIDriver) and the controller's ``--colocate-claims``: ``--storage``
reads the StorageClasses and CSIDrivers of a cluster (``kubectl get storageclasses,csidrivers -o
yaml``), ``--colocate-claims`` takes the controller's setting. Without ``--storage`` the storage
is taken to attach (as the controller does for what it cannot know). A note on stderr gives the
JobSet's ``MultiAttachRisk`` condition: whether, and why, its pods are kept on one node.
"""

from __future__ import annotations

import copy
import datetime
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from controller import features
from controller.api.validation import Contract, ContractMismatch
from controller.features import FeatureGates
from controller.jobset import api, children, volumes
from controller.jobset.decide import Plan, decide
from controller.jobset.model import InvalidJobSet, JobSet, parse

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
# The CRD of a clone of the repository (the package sits beside manifests/).
DEFAULT_CRD = Path(__file__).resolve().parents[1] / "manifests/crd/jobsets.jobset.x-k8s.io.yaml"


def load_contract(path: Path) -> Contract:
    """The contract of the CRD in ``path`` (a file with the CRD, as ``make crd`` writes it or
    ``kubectl get crd -o yaml`` prints it)."""
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise InvalidJobSet(f"{path} is not a CustomResourceDefinition")
    return Contract.from_crd(crd)


def render(
    documents: list[Any],
    namespace: str,
    contract: Contract | None = None,
    now: datetime.datetime | None = None,
    notes: list[str] | None = None,
    classes: volumes.StorageClasses | None = None,
) -> list[dict[str, Any]]:
    """The objects the controller creates for each JobSet of ``documents``, on a cluster of that
    storage (``classes``: None, not known); ``notes`` gets a line for each replicated job that
    gets no Job here (and why it may not), and the JobSet's ``MultiAttachRisk`` condition."""
    objects: list[dict[str, Any]] = []
    for position, doc in enumerate(documents):
        if doc is None:
            continue
        if not isinstance(doc, dict) or doc.get("kind") != api.KIND:
            kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise InvalidJobSet(f"document {position + 1} is a {kind}, not a {api.KIND}")
        if doc.get("apiVersion") != api.API_VERSION:
            raise InvalidJobSet(
                f"document {position + 1}: apiVersion must be {api.API_VERSION}, "
                f"got {doc.get('apiVersion')!r}"
            )
        meta = dict(doc.get("metadata") or {})
        if not meta.get("name"):
            raise InvalidJobSet(f"document {position + 1}: metadata.name is required")
        if contract is not None:
            refusal = contract.refusal(doc)
            if refusal is not None:
                raise InvalidJobSet(f"document {position + 1}: {refusal.message}")
            doc = contract.defaulted(doc)
        meta.setdefault("namespace", namespace)
        meta.setdefault("uid", PLACEHOLDER_UID)
        stored: dict[str, Any] = {}
        # The controller's parser runs the rules of the CRD made for its gates: those of the CRD
        # checked against (--crd), or upstream's defaults.
        gates = contract.gates if contract is not None else features.DEFAULT
        made = fresh_reconcile({**doc, "metadata": meta}, now or _now(), classes, stored, gates)
        objects.extend(made)
        if notes is not None:
            notes.extend(_without_jobs(parse({**doc, "metadata": meta}, gates), made))
            notes.extend(
                _colocation(stored, known=classes is not None and classes.names is not None)
            )
    return objects


MULTI_ATTACH_RISK = "MultiAttachRisk"


def _colocation(stored: dict[str, Any], known: bool) -> list[str]:
    """The MultiAttachRisk condition the passes left on the JobSet, as a note."""
    name = stored["metadata"]["name"]
    for found in (stored.get("status") or {}).get("conditions") or []:
        if found.get("type") == MULTI_ATTACH_RISK:
            hint = (
                ""
                if known
                else " (pass --storage with the cluster's `kubectl get storageclasses,csidrivers "
                "-o yaml` to read its storage)"
            )
            return [
                f"{name}: {MULTI_ATTACH_RISK} {found['status']} ({found['reason']}): "
                f"{found['message']}{hint}"
            ]
    return []


def _without_jobs(jobset: JobSet, made: list[dict[str, Any]]) -> list[str]:
    with_jobs = {
        o["metadata"]["labels"].get(api.REPLICATED_JOB_NAME) for o in made if o["kind"] == "Job"
    }
    return [
        f"{jobset.name}: replicated job {r.name} gets no Job here, with every other Job running "
        "and then succeeded (see its dependsOn, replicas and the success policy)"
        for r in jobset.replicated_jobs
        if r.name not in with_jobs and r.replicas > 0
    ]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class _Cluster:
    """What the passes of ``fresh_reconcile`` have made so far, as the API server would hold it."""

    stored: dict[str, Any]  # the JobSet, with the status and finalizers the passes wrote
    service: dict[str, Any] | None = None
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: list[dict[str, Any]] = field(default_factory=list)


def fresh_reconcile(
    obj: dict[str, Any],
    now: datetime.datetime,
    classes: volumes.StorageClasses | None = None,
    stored: dict[str, Any] | None = None,
    gates: FeatureGates = features.DEFAULT,
) -> list[dict[str, Any]]:
    """The objects the controller creates for a JobSet that has none yet, in the order it
    creates them: ``decide`` (the reconciler's own planning) run pass after pass, each pass's
    writes applied as the API server would (a created claim gets a uid and binds; its uid goes
    into the JobSet's record), until a pass creates nothing more. ``classes``: the cluster's
    storage (None: not known); ``stored`` gets the JobSet as the passes left it; ``gates``: the
    controller's feature gates (its parser's rules).

    Between passes every created Job is taken to be running with all its pods ready, so that
    replicated jobs waiting on ``dependsOn: Ready`` or ``startupPolicy: InOrder`` get theirs;
    when that makes nothing more, every Job is taken to have succeeded, for ``dependsOn:
    Complete`` (the success policy may then finish the JobSet first, as it would).
    """
    cluster = _Cluster(stored=copy.deepcopy(obj))
    made: list[dict[str, Any]] = []
    succeeded = False
    for _ in range(MAX_PASSES):
        jobset = parse(cluster.stored, gates)
        plan = decide(
            jobset,
            children.views(cluster.jobs),
            cluster.service,
            now,
            claims={name: volumes.ClaimView.of(c) for name, c in cluster.claims.items()},
            classes=classes,
            # A cluster that serves VolumeSnapshots and has none yet (restorePolicy waits for
            # one, or starts empty, as its whenMissing says).
            snapshots=volumes.Snapshots(),
        )
        created = _apply(cluster, jobset, plan)
        made.extend(created)
        if not created:
            if succeeded or not cluster.jobs:
                break
            succeeded = True
            cluster.jobs = [_succeeded(job) for job in cluster.jobs]
    if stored is not None:
        stored.update(cluster.stored)
    return made


STORAGE_KINDS = ("StorageClass", "CSIDriver")


def load_storage(path: Path, colocate_claims: str) -> volumes.StorageClasses:
    """The StorageClasses and CSIDrivers of ``path`` (a YAML stream of them, or a List as
    ``kubectl get storageclasses,csidrivers -o yaml`` prints it): no CSIDriver in it means the
    cluster has none."""
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in STORAGE_KINDS}
    for position, doc in enumerate(yaml.safe_load_all(text)):
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for item in items if isinstance(items, list) else []:
            if item is None:
                continue
            kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
            if kind not in found:
                raise InvalidJobSet(
                    f"--storage {path}: document {position + 1} holds a {kind}, not a "
                    "StorageClass or CSIDriver"
                )
            found[kind].append(item)
    return volumes.StorageClasses.of(found["StorageClass"], found["CSIDriver"], colocate_claims)


MAX_PASSES = 3 + 2 * 100  # claims, Jobs, then per replicated job: ready, succeeded


def _apply(cluster: _Cluster, jobset: JobSet, plan: Plan) -> list[dict[str, Any]]:
    """``plan``'s creations and status applied to ``cluster``; returns the objects created."""
    created: list[dict[str, Any]] = []
    volume = plan.volume
    new_claims = {}
    for desired in volume.create if volume else []:
        claim = copy.deepcopy(desired.object)
        claim["metadata"]["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, desired.name))
        claim["status"] = {"phase": "Bound"}
        new_claims[desired.name] = claim
        cluster.claims[desired.name] = claim
        created.append(desired.object)
    status = plan.status
    if volume is not None:
        uids = {name: c["metadata"]["uid"] for name, c in new_claims.items()}
        base = status if status is not None else jobset.status
        status = base.with_claim_uids(volume.claim_uids_with(uids))
        if volume.add_finalizer:
            meta = cluster.stored["metadata"]
            meta["finalizers"] = [*meta.get("finalizers", []), volumes.FINALIZER]
    if status is not None:
        cluster.stored["status"] = status.to_dict()
    if plan.create_service is not None and cluster.service is None:
        cluster.service = plan.create_service
        created.append(plan.create_service)
    for job in plan.create_jobs:
        cluster.jobs.append(_running(job))
        created.append(job)
        sample = sample_pod(job) if job["metadata"]["labels"].get(api.JOB_INDEX) == "0" else None
        if sample is not None:
            created.append(sample)
    return created


def _running(job: dict[str, Any]) -> dict[str, Any]:
    """A created Job as the Job controller reports it once all its pods run and are ready."""
    spec = job["spec"]
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    pods = parallelism if completions is None else min(parallelism, int(completions))
    suspended = bool(spec.get("suspend"))
    return {
        **job,
        "metadata": {
            **job["metadata"],
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, job["metadata"]["name"])),
        },
        "status": {} if suspended else {"active": pods, "ready": pods},
    }


def _succeeded(job: dict[str, Any]) -> dict[str, Any]:
    """A Job as the Job controller reports it once it succeeded."""
    if job["spec"].get("suspend"):
        return job
    completions = int(job["spec"].get("completions") or 1)
    condition = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
    return {**job, "status": {"succeeded": completions, "conditions": [condition]}}


SAMPLE_INDEX = 0


def sample_pod(job: dict[str, Any]) -> dict[str, Any] | None:
    """Pod ``SAMPLE_INDEX`` of a Job with Pod-scope claims as the admission policy admits it
    (placeholders resolved to that index's claims); None for a Job without them."""
    # The Job controller adds a random suffix; "sample" stands for it.
    name = f"{job['metadata']['name']}-{SAMPLE_INDEX}-sample"
    pod = volumes.admitted_pod(job, SAMPLE_INDEX, name)
    if pod is not None:
        pod["metadata"]["annotations"]["stateful-jobset.render/sample"] = (
            "a pod of this Job as the Pod-scope admission policy admits it: the claim of its "
            "completion index, not the placeholder"
        )
    return pod


def main(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m controller render",
        description="Print, as a YAML stream, the objects the controller would create for the "
        "JobSet(s) in FILE (no cluster needed).",
    )
    parser.add_argument(
        "file", type=Path, help="a YAML file with one or more JobSets ('-' = stdin)"
    )
    parser.add_argument("--namespace", default="default", help="namespace when the file sets none")
    parser.add_argument(
        "--crd",
        type=Path,
        default=None,
        help="validate against this CRD, as the API server would (default: the repository's "
        "manifests/crd/jobsets.jobset.x-k8s.io.yaml)",
    )
    parser.add_argument("--no-validate", action="store_true", help="skip the API server's checks")
    parser.add_argument(
        "--storage",
        type=Path,
        default=None,
        help="the cluster's StorageClasses and CSIDrivers (kubectl get storageclasses,csidrivers "
        "-o yaml): whether the pods that share a ReadWriteOnce claim are kept on one node depends "
        "on them (default: not known, the storage is taken to attach)",
    )
    parser.add_argument(
        "--colocate-claims",
        choices=("auto", "always", "never"),
        default="auto",
        help="the controller's --colocate-claims",
    )
    args = parser.parse_args(argv)
    contract: Contract | None = None
    crd_path = args.crd or DEFAULT_CRD
    if not args.no_validate:
        if args.crd is None and not DEFAULT_CRD.exists():
            print(
                f"note: {DEFAULT_CRD} not found (not a clone of the repository): not validated "
                "as the API server would; pass --crd FILE",
                file=err,
            )
        else:
            try:
                contract = load_contract(crd_path)
            except OSError as error:
                print(f"error: cannot read {crd_path}: {error.strerror}", file=err)
                return 1
            except (yaml.YAMLError, InvalidJobSet, ContractMismatch, KeyError, TypeError) as error:
                print(
                    f"error: {crd_path} is not a JobSet CRD this version can read: {error}",
                    file=err,
                )
                return 1
    classes = None
    if args.storage is not None:
        try:
            classes = load_storage(args.storage, args.colocate_claims)
        except OSError as error:
            print(f"error: cannot read {args.storage}: {error.strerror}", file=err)
            return 1
        except yaml.YAMLError as error:
            print(f"error: {args.storage} is not valid YAML: {error}", file=err)
            return 1
        except InvalidJobSet as error:
            print(f"error: {error}", file=err)
            return 1
    elif args.colocate_claims != "auto":
        classes = volumes.StorageClasses.of(None, None, args.colocate_claims)
    try:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
        documents = list(yaml.safe_load_all(text))
        notes: list[str] = []
        objects = render(documents, args.namespace, contract, notes=notes, classes=classes)
    except OSError as error:
        print(f"error: cannot read {args.file}: {error.strerror}", file=err)
        return 1
    except yaml.YAMLError as error:
        print(f"error: {args.file} is not valid YAML: {error}", file=err)
        return 1
    except InvalidJobSet as error:
        print(f"error: {args.file}: {error}", file=err)
        return 1
    if not objects:
        print(f"error: {args.file} contains no JobSet", file=err)
        return 1
    for note in notes:
        print(f"note: {note}", file=err)
    out.write(f"# rendered by stateful-jobset; uid {PLACEHOLDER_UID} stands for the real one\n")
    yaml.safe_dump_all(objects, out, sort_keys=False)
    return 0
