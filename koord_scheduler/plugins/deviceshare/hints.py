"""The pod's device annotations (Koordinator ``apis/extension/device_share.go``), parsed as pure functions:

- ``scheduling.koordinator.sh/device-allocate-hint``: per device type, a ``selector`` of devices by their
  labels, a ``vfSelector`` of VF groups (a VF must then be allocated), an ``allocateStrategy``
  (``ApplyForAll``: every matching device; ``RequestsAsCount``: the request is a count of devices), a
  ``requiredTopologyScope`` (``Device``, ``PCIe``, ``NUMANode``, ``Node``) and an ``exclusivePolicy``
  (``DeviceLevel``, ``PCIeLevel``);
- ``scheduling.koordinator.sh/device-joint-allocate``: ``deviceTypes`` (the first is primary; the others
  are taken under the PCIe switches of its devices) and ``requiredScope`` (``SamePCIe``: they must be).

A malformed annotation is Koordinator's error message (the pod is then unresolvable).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apis.core.errors import ParseError
from apis.core.parse import parse_label_selector
from apis.core.types import LabelSelector

ANNOTATION_DEVICE_ALLOCATE_HINT = "scheduling.koordinator.sh/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"

APPLY_FOR_ALL = "ApplyForAll"
REQUESTS_AS_COUNT = "RequestsAsCount"
SAME_PCIE = "SamePCIe"
DEVICE_LEVEL = "DeviceLevel"
PCIE_LEVEL = "PCIeLevel"
SCOPE_LEVELS: Mapping[str, int] = {"Device": 4, "PCIe": 3, "NUMANode": 2, "Node": 1}
"""``DeviceTopologyScopeLevel``: deeper scopes are higher."""


class HintError(ValueError):
    """A malformed device annotation; the message is Koordinator's."""


@dataclass(frozen=True, slots=True)
class DeviceHint:
    selector: LabelSelector | None = None
    vf_selector: LabelSelector | None = None
    allocate_strategy: str = ""
    required_topology_scope: str = ""
    exclusive_policy: str = ""

    @property
    def must_allocate_vf(self) -> bool:
        """``mustAllocateVF``: a VF selector asks for a VF of each device."""
        return self.vf_selector is not None


@dataclass(frozen=True, slots=True)
class JointAllocate:
    device_types: tuple[str, ...]
    required_scope: str = ""


def _object(text: str, what: str) -> Mapping[str, Any]:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise HintError(f"invalid {what} annotation, err: {exc}") from None
    if not isinstance(raw, dict):
        raise HintError(f"invalid {what} annotation, err: expected a JSON object")
    return raw


def _selector(raw: object, device_type: str, field: str) -> LabelSelector | None:
    if raw is None:
        return None
    try:
        return parse_label_selector(raw)
    except (ParseError, ValueError, TypeError) as exc:
        raise HintError(f"invalid {field} of DeviceHint, deviceType: {device_type}, err: {exc}") from None


def device_hints(annotations: Mapping[str, str]) -> dict[str, DeviceHint]:
    """The pod's allocate hints by device type (empty without the annotation). Raises :class:`HintError`."""
    text = annotations.get(ANNOTATION_DEVICE_ALLOCATE_HINT)
    if text is None:
        return {}
    raw = _object(text, "DeviceAllocateHint")
    hints: dict[str, DeviceHint] = {}
    for device_type, body in raw.items():
        if body is None:
            continue
        if not isinstance(body, dict):
            raise HintError(f"invalid DeviceAllocateHint annotation, err: {device_type!r} must be an object")
        strings = {k: body.get(k, "") for k in ("allocateStrategy", "requiredTopologyScope", "exclusivePolicy")}
        if not all(isinstance(v, str) for v in strings.values()):
            raise HintError(f"invalid DeviceAllocateHint annotation, err: {device_type!r} has a non-string field")
        hints[device_type] = DeviceHint(
            selector=_selector(body.get("selector"), device_type, "Selector"),
            vf_selector=_selector(body.get("vfSelector"), device_type, "VFSelector"),
            allocate_strategy=strings["allocateStrategy"],
            required_topology_scope=strings["requiredTopologyScope"],
            exclusive_policy=strings["exclusivePolicy"],
        )
    return hints


def joint_allocate(
    annotations: Mapping[str, str], requested: Mapping[str, Mapping[str, int]], hints: Mapping[str, DeviceHint]
) -> JointAllocate | None:
    """The pod's joint allocation, keeping only the device types it requests and does not apply for all
    (``parsePodDeviceShareExtensions``). Raises :class:`HintError`."""
    text = annotations.get(ANNOTATION_DEVICE_JOINT_ALLOCATE)
    if text is None:
        return None
    raw = _object(text, "DeviceJointAllocate")
    types = raw.get("deviceTypes") or []
    scope = raw.get("requiredScope") or ""
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types) or not isinstance(scope, str):
        raise HintError("invalid DeviceJointAllocate annotation, err: deviceTypes must be a list of strings")
    kept = tuple(
        t
        for t in types
        if not (t in hints and hints[t].allocate_strategy == APPLY_FOR_ALL) and any(requested.get(t, {}).values())
    )
    return JointAllocate(kept, scope)
