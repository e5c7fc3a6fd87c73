"""Exact Kubernetes ``resource.Quantity`` arithmetic (``k8s.io/apimachinery/pkg/api/resource``).

Grammar (``quantity.go``)::

    <quantity>  ::= <sign>? <number> <suffix>
    <number>    ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>    ::= Ki | Mi | Gi | Ti | Pi | Ei            (binary: powers of 1024)
                  | n | u | m | "" | k | M | G | T | P | E  (decimal SI)
                  | e<sign>?<digits> | E<sign>?<digits>     (decimal exponent)

Like ``ParseQuantity``, every non-zero value is rounded *away from zero* to a whole number of
nano-units. A magnitude above ``2**63 - 1`` base units is rejected (:class:`QuantityError`), not capped
as ``ParseQuantity`` caps it: a capped value silently changes what the user asked for, and the
scheduler's int64 arrays could not hold it. Every quantity is therefore an integer number of
nano-units, which is how this module represents it internally: sums are exact integer additions,
and rounding happens once, on the total, exactly as Kubernetes adds ``Quantity`` values and only then
calls ``MilliValue()`` / ``Value()``.

No floats anywhere: a float input (YAML ``cpu: 0.5``) is read through its shortest ``repr``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from apis.core.errors import QuantityError, quote
from apis.core.types import CPU

NANOS_PER_UNIT = 1_000_000_000
NANOS_PER_MILLI = 1_000_000
MAX_UNITS = 2**63 - 1
"""``maxAllowed`` in ``quantity.go``: larger magnitudes are rejected (see the module docstring)."""
MAX_AMOUNT = 2**63 - 1
"""The largest scheduler amount (:func:`to_amount`): an int64 in the resource's canonical unit
(millicores for cpu, base units otherwise), Kubernetes' limit for ``MilliValue()`` / ``Value()``."""
TOO_LARGE = "exceeds the largest quantity (2^63-1 base units)"

_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")

_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# Exponents beyond these bounds cap (or round to one nano-unit) without computing 10**exp; this keeps
# a hostile "1e999999999" from costing anything.
_MAX_DECIMAL_EXPONENT = 40
_MIN_DECIMAL_EXPONENT = -60

_BINARY_FORMAT_UNITS = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)
_HUGEPAGES_PREFIX = "hugepages-"
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity, in base units (cores, bytes, counts).

    Accepts the string forms above, and the ``int`` / ``float`` a YAML loader produces for bare numbers.
    Raises :class:`~apis.core.errors.QuantityError` for anything else.
    """
    return Fraction(quantity_nanos(value), NANOS_PER_UNIT)


def quantity_nanos(value: str | int | float) -> int:
    """The quantity as an integer number of nano-units (exact; see the module docstring).

    String results are cached (parsing is the hot path of every watch event, and the same few strings,
    ``"100m"``, ``"1Gi"``, repeat endlessly).
    """
    if isinstance(value, str):
        return _nanos_of_text(value)
    if isinstance(value, bool):  # bool is an int subclass; True is not a quantity
        raise QuantityError(str(value).lower(), "expected a string or a number")
    if isinstance(value, int):
        if abs(value) > MAX_UNITS:
            raise QuantityError(str(value), TOO_LARGE)
        return value * NANOS_PER_UNIT
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(repr(value), "not a finite number")
        return _nanos_of_text(repr(value))
    raise QuantityError(repr(value), f"expected a string or a number, got {type(value).__name__}")


@lru_cache(maxsize=8192)
def _nanos_of_text(text: str) -> int:
    number = _NUMBER.match(text)
    assert number is not None  # every part of the pattern is optional
    sign, whole, frac = number.group(1), number.group(2), number.group(3) or ""
    if not whole and not frac:
        if not text:
            raise QuantityError(text, "empty string")
        raise QuantityError(text, "expected a number, optionally signed, before the suffix")
    suffix = text[number.end() :]
    mantissa = int(whole + frac) if (whole or frac) else 0
    # value = mantissa * 10**-len(frac) * multiplier, with the multiplier from the suffix
    binary_exponent = _BINARY_SUFFIXES.get(suffix)
    decimal_exponent = -len(frac)
    if binary_exponent is None:
        si = _DECIMAL_SUFFIXES.get(suffix)
        if si is not None:
            decimal_exponent += si
        else:
            exponent = _EXPONENT.fullmatch(suffix)
            if exponent is None:
                raise QuantityError(text, f"unknown suffix {quote(suffix)}")
            decimal_exponent += int(exponent.group(1))
        binary_exponent = 0
    magnitude = _to_nanos(mantissa, decimal_exponent, binary_exponent)
    if magnitude > MAX_UNITS * NANOS_PER_UNIT:
        raise QuantityError(text, TOO_LARGE)
    return -magnitude if sign == "-" else magnitude


def _to_nanos(mantissa: int, decimal_exponent: int, binary_exponent: int) -> int:
    """``ceil(mantissa * 10**decimal_exponent * 2**binary_exponent * 1e9)``; anything above MAX_UNITS
    comes back as MAX_UNITS + 1 units (the caller rejects it) without computing a huge power."""
    if mantissa == 0:
        return 0
    exponent = decimal_exponent + 9  # in nano-units
    if exponent > _MAX_DECIMAL_EXPONENT:
        return (MAX_UNITS + 1) * NANOS_PER_UNIT
    if exponent < _MIN_DECIMAL_EXPONENT:
        return 1  # a positive value below one nano-unit rounds up to one
    numerator = mantissa << binary_exponent
    scale: int = 10 ** abs(exponent)
    if exponent < 0:
        return -(-numerator // scale)  # ceiling division: round up to the next nano-unit
    return min(numerator * scale, (MAX_UNITS + 1) * NANOS_PER_UNIT)


def scale_up(nanos: int, divisor: int) -> int:
    """``nanos / divisor`` rounded away from zero, as ``Quantity.ScaledValue`` rounds."""
    # Ceiling division for positive values; floor division already rounds negatives away from zero.
    return -(-nanos // divisor) if nanos >= 0 else nanos // divisor


def milli_value(q: Fraction | str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths of a unit, rounded up (away from zero)."""
    return scale_up(_nanos(q), NANOS_PER_MILLI)


def value(q: Fraction | str | int | float) -> int:
    """``Quantity.Value()``: whole units, rounded up (away from zero)."""
    return scale_up(_nanos(q), NANOS_PER_UNIT)


def to_amount(resource_name: str, q: Fraction | str | int | float) -> int:
    """The scheduler's integer amount of ``resource_name``: millicores for ``cpu``, base units otherwise."""
    if resource_name == CPU:
        return milli_value(q)
    return value(q)


def nanos_to_amount(resource_name: str, nanos: int) -> int:
    """:func:`to_amount` for a value already in nano-units (see :func:`quantity_nanos`)."""
    return scale_up(nanos, NANOS_PER_MILLI if resource_name == CPU else NANOS_PER_UNIT)


def _nanos(q: Fraction | str | int | float) -> int:
    if isinstance(q, Fraction):
        # A Fraction may come from outside parse_quantity; round it to nano-units the same way.
        scaled = q * NANOS_PER_UNIT
        rounded: int = math.ceil(scaled) if scaled >= 0 else math.floor(scaled)
        return rounded
    return quantity_nanos(q)


def format_quantity(resource_name: str, amount: int) -> str:
    """A scheduler amount (as :func:`to_amount` gives it) in the form ``kubectl`` users expect.

    ``cpu``: ``"2"`` for whole cores, else ``"500m"``. Byte resources (``memory``, ``ephemeral-storage``,
    ``storage``, ``hugepages-*``): the largest binary suffix that divides the amount exactly (``"1536Mi"``,
    ``"1Gi"``), else plain bytes. Everything else (``pods``, extended resources): a plain integer.
    """
    if resource_name == CPU:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    is_bytes = resource_name in _BYTE_RESOURCES or resource_name.startswith(_HUGEPAGES_PREFIX)
    if is_bytes and amount != 0:
        for suffix, unit in _BINARY_FORMAT_UNITS:
            if amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)
