"""``InvalidJobSet``, in a module of its own: the parser (``model``) runs the API's rules
(``controller.api.validation``), whose predicates read quantities (``quantity``), which refuse
with this error too; here it imports nothing, so neither import goes in a circle."""

from __future__ import annotations


class InvalidJobSet(ValueError):
    """The JobSet cannot be acted on; the message says why, naming the field."""
