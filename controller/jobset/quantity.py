"""Kubernetes resource quantities (``10Gi``, ``500M``, ``1.5e3``, ``250m``) as exact numbers.

Read by the volume policies and claims (storage sizes) and by the API's rule predicates
(``controller.api.predicates``), which must agree on what a quantity is.
"""

from __future__ import annotations

import decimal
import functools
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from controller.jobset.errors import InvalidJobSet

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)
# Kubernetes parses an exponent as an int32 (``1e1000`` is a valid quantity): so do we, in a
# decimal context wide enough to hold the result.
_MAX_EXPONENT = 2**31 - 1
_WIDE = decimal.Context(Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``10Gi``, ``500M``, ``1.5e3``, ``250m``) as a number."""
    if not isinstance(text, str):
        raise InvalidJobSet(f"{text!r} is not a valid quantity")
    return _parse_text(text)


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> Decimal:
    """``parse_quantity``, remembered for the last 1,024 texts: every pass reads each claim's and
    each template's storage, nearly always the same few texts (a ``Decimal`` is immutable; a
    refusal is not remembered and raises again)."""
    match = _QUANTITY.match(text)
    if match is None:
        raise InvalidJobSet(f"{text!r} is not a valid quantity")
    number = Decimal(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidJobSet(f"{text!r} is out of range for a quantity")
        return number.scaleb(exponent, context=_WIDE)
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def quantity(value: Any) -> Decimal | None:
    """A quantity from a JSON value (string or number); None when absent or unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return parse_quantity(value if isinstance(value, str) else str(value))
    except (InvalidJobSet, InvalidOperation):
        return None
