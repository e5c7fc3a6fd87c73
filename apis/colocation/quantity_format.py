"""Quantities written the way Go's ``resource.Quantity.String()`` writes them (its canonical form).

Needed where a quantity ends up inside text that others compare byte for byte, such as the
``node.koordinator.sh/extended-resource-spec`` annotation, and for the integer milli-core values the
colocation webhook writes (``NewQuantity(milli, DecimalSI)``: ``500`` → ``"500"``, ``1000`` → ``"1k"``).

Rules (``apimachinery/pkg/api/resource/quantity.go``, ``CanonicalizeBytes``): the format is the input's
(a binary suffix → BinarySI, an ``e`` exponent → DecimalExponent, anything else → DecimalSI). BinarySI
values under 1024 in magnitude, or not whole, are written as DecimalSI. DecimalSI and DecimalExponent use
the largest power of 1000 that keeps the mantissa whole (``1500m``, ``1500``, ``1k``, ``1500M``, ``1e3``).
"""

from __future__ import annotations

from apis.core.quantity import NANOS_PER_UNIT, quantity_nanos

_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def _format_of(text: str) -> str:
    if text[-2:] in _BINARY:
        return "binary"
    stripped = text.lstrip("+-")
    if "e" in stripped or "E" in stripped.rstrip("E"):
        return "exponent"
    return "decimal"


def format_decimal(nanos: int, *, exponent_form: bool = False) -> str:
    """A value in nano-units as DecimalSI (``"1500m"``, ``"1k"``) or DecimalExponent (``"1e3"``)."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    mantissa, exponent = abs(nanos), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3 != 0:
        mantissa *= 10
        exponent -= 1
    if exponent_form:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    while exponent > 18:
        mantissa *= 1000
        exponent -= 3
    return f"{sign}{mantissa}{_DECIMAL[exponent]}"


def canonical_quantity(value: str | int | float) -> str:
    """``resource.MustParse(value).String()``. Raises ``QuantityError`` for a malformed quantity."""
    nanos = quantity_nanos(value)
    text = value if isinstance(value, str) else str(value)
    kind = _format_of(text) if isinstance(value, str) else "decimal"
    if kind == "binary":
        whole, rest = divmod(abs(nanos), NANOS_PER_UNIT)
        if rest == 0 and whole >= 1024:
            sign = "-" if nanos < 0 else ""
            suffix = ""
            for candidate in _BINARY:
                if whole % 1024:
                    break
                whole //= 1024
                suffix = candidate
            return f"{sign}{whole}{suffix}"
        return format_decimal(nanos)
    return format_decimal(nanos, exponent_form=kind == "exponent")
