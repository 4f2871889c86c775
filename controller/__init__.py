"""Stateful JobSet controller."""

# The one place the version is written: pyproject.toml reads it (dynamic version), the image tag
# in manifests/ must equal it (tests/unit/test_version.py), CHANGELOG.md has an entry for it.
__version__ = "0.1.0"
