"""Kubernetes ``resource.Quantity`` on the wire: a string (or bare number) such as ``"1500m"`` or ``"200Mi"``.

Only what the SLO types need: parse to an exact :class:`~decimal.Decimal`, and format millicores
(``DecimalSI``, as ``NewMilliQuantity``) and bytes (``BinarySI``, as ``NewQuantity(v, BinarySI)``) the way Go
prints them, so what we write reads back identically in Go clients.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)


def parse_quantity(value: str | int | float) -> Decimal:
    """Exact value of a quantity in base units. Raises ``ValueError`` on a malformed string."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY_RE.match(value.strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as err:
        raise ValueError(f"not a quantity: {value!r}") from err
    return number * _SUFFIXES[match.group(2) or ""]


def milli_value(value: str | int | float) -> int:
    """``Quantity.MilliValue()``: millis, rounded up as Go does."""
    return math.ceil(parse_quantity(value) * 1000)


def int_value(value: str | int | float) -> int:
    """``Quantity.Value()``: base units, rounded up as Go does."""
    return math.ceil(parse_quantity(value))


def format_milli(milli: int) -> str:
    """Millicores as Go prints ``NewMilliQuantity(milli, DecimalSI)``: ``"1500m"``, ``"2"``, ``"0"``."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def format_binary(amount: int) -> str:
    """Bytes as Go prints ``NewQuantity(v, BinarySI)``: the largest exact binary suffix,
    else a plain number."""
    if amount == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIXES[suffix])
        if amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def _coerce(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        parse_quantity(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_coerce),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A validated quantity string. Numbers are accepted and kept as their decimal string."""

IntOrString = Annotated[
    int | str,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}),
]
