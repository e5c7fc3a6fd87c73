"""Kubernetes ``resource.Quantity`` on the wire: a string (or bare number) such as ``"1500m"`` or ``"200Mi"``.

A thin layer over :mod:`apis.core.quantity` (one parser for the whole project) with what the SLO types
need: an exact :class:`~decimal.Decimal`, the pydantic ``Quantity`` wire type, and formatting millicores
(``DecimalSI``, as ``NewMilliQuantity``) and bytes (``BinarySI``, as ``NewQuantity(v, BinarySI)``) the way Go
prints them, so what we write reads back identically in Go clients.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from apis.core import quantity as core_quantity
from apis.core.types import CPU, MEMORY

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)


def parse_quantity(value: str | int | float) -> Decimal:
    """Exact value of a quantity in base units (the parser of :mod:`apis.core.quantity`). Raises
    ``ValueError`` on a malformed string."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    exact = core_quantity.parse_quantity(value)
    return Decimal(exact.numerator) / Decimal(exact.denominator)


def milli_value(value: str | int | float) -> int:
    """``Quantity.MilliValue()``: millis, rounded up as Go does."""
    return core_quantity.milli_value(value)


def int_value(value: str | int | float) -> int:
    """``Quantity.Value()``: base units, rounded up as Go does."""
    return core_quantity.value(value)


def format_milli(milli: int) -> str:
    """Millicores as Go prints ``NewMilliQuantity(milli, DecimalSI)``: ``"1500m"``, ``"2"``, ``"0"``."""
    return core_quantity.format_quantity(CPU, milli)


def format_binary(amount: int) -> str:
    """Bytes as Go prints ``NewQuantity(v, BinarySI)``: the largest exact binary suffix,
    else a plain number."""
    return core_quantity.format_quantity(MEMORY, amount)


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
