"""Fixtures of the end-to-end tier."""

from tests.support.incluster import installed

__all__ = ["installed"]
