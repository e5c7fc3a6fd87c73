"""JSON for API-server traffic: :mod:`orjson`, with :mod:`json` as the fallback for what it refuses.

Every watch event, list page, request body and response passes through here, so the codec is a
per-pod cost: orjson decodes a pod's watch event in about 40 % of the time ``json.loads`` takes and
encodes small bodies several times faster.

- :func:`loads` raises ``ValueError`` (``orjson.JSONDecodeError`` is a ``json.JSONDecodeError``) for
  malformed input, exactly where ``json.loads`` would; callers turn it into a clear error.
- :func:`loads_list` and :func:`loads_event` decode a list page and a watch event so that one object
  orjson refuses (nested deeper than 1,024 levels) costs that object only: it comes back as an
  :class:`~apis.core.boundedjson.UndecodableObject` holding its metadata and the reason
  (:mod:`apis.core.boundedjson`), and every other object is decoded as usual.
- :func:`dumps` returns compact UTF-8 bytes. orjson refuses a few things ``json`` accepts (integers
  beyond 64 bits, non-string keys); those are encoded by ``json`` instead, so the result never depends
  on which codec ran, only the speed does.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from apis.core.boundedjson import UndecodableObject, decode_document

__all__ = ["UndecodableObject", "dumps", "loads", "loads_event", "loads_list"]


def loads(data: bytes | str) -> Any:
    """Decode one JSON document; ``ValueError`` if it is not valid JSON."""
    return orjson.loads(data)


def loads_list(data: bytes) -> Any:
    """Decode a list response; objects that cannot be decoded are :class:`UndecodableObject` items.
    ``ValueError`` if the response is not JSON."""
    return decode_document(data, container="items")


def loads_event(data: bytes) -> Any:
    """Decode one watch event; an object that cannot be decoded is an :class:`UndecodableObject`.
    ``ValueError`` if the line is not JSON."""
    return decode_document(data, container="object")


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` as compact JSON bytes; ``TypeError`` if it is not JSON-serialisable, ``ValueError``
    if it is nested too deep to encode."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        try:
            return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
        except RecursionError:
            raise ValueError("nested too deep to encode as JSON") from None
