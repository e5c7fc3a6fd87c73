"""Typed access to raw JSON objects, raising :class:`~apis.core.errors.ParseError` with field paths.

Each helper reads ``obj[key]``, returns a default when the key is absent or ``null`` (Kubernetes omits
empty fields), and raises a ``ParseError`` whose ``field`` is ``key`` when the value has the wrong JSON
type. Callers place the error in the object with ``err.under(prefix)`` as it propagates, so the happy
path never builds a path string.

The checks use ``type(x) is ...`` first: JSON decoders produce exact ``dict`` / ``list`` / ``str``
instances, and an exact type check is several times cheaper than an ``isinstance`` against an ABC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.core.errors import ParseError, join_path
from apis.core.frozendict import EMPTY, FrozenDict

Json = Mapping[str, Any]
JsonList = list[Any] | tuple[Any, ...]

EMPTY_JSON: Json = EMPTY


def invalid(field: str, message: str) -> ParseError:
    """A ``ParseError`` not yet attributed to an object (``err.for_object`` does that at the top)."""
    return ParseError("", "", field=field, message=message)


def type_name(raw: Any) -> str:
    """The JSON type name of ``raw`` for messages (``string``, ``number``, ``object``, ...)."""
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return "boolean"
    if isinstance(raw, str):
        return "string"
    if isinstance(raw, int | float):
        return "number"
    if isinstance(raw, Mapping):
        return "object"
    if isinstance(raw, list | tuple):
        return "array"
    return type(raw).__name__


def key_path(key: str) -> str:
    """A map key as a path element: ``cpu`` stays ``cpu``; ``nvidia.com/gpu`` becomes ``[nvidia.com/gpu]``."""
    if key and all(ch.isalnum() or ch in "_-" for ch in key):
        return key
    return f"[{key}]"


def is_map(raw: Any) -> bool:
    return type(raw) is dict or isinstance(raw, Mapping)


def as_map(raw: Any, field: str) -> Json:
    """``raw`` itself as an object (``None`` -> empty)."""
    if raw is None:
        return EMPTY_JSON
    if type(raw) is dict or isinstance(raw, Mapping):
        return raw
    raise invalid(field, f"expected an object, got {type_name(raw)}")


def as_list(raw: Any, field: str) -> JsonList:
    """``raw`` itself as an array (``None`` -> empty)."""
    if raw is None:
        return ()
    if type(raw) is list or isinstance(raw, tuple):
        return raw
    raise invalid(field, f"expected an array, got {type_name(raw)}")


def get_map(obj: Json, key: str) -> Json:
    raw = obj.get(key)
    if raw is None:
        return EMPTY_JSON
    if type(raw) is dict or isinstance(raw, Mapping):
        return raw
    raise invalid(key, f"expected an object, got {type_name(raw)}")


def get_list(obj: Json, key: str) -> JsonList:
    raw = obj.get(key)
    if raw is None:
        return ()
    if type(raw) is list or isinstance(raw, tuple):
        return raw
    raise invalid(key, f"expected an array, got {type_name(raw)}")


def get_str(obj: Json, key: str) -> str:
    """``obj[key]`` as a string; ``""`` when absent."""
    raw = obj.get(key)
    if type(raw) is str:
        return raw
    if raw is None:
        return ""
    raise invalid(key, f"expected a string, got {type_name(raw)}")


def get_required_str(obj: Json, key: str) -> str:
    raw = get_str(obj, key)
    if not raw:
        raise invalid(key, "required")
    return raw


def get_int(obj: Json, key: str, default: int = 0) -> int:
    """``obj[key]`` as an integer (booleans and floats are rejected, as the API server rejects them)."""
    raw = obj.get(key)
    if type(raw) is int:
        return raw
    if raw is None:
        return default
    raise invalid(key, f"expected an integer, got {type_name(raw)}")


def get_optional_int(obj: Json, key: str) -> int | None:
    if obj.get(key) is None:
        return None
    return get_int(obj, key)


def get_bool(obj: Json, key: str) -> bool:
    raw = obj.get(key)
    if raw is None:
        return False
    if type(raw) is bool:
        return raw
    raise invalid(key, f"expected a boolean, got {type_name(raw)}")


def get_str_map(obj: Json, key: str) -> FrozenDict[str, str]:
    """``obj[key]`` as a string-to-string map (labels, annotations, node selectors)."""
    raw = get_map(obj, key)
    if not raw:
        return EMPTY
    for k, v in raw.items():
        if type(k) is not str:
            raise invalid(key, f"expected string keys, got {type_name(k)} {k!r}")
        if type(v) is not str:
            raise invalid(join_path(key, key_path(k)), f"expected a string, got {type_name(v)}")
    return FrozenDict(raw)


def get_str_list(obj: Json, key: str) -> tuple[str, ...]:
    raw = get_list(obj, key)
    for i, v in enumerate(raw):
        if type(v) is not str:
            raise invalid(f"{key}[{i}]", f"expected a string, got {type_name(v)}")
    return tuple(raw)


def check_item(item: Any, field: str, index: int) -> Json:
    """Element ``index`` of the array ``field``, which must be an object."""
    if type(item) is dict or isinstance(item, Mapping):
        return item
    raise invalid(f"{field}[{index}]", f"expected an object, got {type_name(item)}")
