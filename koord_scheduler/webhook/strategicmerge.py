"""Strategic merge patch of a Pod (``apimachinery/pkg/util/strategicpatch``), for a profile's ``patch``.

What Koordinator's webhook does with ``strategicpatch.StrategicMergePatch(pod, patch, &corev1.Pod{})``,
for the parts of the Pod schema a patch plausibly touches:

- maps merge key by key, recursively; a ``null`` value deletes the key;
- a map with ``$patch: replace`` replaces the original map; ``$patch: delete`` deletes it;
- lists whose Pod field has a patch merge key (containers by ``name``, env by ``name``, volumes by
  ``name``, volumeMounts by ``mountPath``, ports by ``containerPort``, tolerations are *not* one) merge
  item by item on that key; an item ``{"$patch": "delete", <key>: v}`` removes the original item;
  new items are appended;
- ``finalizers`` (a merge list of strings) is a union; every other list replaces the original;
- ``$setElementOrder/…``, ``$retainKeys`` and ``$deleteFromPrimitiveList/…`` directives are dropped
  (ordering and key retention are not reproduced).

Raises :class:`PatchError` for a patch that is not an object or whose directives make no sense.
"""

from __future__ import annotations

import copy
from typing import Any

Json = dict[str, Any]


class PatchError(ValueError):
    """The patch cannot be applied; the message names the path."""


# (parent field path, list field) → merge key. Paths use field names only (list items are transparent).
_CONTAINER_KEYS = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_SPEC_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "resourceClaims": "name",
}
_MERGE_KEYS: dict[tuple[str, ...], dict[str, str]] = {
    ("spec",): _SPEC_KEYS,
    ("spec", "containers"): _CONTAINER_KEYS,
    ("spec", "initContainers"): _CONTAINER_KEYS,
    ("spec", "ephemeralContainers"): _CONTAINER_KEYS,
    ("metadata",): {"ownerReferences": "uid"},
    ("status",): {"conditions": "type", "podIPs": "ip"},
}
_SET_LISTS = {("metadata", "finalizers")}


def strategic_merge_pod(pod: Json, patch: Any) -> Json:
    """``pod`` with ``patch`` applied (a new object; the inputs are not changed)."""
    if not isinstance(patch, dict):
        raise PatchError("patch: must be an object")
    return _merge_map(copy.deepcopy(pod), patch, ())


def _merge_map(original: Json, patch: Json, path: tuple[str, ...]) -> Json:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive is not None:
        raise PatchError(f"{_where(path)}: unsupported $patch {directive!r} on an object")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key.startswith("$deleteFromPrimitiveList/") or key == "$retainKeys":
            continue
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        child = (*path, key)
        if isinstance(value, dict):
            if value.get("$patch") == "delete":
                original.pop(key, None)
            elif isinstance(current, dict):
                original[key] = _merge_map(current, value, child)
            else:
                original[key] = _merge_map({}, value, child)
        elif isinstance(value, list):
            original[key] = _merge_list(current if isinstance(current, list) else [], value, path, key)
        else:
            original[key] = value
    return original


def _merge_list(original: list[Any], patch: list[Any], parent: tuple[str, ...], key: str) -> list[Any]:
    child = (*parent, key)
    if child in _SET_LISTS:
        out = list(original)
        out.extend(item for item in patch if item not in out)
        return out
    merge_key = _MERGE_KEYS.get(parent, {}).get(key)
    if merge_key is None:
        return [_strip(copy.deepcopy(item)) for item in patch]
    out = list(original)
    for index, item in enumerate(patch):
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"{_where(child)}[{index}]: an item needs its merge key {merge_key!r}")
        position = next(
            (i for i, o in enumerate(out) if isinstance(o, dict) and o.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if position is not None:
                del out[position]
            continue
        if position is None:
            out.append(_merge_map({}, item, child))
        else:
            out[position] = _merge_map(out[position], item, child)
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _where(path: tuple[str, ...]) -> str:
    return "patch." + ".".join(path) if path else "patch"
