"""``python -m controller render FILE``: print the objects the controller would create, offline.

Uses the same pure functions as the reconciler (parse with defaults, desired Service and Jobs), so
what it prints is what a cluster would get for a fresh JobSet (restart attempt 0). No cluster is
needed. Invalid input ends with a message naming the problem and exit status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from controller.jobset import api, construct, volumes
from controller.jobset.model import InvalidJobSet, parse

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def render(documents: list[Any], namespace: str) -> list[dict[str, Any]]:
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
            objects.append(volumes.mount(job, jobset, policies, rjob, index))
    return objects


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
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
        documents = list(yaml.safe_load_all(text))
        objects = render(documents, args.namespace)
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
