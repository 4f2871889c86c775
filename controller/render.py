"""``python -m controller render FILE``: print the objects the controller would create, offline.

First it does what the API server does on create (``controller.api.validation``): the CRD's
defaults, its schema and every rule of the CRD and the admission policy, run by each rule's Python
predicate; a JobSet ``kubectl apply`` would refuse is refused with the API server's message
(``--crd`` names the CRD to check against: by default the repository's
``manifests/crd/jobsets.jobset.x-k8s.io.yaml``; the alpha-features CRD, or one read from a cluster
with ``kubectl get crd jobsets.jobset.x-k8s.io -o yaml``, work too). Then the same pure functions as
the reconciler (parse with defaults, desired Service and Jobs), so what it prints is what a cluster
would get for a fresh JobSet (restart attempt 0). No cluster is needed. Invalid input ends with a
message naming the problem and exit status 1.

A Job whose pods get Pod-scope claims mounts a placeholder (``volumes.podscope``); after it comes a
sample Pod (completion index 0 of the first Job of each such replicated job) as the admission
policy admits it: with its own claim.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from controller.api.validation import Contract
from controller.jobset import api, construct, volumes
from controller.jobset.model import InvalidJobSet, parse
from controller.jobset.volumes import podscope

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
    documents: list[Any], namespace: str, contract: Contract | None = None
) -> list[dict[str, Any]]:
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
        jobset = parse({**doc, "metadata": meta})
        policies = volumes.policies(jobset)
        objects.extend(claim.object for claim in volumes.desired_claims(jobset, policies))
        service = construct.desired_service(jobset)
        if service is not None:
            objects.append(service)
        for job in construct.desired_jobs(jobset):
            labels = job["metadata"]["labels"]
            rjob, index = labels[api.REPLICATED_JOB_NAME], int(labels[api.JOB_INDEX])
            mounted = volumes.mount(job, jobset, policies, rjob, index)
            objects.append(mounted)
            sample = sample_pod(mounted) if index == 0 else None
            if sample is not None:
                objects.append(sample)
    return objects


SAMPLE_INDEX = 0


def sample_pod(job: dict[str, Any]) -> dict[str, Any] | None:
    """Pod ``SAMPLE_INDEX`` of a Job with Pod-scope claims as the admission policy admits it
    (placeholders resolved to that index's claims); None for a Job without them."""
    template = job["spec"]["template"]
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    if labels.get(volumes.POD_SCOPE_LABEL) != "true":
        return None
    spec = copy.deepcopy(template["spec"])
    for volume in spec.get("volumes") or []:
        claim = volume.get("persistentVolumeClaim") or {}
        if podscope.is_placeholder(str(claim.get("claimName", ""))):
            claim["claimName"] = podscope.resolved_claim_name(claim["claimName"], SAMPLE_INDEX)
    index = str(SAMPLE_INDEX)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            # The Job controller adds a random suffix; "sample" stands for it.
            "name": f"{job['metadata']['name']}-{index}-sample",
            "namespace": job["metadata"]["namespace"],
            "labels": {**labels, podscope.COMPLETION_INDEX_ANNOTATION: index},
            "annotations": {
                podscope.COMPLETION_INDEX_ANNOTATION: index,
                "stateful-jobset.render/sample": "a pod of this Job as the Pod-scope admission "
                "policy admits it: the claim of its completion index, not the placeholder",
            },
        },
        "spec": spec,
    }


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
            except (yaml.YAMLError, InvalidJobSet, KeyError, TypeError) as error:
                print(
                    f"error: {crd_path} is not a JobSet CRD this version can read: {error}",
                    file=err,
                )
                return 1
    try:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
        documents = list(yaml.safe_load_all(text))
        objects = render(documents, args.namespace, contract)
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
    out.write(f"# rendered by stateful-jobset; uid {PLACEHOLDER_UID} stands for the real one\n")
    yaml.safe_dump_all(objects, out, sort_keys=False)
    return 0
