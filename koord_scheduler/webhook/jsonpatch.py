"""RFC 6902 JSON Patch between two JSON documents, as small as a plain structural diff gives.

Maps are compared key by key (``add`` for a new key, ``remove`` for a gone one, recursion into values
present in both); lists of the same length element by element; anything else that differs is one
``replace``. Path segments are escaped per RFC 6901 (``~`` → ``~0``, ``/`` → ``~1``), so a label key
such as ``koordinator.sh/qosClass`` becomes ``/metadata/labels/koordinator.sh~1qosClass``.
"""

from __future__ import annotations

from typing import Any

Op = dict[str, Any]


def escape(segment: str) -> str:
    """One RFC 6901 reference token."""
    return segment.replace("~", "~0").replace("/", "~1")


def create_patch(original: Any, modified: Any) -> list[Op]:
    """Operations that turn ``original`` into ``modified`` (both plain JSON values)."""
    ops: list[Op] = []
    _diff(original, modified, "", ops)
    return ops


def _diff(old: Any, new: Any, path: str, ops: list[Op]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
            else:
                _diff(old[key], value, f"{path}/{escape(key)}", ops)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{path}/{i}", ops)
        return
    if type(old) is not type(new) or old != new:
        ops.append({"op": "replace", "path": path, "value": new})


def apply_patch(document: Any, ops: list[Op]) -> Any:
    """Apply ``add`` / ``remove`` / ``replace`` operations (those :func:`create_patch` emits) to a copy.

    For tests and the simulator; raises ``KeyError`` / ``IndexError`` on a path that does not exist.
    """
    import copy

    doc = copy.deepcopy(document)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if not tokens:
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last: Any = int(tokens[-1]) if isinstance(parent, list) else tokens[-1]
        if op["op"] == "remove":
            del parent[last]
        elif op["op"] == "add" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(op["value"]))
        else:
            if op["op"] == "replace" and not isinstance(parent, list) and last not in parent:
                raise KeyError(op["path"])
            parent[last] = copy.deepcopy(op["value"])
    return doc
