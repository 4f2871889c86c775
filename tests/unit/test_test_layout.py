"""The test tree itself: every folder holding tests is a package.

pytest's default import mode names a module by its basename when its folder
is not a package, so two folders without ``__init__.py`` holding files of the
same name (tests/integration/test_x.py and tests/e2e/test_x.py) stop the
whole run at collection. A package folder gives each its dotted name.
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_folder_is_a_package() -> None:
    folders = {p.parent for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").exists())
    assert folders, "no test files found"
    assert missing == []
