"""DeviceShare's debug endpoints (Koordinator ``deviceshare/service.go``, ``device_summary.go``):

- ``GET /apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name``: one node's ``NodeDeviceSummary``, or 404
  ``{"message": "cannot find node <name>"}`` when the node has no ``Device`` object;
- ``GET /apis/v1/plugins/DeviceShare/nodeDeviceSummaries``: every node's, by name.

``deviceTotal`` / ``deviceFree`` / ``deviceUsed`` sum the healthy devices of every type; the ``*Detail``
maps split them by type and minor; ``allocateSet`` is what each pod (``namespace/name``) holds, by type and
minor: bound pods from their ``device-allocated`` annotation and the pods this scheduler reserved and has not
yet seen bound, the same cache Filter reads. Unhealthy devices count for nothing, as in Filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from apis.extension.device import format_device_quantity
from apis.scheduling.device import NodeDeviceRecord
from koord_scheduler.framework.services import ApiReply, ApiRoute, not_found, ok
from koord_scheduler.plugins.deviceshare.cache import DeviceCache

if TYPE_CHECKING:
    from koord_scheduler.plugins.deviceshare.plugin import DeviceShare

PerMinor = dict[str, dict[int, dict[str, int]]]
"""Device type -> minor -> resource amounts."""


def resource_list(amounts: Mapping[str, int]) -> dict[str, str]:
    """Device amounts as Koordinator writes them (``gpu-memory`` with a binary suffix), keys sorted."""
    return {k: format_device_quantity(k, int(v)) for k, v in sorted(amounts.items())}


def _add(row: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for k, v in amounts.items():
        row[k] = row.get(k, 0) + sign * v


def node_device_summary(cache: DeviceCache, record: NodeDeviceRecord) -> dict[str, Any]:
    """Koordinator's ``NodeDeviceSummary`` for the node of ``record``."""
    total: PerMinor = {}
    for device in record.devices:
        if device.health:
            _add(total.setdefault(device.type, {}).setdefault(device.minor, {}), device.resources)
    used: PerMinor = {}
    allocate_set: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
    for pod_key, allocations in sorted(cache.held_on(record.name).items()):
        for device_type, held in allocations.items():
            by_minor = allocate_set.setdefault(device_type, {}).setdefault(pod_key, {})
            for allocation in held:
                if allocation.minor not in total.get(device_type, {}):
                    continue  # a device gone or unhealthy: Koordinator's cache drops it too
                _add(used.setdefault(device_type, {}).setdefault(allocation.minor, {}), allocation.resources)
                by_minor[str(allocation.minor)] = resource_list(allocation.resources)
    free: PerMinor = {}
    for device_type, minors in total.items():
        for minor, amounts in minors.items():
            taken = used.get(device_type, {}).get(minor, {})
            free.setdefault(device_type, {})[minor] = {k: max(v - taken.get(k, 0), 0) for k, v in amounts.items()}
    return {
        "deviceTotal": resource_list(_sum(total)),
        "deviceFree": resource_list(_sum(free)),
        "deviceUsed": resource_list(_sum(used)),
        "deviceTotalDetail": _detail(total),
        "deviceFreeDetail": _detail(free),
        "deviceUsedDetail": _detail(used),
        "allocateSet": {t: pods for t, pods in sorted(allocate_set.items()) if any(pods.values())},
    }


def _sum(per_minor: PerMinor) -> dict[str, int]:
    out: dict[str, int] = {}
    for minors in per_minor.values():
        for amounts in minors.values():
            _add(out, amounts)
    return out


def _detail(per_minor: PerMinor) -> dict[str, dict[str, dict[str, str]]]:
    """Go's ``map[DeviceType]map[int]ResourceList``: minors become string keys, in Go's (lexical) order."""
    return {
        t: {str(m): resource_list(a) for m, a in sorted(minors.items(), key=lambda x: str(x[0]))}
        for t, minors in sorted(per_minor.items())
    }


def routes(plugin: DeviceShare) -> Sequence[ApiRoute]:
    cache = plugin.cache

    def one(params: Mapping[str, str], _: Mapping[str, str]) -> ApiReply:
        name = params["name"]
        record = cache.devices.get(name)
        if record is None:
            return not_found(f"cannot find node {name}")
        return ok(node_device_summary(cache, record))

    def every(_: Mapping[str, str], __: Mapping[str, str]) -> ApiReply:
        return ok({n: node_device_summary(cache, r) for n, r in sorted(cache.devices.items())})

    return (ApiRoute("/nodeDeviceSummaries", every), ApiRoute("/nodeDeviceSummaries/:name", one))
