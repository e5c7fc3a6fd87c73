"""The Kubernetes CEL libraries DRA selectors use, as functions for cel-python (celpy).

Kubernetes' CEL environment (``k8s.io/apiserver/pkg/cel/library``, ``cel-go/ext``) adds to standard CEL:

- ``quantity`` (``quantity.go``): ``quantity(s)``, ``isQuantity(s)``, and on a quantity ``sign()``,
  ``isInteger()``, ``asInteger()``, ``asApproximateFloat()``, ``add(q|int)``, ``sub(q|int)``,
  ``compareTo(q)``, ``isGreaterThan(q)``, ``isLessThan(q)``; ``==`` compares values (``1`` equals ``1000m``);
- ``semver`` (``semverlib.go``): ``semver(s[, normalize])``, ``isSemver(s[, normalize])``, ``major()``,
  ``minor()``, ``patch()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``;
- strings (``ext.Strings`` v2): ``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``,
  ``replace``, ``split``, ``substring``, ``trim``, ``join``, ``strings.quote``;
- lists (``lists.go``): ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``;
- regex (``regex.go``): ``find``, ``findAll``;
- sets (``ext.Sets``): ``sets.contains``, ``sets.equivalent``, ``sets.intersects``.

A function given arguments it has no overload for returns a CEL error value (as celpy does for its own
functions), so ``||`` and ``&&`` absorb it the way CEL defines. Not provided (an expression using them
fails to compile, naming the function): the ``ip``/``cidr``, ``url``, ``format`` and ``authz`` libraries,
which no DRA selector needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from apis.core.errors import QuantityError
from apis.core.quantity import NANOS_PER_UNIT, quantity_nanos
from apis.resource.semver import Version, normalize_version, parse_version

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def cel_error(message: str) -> CELEvalError:
    return CELEvalError(message)


class QuantityValue:
    """A Kubernetes ``resource.Quantity`` inside CEL (exact nano-units)."""

    __slots__ = ("nanos", "text")

    def __init__(self, nanos: int, text: str) -> None:
        self.nanos = nanos
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QuantityValue) and other.nanos == self.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __repr__(self) -> str:
        return f"quantity({self.text!r})"


class SemverValue:
    """A semantic version inside CEL."""

    __slots__ = ("version",)

    def __init__(self, version: Version) -> None:
        self.version = version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SemverValue) and other.version.compare(self.version) == 0

    def __hash__(self) -> int:
        return hash(self.version)

    def __repr__(self) -> str:
        return f"semver({str(self.version)!r})"


def _sign(n: int) -> int:
    return (n > 0) - (n < 0)


# --- quantity --------------------------------------------------------------------------------------


def quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return cel_error("no such overload: quantity")
    try:
        return QuantityValue(quantity_nanos(str(text)), str(text))
    except QuantityError as err:
        return cel_error(f"quantity: {err}")


def is_quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return cel_error("no such overload: isQuantity")
    try:
        quantity_nanos(str(text))
    except QuantityError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _as_nanos(value: Any) -> int | None:
    if isinstance(value, QuantityValue):
        return value.nanos
    if isinstance(value, int) and not isinstance(value, ct.BoolType):
        return int(value) * NANOS_PER_UNIT
    return None


def _quantity_op(name: str, op: Callable[[int, int], int]) -> Callable[[Any, Any], Any]:
    def apply(target: Any, other: Any) -> Any:
        rhs = _as_nanos(other)
        if not isinstance(target, QuantityValue) or rhs is None:
            return cel_error(f"no such overload: {name}")
        nanos = op(target.nanos, rhs)
        return QuantityValue(nanos, f"{nanos}n")

    return apply


def _quantity_method(name: str, fn: Callable[[QuantityValue], Any]) -> Callable[[Any], Any]:
    def apply(target: Any) -> Any:
        if not isinstance(target, QuantityValue):
            return cel_error(f"no such overload: {name}")
        return fn(target)

    return apply


def _as_integer(q: QuantityValue) -> Any:
    if q.nanos % NANOS_PER_UNIT:
        return cel_error("cannot convert value to integer")
    value = q.nanos // NANOS_PER_UNIT
    if not _INT64_MIN <= value <= _INT64_MAX:
        return cel_error("cannot convert value to integer")
    return ct.IntType(value)


# --- semver ----------------------------------------------------------------------------------------


def semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str):
        return cel_error("no such overload: semver")
    source = normalize_version(str(text)) if normalize else str(text)
    try:
        return SemverValue(parse_version(source))
    except ValueError as err:
        return cel_error(f"semver: {err}")


def is_semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str):
        return cel_error("no such overload: isSemver")
    source = normalize_version(str(text)) if normalize else str(text)
    try:
        parse_version(source)
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _semver_part(name: str, part: Callable[[Version], int]) -> Callable[[Any], Any]:
    def apply(target: Any) -> Any:
        if not isinstance(target, SemverValue):
            return cel_error(f"no such overload: {name}")
        return ct.IntType(part(target.version))

    return apply


# --- shared comparisons ------------------------------------------------------------------------------


def _compare(name: str, a: Any, b: Any) -> int | CELEvalError:
    if isinstance(a, QuantityValue) and isinstance(b, QuantityValue):
        return _sign(a.nanos - b.nanos)
    if isinstance(a, SemverValue) and isinstance(b, SemverValue):
        return a.version.compare(b.version)
    return cel_error(f"no such overload: {name}")


def compare_to(a: Any, b: Any) -> Any:
    result = _compare("compareTo", a, b)
    return result if isinstance(result, CELEvalError) else ct.IntType(result)


def is_greater_than(a: Any, b: Any) -> Any:
    result = _compare("isGreaterThan", a, b)
    return result if isinstance(result, CELEvalError) else ct.BoolType(result > 0)


def is_less_than(a: Any, b: Any) -> Any:
    result = _compare("isLessThan", a, b)
    return result if isinstance(result, CELEvalError) else ct.BoolType(result < 0)


# --- strings -----------------------------------------------------------------------------------------


def _strings(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def apply(target: Any, *args: Any) -> Any:
        if not isinstance(target, str):
            return cel_error(f"no such overload: {name}")
        try:
            return fn(str(target), *args)
        except (IndexError, ValueError) as err:
            return cel_error(f"{name}: {err}")

    return apply


def _char_at(text: str, index: int) -> ct.StringType:
    if not 0 <= index <= len(text):
        raise IndexError(f"index out of range: {index}")
    return ct.StringType(text[index : index + 1])


def _substring(text: str, start: int, end: int | None = None) -> ct.StringType:
    end = len(text) if end is None else int(end)
    if not 0 <= start <= end <= len(text):
        raise IndexError(f"index out of range: {start}, {end}")
    return ct.StringType(text[start:end])


def _replace(text: str, old: str, new: str, n: int = -1) -> ct.StringType:
    return ct.StringType(text.replace(old, new, int(n)))


def _split(text: str, sep: str, n: int = -1) -> ct.ListType:
    n = int(n)
    if n == 0:
        return ct.ListType()
    parts = text.split(sep, n - 1) if n > 0 else text.split(sep) if sep else list(text)
    return ct.ListType(ct.StringType(p) for p in parts)


def _index_of(target: Any, item: Any, start: Any = None) -> Any:
    if isinstance(target, str):
        if not isinstance(item, str):
            return cel_error("no such overload: indexOf")
        begin = 0 if start is None else int(start)
        if not 0 <= begin <= len(target):
            return cel_error(f"indexOf: index out of range: {begin}")
        return ct.IntType(str(target).find(str(item), begin))
    if isinstance(target, list):
        for i, value in enumerate(target):
            if value == item:
                return ct.IntType(i)
        return ct.IntType(-1)
    return cel_error("no such overload: indexOf")


def _last_index_of(target: Any, item: Any, start: Any = None) -> Any:
    if isinstance(target, str):
        if not isinstance(item, str):
            return cel_error("no such overload: lastIndexOf")
        end = len(target) if start is None else int(start)
        return ct.IntType(str(target).rfind(str(item), 0, end + len(item)))
    if isinstance(target, list):
        for i in range(len(target) - 1, -1, -1):
            if target[i] == item:
                return ct.IntType(i)
        return ct.IntType(-1)
    return cel_error("no such overload: lastIndexOf")


def _join(target: Any, sep: Any = "") -> Any:
    if not isinstance(target, list) or not all(isinstance(v, str) for v in target):
        return cel_error("no such overload: join")
    return ct.StringType(str(sep).join(str(v) for v in target))


def _quote(text: Any) -> Any:
    if not isinstance(text, str):
        return cel_error("no such overload: strings.quote")
    escaped = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return ct.StringType(f'"{escaped}"')


# --- lists, regex, sets ------------------------------------------------------------------------------


def _is_sorted(target: Any) -> Any:
    if not isinstance(target, list):
        return cel_error("no such overload: isSorted")
    try:
        return ct.BoolType(all(target[i] <= target[i + 1] for i in range(len(target) - 1)))
    except TypeError:
        return cel_error("no such overload: isSorted")


def _sum(target: Any) -> Any:
    if not isinstance(target, list):
        return cel_error("no such overload: sum")
    if not target:
        return ct.IntType(0)
    try:
        total = target[0]
        for value in target[1:]:
            total = total + value
        return total
    except (TypeError, ValueError):
        return cel_error("no such overload: sum")


def _max(target: Any) -> Any:
    if not isinstance(target, list):
        return cel_error("no such overload: max")
    if not target:
        return cel_error("max of an empty list")
    try:
        return max(target)
    except TypeError:
        return cel_error("no such overload: max")


def _find(target: Any, pattern: Any) -> Any:
    if not isinstance(target, str) or not isinstance(pattern, str):
        return cel_error("no such overload: find")
    try:
        match = re.search(str(pattern), str(target))
    except re.error as err:
        return cel_error(f"find: invalid regular expression: {err}")
    return ct.StringType(match.group(0) if match else "")


def _find_all(target: Any, pattern: Any, limit: Any = -1) -> Any:
    if not isinstance(target, str) or not isinstance(pattern, str):
        return cel_error("no such overload: findAll")
    try:
        found = [m.group(0) for m in re.finditer(str(pattern), str(target))]
    except re.error as err:
        return cel_error(f"findAll: invalid regular expression: {err}")
    if int(limit) >= 0:
        found = found[: int(limit)]
    return ct.ListType(ct.StringType(s) for s in found)


def _set_op(name: str, op: Callable[[list[Any], list[Any]], bool]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if not isinstance(a, list) or not isinstance(b, list):
            return cel_error(f"no such overload: sets.{name}")
        return ct.BoolType(op(list(a), list(b)))

    return apply


def _contains_all(a: Iterable[Any], b: Iterable[Any]) -> bool:
    items = list(a)
    return all(any(x == y for x in items) for y in b)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "sign": _quantity_method("sign", lambda q: ct.IntType(_sign(q.nanos))),
    "isInteger": _quantity_method("isInteger", lambda q: ct.BoolType(q.nanos % NANOS_PER_UNIT == 0)),
    "asInteger": _quantity_method("asInteger", _as_integer),
    "asApproximateFloat": _quantity_method("asApproximateFloat", lambda q: ct.DoubleType(q.nanos / NANOS_PER_UNIT)),
    "add": _quantity_op("add", lambda a, b: a + b),
    "sub": _quantity_op("sub", lambda a, b: a - b),
    "semver": semver,
    "isSemver": is_semver,
    "major": _semver_part("major", lambda v: v.major),
    "minor": _semver_part("minor", lambda v: v.minor),
    "patch": _semver_part("patch", lambda v: v.patch),
    "compareTo": compare_to,
    "isGreaterThan": is_greater_than,
    "isLessThan": is_less_than,
    "charAt": _strings("charAt", _char_at),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _strings("lowerAscii", lambda s: ct.StringType("".join(c.lower() if c.isascii() else c for c in s))),
    "upperAscii": _strings("upperAscii", lambda s: ct.StringType("".join(c.upper() if c.isascii() else c for c in s))),
    "replace": _strings("replace", _replace),
    "split": _strings("split", _split),
    "substring": _strings("substring", _substring),
    "trim": _strings("trim", lambda s: ct.StringType(s.strip())),
    "join": _join,
    "strings.quote": _quote,
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
    "find": _find,
    "findAll": _find_all,
    "sets.contains": _set_op("contains", _contains_all),
    "sets.equivalent": _set_op("equivalent", lambda a, b: _contains_all(a, b) and _contains_all(b, a)),
    "sets.intersects": _set_op("intersects", lambda a, b: any(x == y for x in a for y in b)),
}
"""Name -> implementation; a method call ``x.f(a)`` calls ``f(x, a)``, a namespaced ``sets.f(a, b)``
calls ``"sets.f"``."""

NAMESPACES = frozenset(name.split(".", 1)[0] for name in FUNCTIONS if "." in name)
