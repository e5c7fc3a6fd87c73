"""JSON with a bound on nesting, and API-server documents decoded one object at a time when one is refused.

Nesting is the one dimension of JSON the API server hardly limits (it accepts about 10,000 levels) and
Python handles worst: ``json.loads`` raises ``RecursionError`` (not ``ValueError``) near 1,000 levels,
and orjson refuses a whole document deeper than 1,024 levels, so one deep object in a list of thousands
cost the whole list. Two things here keep such input one object's problem:

- :func:`loads` is ``json.loads`` for JSON text a user writes into an annotation or a ConfigMap value,
  refusing text nested deeper than ``max_depth`` (:data:`TEXT_MAX_DEPTH` by default) with an ordinary
  ``json.JSONDecodeError`` that says so, before any recursion happens. Callers already turn that error
  into one naming the object and the key.
- :func:`decode_document` decodes an API-server response (a list, a watch event) with orjson and, when
  orjson refuses it, finds the refused object(s) with a scan that does not recurse: every other object
  is decoded normally, and each refused one becomes an :class:`UndecodableObject` carrying whatever of
  its metadata can be read (kind, name, namespace, uid, resourceVersion) and a message naming the field
  where it is too deep. The caller reports it and treats it as absent.

An object is refused when it is nested deeper than :data:`OBJECT_MAX_DEPTH` levels (orjson's own limit,
for the object on its own), wherever it arrives: in a list or in a watch event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

import orjson

TEXT_MAX_DEPTH: Final = 64
"""Nesting accepted in JSON text embedded in an object (annotations, ConfigMap values): Koordinator's
deepest such annotation (``reservation-affinity``, a node selector with tolerations) needs about 8."""
OBJECT_MAX_DEPTH: Final = 1024
"""Nesting accepted in an API object: orjson's limit. The API server itself accepts about 10,000."""
SHALLOW_DEPTH: Final = 8
"""How deep a refused object is read to find its metadata (``metadata.name`` is at depth 2)."""

_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
"""A JSON string (skipped whole, so brackets inside it do not count) or a bracket."""
_OPENING = (b"[", b"{")
_MARK = "\x00pykoord:cut"
"""Stands in for a container cut off by :func:`_shallow_loads` (a string no API server sends)."""
_PATH_SHOWN = 6
"""Path components shown before the rest of a deep path is elided."""


class UndecodableObject(dict[str, Any]):
    """An object of a list or watch event that could not be decoded. As a dict it holds what could be
    read of it (``apiVersion``, ``kind``, ``metadata`` without ``managedFields``), so it has a key and a
    resourceVersion like any object; ``error`` says why it was refused, naming the field."""

    def __init__(self, shallow: dict[str, Any], error: str) -> None:
        super().__init__(shallow)
        self.error = error


def loads(text: str | bytes, *, max_depth: int = TEXT_MAX_DEPTH) -> Any:
    """``json.loads(text)``, refusing text nested deeper than ``max_depth`` with a
    ``json.JSONDecodeError`` (``nested deeper than 64 levels``) at the first level too deep. Never
    raises ``RecursionError`` for a bound well under Python's recursion limit."""
    at = depth_exceeded_at(text, max_depth)
    if at is not None:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", doc, at)
    return json.loads(text)


def depth_exceeded_at(text: str | bytes, max_depth: int) -> int | None:
    """The offset of the first bracket that opens level ``max_depth + 1`` of ``text`` (brackets inside
    strings do not count; a ``str`` offset counts characters), or None when it is not nested that deep.
    Linear, no recursion; text with no more than ``max_depth`` opening brackets in all is not scanned."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return None
    depth = 0
    for match in _TOKENS.finditer(data):
        first = match.group()[:1]
        if first == b'"':
            continue
        if first in _OPENING:
            depth += 1
            if depth > max_depth:
                at = match.start()
                return len(data[:at].decode("utf-8", "replace")) if isinstance(text, str) else at
        else:
            depth -= 1
    return None


def exceeds_depth(value: Any, limit: int) -> bool:
    """Whether the decoded ``value`` is nested deeper than ``limit`` levels (a dict or list is a level).
    Iterative, stops at the first container too deep: for fields a parser copies or encodes whole (a
    Reservation's pod template), whose recursion would otherwise fail near Python's recursion limit."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


# ----- API-server documents -----


def decode_document(data: bytes, *, container: str) -> Any:
    """Decode an API-server response whose top-level ``container`` key holds the objects: ``items``
    (a list, each element one object) or ``object`` (a watch event). When the whole document decodes,
    that is the result. When it does not because of nesting, the objects under ``container`` are decoded
    one by one, and each one that is refused becomes an :class:`UndecodableObject` in its place. Raises
    ``ValueError`` when the document is not JSON at all (or not shaped like one of these)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        whole_error = exc
    spans = _container_spans(data, container)
    if spans is None:
        raise whole_error
    (start, end), elements = spans
    try:
        envelope = orjson.loads(data[:start] + (b"[]" if container == "items" else b"null") + data[end:])
    except orjson.JSONDecodeError:
        raise whole_error from None
    if not isinstance(envelope, dict):
        raise whole_error
    try:
        if container == "items":
            envelope["items"] = [_decode_object(data[s:e]) for s, e in elements]
        else:
            envelope["object"] = _decode_object(data[start:end])
    except ValueError:
        raise whole_error from None
    return envelope


def _decode_object(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return undecodable(data, exc)


def undecodable(data: bytes, exc: BaseException) -> UndecodableObject:
    """What can be read of an object orjson refused, with a message naming the field nested too deep
    (or orjson's own message when it is not nesting). Raises ``ValueError`` when not even that is JSON."""
    shallow, cut_depths = _shallow_loads(data, SHALLOW_DEPTH)
    if not isinstance(shallow, dict):
        raise ValueError(f"not a JSON object: {exc}")
    kept: dict[str, Any] = {k: shallow[k] for k in ("apiVersion", "kind") if isinstance(shallow.get(k), str)}
    meta = shallow.get("metadata")
    if isinstance(meta, dict):
        kept["metadata"] = {k: v for k, v in meta.items() if k != "managedFields" and v != _MARK}
    too_deep = [
        path for path, depth in zip(_marker_paths(shallow), cut_depths, strict=True) if depth > OBJECT_MAX_DEPTH
    ]
    if not too_deep:
        return UndecodableObject(kept, f"not valid JSON: {exc}")
    # managedFields mirror the object's fields: name the field itself where it is among those too deep.
    path = next((p for p in too_deep if p[:2] != ["metadata", "managedFields"]), too_deep[0])
    return UndecodableObject(kept, f"{format_path(path, more=True)}: nested deeper than {OBJECT_MAX_DEPTH} levels")


def _container_spans(data: bytes, key: str) -> tuple[tuple[int, int], list[tuple[int, int]]] | None:
    """The span of the value of the top-level ``key`` (an array or an object) and, for an array, the
    spans of its container elements. None when the document has no such key."""
    want = b'"' + key.encode() + b'"'
    depth = 0
    last_key_end = -1
    last_key: bytes = b""
    start = -1
    element_start = -1
    elements: list[tuple[int, int]] = []
    for match in _TOKENS.finditer(data):
        token = match.group()
        first = token[:1]
        if first == b'"':
            if depth == 1:
                last_key, last_key_end = token, match.end()
            continue
        if first in _OPENING:
            depth += 1
            if depth == 2 and start < 0 and last_key == want and data[last_key_end : match.start()].strip() == b":":
                start = match.start()
            elif depth == 3 and start >= 0:
                element_start = match.start()
            continue
        depth -= 1
        if start >= 0 and depth == 2 and element_start >= 0:
            elements.append((element_start, match.end()))
            element_start = -1
        elif start >= 0 and depth == 1:
            return (start, match.end()), elements
    return None


def _shallow_loads(data: bytes, max_depth: int) -> tuple[Any, list[int]]:
    """``data`` decoded with every container below level ``max_depth`` replaced by a marker string, and
    for each container cut off (in document order) the deepest level reached inside it."""
    out: list[bytes] = []
    depth = 0
    deepest = 0
    copied = 0
    cut_from = -1
    cut_depths: list[int] = []
    mark = json.dumps(_MARK).encode()
    for match in _TOKENS.finditer(data):
        first = match.group()[:1]
        if first == b'"':
            continue
        if first in _OPENING:
            depth += 1
            if depth == max_depth + 1:
                cut_from = match.start()
                deepest = depth
            elif depth > deepest:
                deepest = depth
            continue
        depth -= 1
        if depth == max_depth and cut_from >= 0:
            out.append(data[copied:cut_from])
            out.append(mark)
            copied = match.end()
            cut_from = -1
            cut_depths.append(deepest)
    if cut_from >= 0:  # unbalanced: let the decoder say what is wrong
        return orjson.loads(data[:cut_from]), []
    out.append(data[copied:])
    return orjson.loads(b"".join(out)), cut_depths


def _marker_paths(value: Any) -> Iterator[list[str | int]]:
    """Paths to the markers in ``value``, in document order (iterative: ``value`` is shallow anyway)."""
    stack: list[tuple[list[str | int], Any]] = [([], value)]
    while stack:
        path, node = stack.pop()
        if node == _MARK and isinstance(node, str):
            yield path
        elif isinstance(node, dict):
            stack.extend(([*path, k], v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(([*path, i], v) for i, v in reversed(list(enumerate(node))))


def format_path(path: list[str | int], *, more: bool = False) -> str:
    """``spec.template[0].a`` (keys that are not identifiers in brackets, as :class:`~.errors.ParseError`
    writes them), at most :data:`_PATH_SHOWN` components, ``…`` for the rest or when ``more``."""
    out = ""
    for part in path[:_PATH_SHOWN]:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.replace("_", "a").isalnum() and not part[:1].isdigit():
            out += f".{part}" if out else part
        else:
            out += f"[{part}]"
    if more or len(path) > _PATH_SHOWN:
        out += "…"
    return out
