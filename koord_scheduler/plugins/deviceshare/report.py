"""What ``koord-scheduler simulate`` prints for DeviceShare: the devices each placed pod got, and every
node's Device object by type."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apis.extension.device import DOMAIN, DeviceAllocation, format_device_quantity
from apis.scheduling.device import NodeDeviceRecord

Placements = Mapping[str, tuple[str, Mapping[str, Sequence[DeviceAllocation]]]]


def allocation_rows(placements: Placements) -> list[dict[str, Any]]:
    """One row per pod and device: pod, node, ``type/minor``, what it got (and its VFs)."""
    rows: list[dict[str, Any]] = []
    for key, (node, allocations) in sorted(placements.items()):
        for device_type, items in allocations.items():
            for a in items:
                resources = " ".join(
                    f"{k.removeprefix(DOMAIN)}={format_device_quantity(k, v)}" for k, v in sorted(a.resources.items())
                )
                if a.vfs:
                    resources += " vf=" + ",".join(vf.bus_id for vf in a.vfs)
                rows.append({"pod": key, "node": node, "device": f"{device_type}/{a.minor}", "resources": resources})
    return rows


def device_rows(devices: Mapping[str, NodeDeviceRecord], allocated_types: frozenset[str]) -> list[dict[str, Any]]:
    """Every node's Device object: devices by type (healthy/total), and a note for types not allocated."""
    rows: list[dict[str, Any]] = []
    for node, record in sorted(devices.items()):
        for device_type in sorted({d.type for d in record.devices}):
            of_type = record.of_type(device_type)
            healthy = sum(1 for d in of_type if d.health)
            note = "" if device_type in allocated_types else "not allocated by this scheduler"
            rows.append({"node": node, "type": device_type, "healthy": f"{healthy}/{len(of_type)}", "note": note})
    return rows
