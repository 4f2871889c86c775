"""The JobSets the docs show in full are ones ``kubectl apply`` would accept and the controller
acts on: each goes through ``render`` (the contract's checks with the API server's messages,
then the controller's own passes), as a user who copies it would find."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.render import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def _jobsets() -> list[tuple[str, dict[str, Any]]]:
    """Every complete JobSet in a YAML block of the docs (fragments and sketches with '...'
    are not JobSets and are left out), as (page:line name, object)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.finditer(r"```ya?ml\n(.*?)```", text, re.S):
            try:
                docs = [d for d in yaml.safe_load_all(block.group(1)) if d]
            except yaml.YAMLError:
                continue  # a sketch, not a manifest
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") == "JobSet":
                    line = text[: block.start()].count("\n") + 1
                    name = f"{page.relative_to(ROOT)}:{line} {doc['metadata']['name']}"
                    found.append((name, doc))
    return found


JOBSETS = _jobsets()


def test_the_guides_examples_are_found() -> None:
    """The checkpoint guide's training run, and the getting-started and Kueue examples."""
    pages = {name.split(":")[0] for name, _ in JOBSETS}
    assert {"docs/volumes.md", "docs/getting-started.md", "docs/kueue.md"} <= pages


@pytest.mark.parametrize(("name", "jobset"), JOBSETS, ids=[n for n, _ in JOBSETS])
def test_a_jobset_the_docs_show_renders(name: str, jobset: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "jobset.yaml"
    path.write_text(yaml.safe_dump(jobset))
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path)], out=out, err=err) == 0, err.getvalue()
    made = [d for d in yaml.safe_load_all(out.getvalue()) if d]
    assert any(d["kind"] == "Job" for d in made), f"{name}: no Job rendered"
