"""DeviceShare's debug endpoints (Koordinator ``deviceshare/service.go``, ``device_summary.go``):

- ``GET /apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name``: one node's ``NodeDeviceSummary``, or 404
  ``{"message": "cannot find node <name>"}`` when the node has no ``Device`` object;
- ``GET /apis/v1/plugins/DeviceShare/nodeDeviceSummaries``: every node's, by name.

``deviceTotal`` / ``deviceFree`` / ``deviceUsed`` sum the healthy devices of every type; the ``*Detail``
maps split them by type and minor; ``allocateSet`` is what each holder holds, by type and minor: pods
(``namespace/name``: bound ones from their ``device-allocated`` annotation, and those this scheduler reserved
and has not yet seen bound) and Reservations (``reservation/<uid>``), the same cache Filter reads. Unhealthy
devices count for nothing, as in Filter.
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


def _add(row: dict[str, int], amounts: Mapping[str, int]) -> None:
    for k, v in amounts.items():
        row[k] = row.get(k, 0) + v


def node_device_summary(cache: DeviceCache, record: NodeDeviceRecord) -> dict[str, Any]:
    """Koordinator's ``NodeDeviceSummary`` for the node of ``record``: totals and free amounts from the view
    Filter reads (:meth:`.DeviceCache.node_devices`: healthy devices, a Reservation's devices counted once
    with the owner pods that consume them), used = total - free, and what each holder holds."""
    view = cache.node_devices(record.name)
    total: PerMinor = {}
    free: PerMinor = {}
    used: PerMinor = {}
    for device_type, group in view.groups.items() if view is not None else ():
        for d in group.devices:
            total.setdefault(device_type, {})[d.minor] = dict(d.total)
            free.setdefault(device_type, {})[d.minor] = dict(d.free)
            taken = {k: v - d.free.get(k, 0) for k, v in d.total.items() if v - d.free.get(k, 0)}
            if taken:
                used.setdefault(device_type, {})[d.minor] = taken
    allocate_set: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
    for holder, holding in sorted(cache.held_on(record.name).items()):
        for device_type, held in holding.allocations.items():
            by_minor = {str(a.minor): resource_list(a.resources) for a in held if a.resources}
            if by_minor:
                allocate_set.setdefault(device_type, {})[holder] = by_minor
    return {
        "deviceTotal": resource_list(_sum(total)),
        "deviceFree": resource_list(_sum(free)),
        "deviceUsed": resource_list(_sum(used)),
        "deviceTotalDetail": _detail(total),
        "deviceFreeDetail": _detail(free),
        "deviceUsedDetail": _detail(used),
        "allocateSet": dict(sorted(allocate_set.items())),
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
