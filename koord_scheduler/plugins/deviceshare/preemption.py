"""Devices in preemption dry runs (Koordinator ``deviceshare/plugin.go`` ``AddPod`` / ``RemovePod`` and
``preFilterState.preemptibleDevices``).

A dry run takes victims off a node and puts some back, asking Filter each time; the device cache does
not change. The cycle state carries, per node, the device amounts the dry run gave back (a victim's
allocation, positive) or took (a pod put back or placed, negative), per device type and minor. Filter
adds them to each device's free amounts, so a victim's share of a GPU is free for the preemptor.

Koordinator's AddPod subtracts only what its cache holds for the pod, so a pod it holds nothing for
(a nominated pod, a gang member placed by a job dry run) takes nothing. Here such a pod is given devices
as Reserve would, on the node as the dry run has it, and a later RemovePod gives exactly those back:
two members of a gang are not both promised the same GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apis.extension.device import DeviceAllocation
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.plugins.deviceshare.allocation import DeviceGroup, with_given_back
from koord_scheduler.plugins.deviceshare.cache import NodeDevices

Allocations = Mapping[str, Sequence[DeviceAllocation]]
"""Device type → the devices a pod holds."""
DeviceAmounts = dict[str, dict[int, dict[str, int]]]
"""Device type → minor → resource → amount."""
VFCounts = dict[str, dict[int, dict[str, int]]]
"""Device type → minor → VF bus id → +1 given back / -1 taken."""


def add_allocations(amounts: DeviceAmounts, allocations: Allocations, sign: int, vfs: VFCounts | None = None) -> None:
    """``amounts += sign * allocations`` (and the VFs into ``vfs``), in place; a minor left with nothing
    but zeros is dropped."""
    for device_type, items in allocations.items():
        by_minor = amounts.setdefault(device_type, {})
        for a in items:
            if vfs is not None and a.vfs:
                counts = vfs.setdefault(device_type, {}).setdefault(a.minor, {})
                for vf in a.vfs:
                    counts[vf.bus_id] = counts.get(vf.bus_id, 0) + sign
                    if counts[vf.bus_id] == 0:
                        del counts[vf.bus_id]
            row = by_minor.setdefault(a.minor, {})
            for name, amount in a.resources.items():
                row[name] = row.get(name, 0) + sign * amount
            if not any(row.values()):
                del by_minor[a.minor]
        if not by_minor:
            del amounts[device_type]


@dataclass(slots=True)
class PreemptibleDevices:
    """The dry run's device changes on each node (``preemptibleDevices``)."""

    nodes: dict[str, DeviceAmounts] = field(default_factory=dict)
    """Node → amounts given back (negative: taken by pods put back or placed)."""
    placed: dict[str, dict[str, Allocations]] = field(default_factory=dict)
    """Node → pod key → devices given to a pod the cache holds nothing for."""
    vfs: dict[str, VFCounts] = field(default_factory=dict)
    """Node → the VFs given back or taken."""

    def clone(self) -> PreemptibleDevices:
        return PreemptibleDevices(
            {node: _copy(amounts) for node, amounts in self.nodes.items()},
            {node: dict(pods) for node, pods in self.placed.items()},
            {node: _copy(counts) for node, counts in self.vfs.items()},
        )

    def on(self, node: str, device_type: str) -> Mapping[int, Mapping[str, int]]:
        """Minor → amounts given back on ``node`` (empty when the dry run changed nothing there)."""
        return self.nodes.get(node, {}).get(device_type, {})

    def vfs_on(self, node: str, device_type: str) -> Mapping[int, Mapping[str, int]]:
        """Minor → VF bus id → +1 (given back) or -1 (taken) on ``node``."""
        return self.vfs.get(node, {}).get(device_type, {})

    def give_back(self, node: str, allocations: Allocations) -> None:
        add_allocations(self.nodes.setdefault(node, {}), allocations, 1, self.vfs.setdefault(node, {}))

    def take(self, node: str, allocations: Allocations) -> None:
        add_allocations(self.nodes.setdefault(node, {}), allocations, -1, self.vfs.setdefault(node, {}))


def _copy(amounts: DeviceAmounts) -> DeviceAmounts:
    return {t: {m: dict(row) for m, row in minors.items()} for t, minors in amounts.items()}


PREEMPTIBLE_KEY: StateKey[PreemptibleDevices] = StateKey("PreemptibleDeviceShare")


def dry_run_of(state: CycleState) -> PreemptibleDevices | None:
    """The dry run's changes in ``state`` (None outside preemption dry runs and nominated-pod checks)."""
    return state.get(PREEMPTIBLE_KEY)


def apply_dry_run(preemptible: PreemptibleDevices, node: str, devices: NodeDevices) -> NodeDevices:
    """``devices`` as the dry run has them (victims' amounts and VFs free, pods put back or placed
    holding theirs)."""
    if node not in preemptible.nodes:
        return devices
    groups: dict[str, DeviceGroup] = dict(devices.groups)
    for device_type, group in devices.groups.items():
        given = preemptible.on(node, device_type)
        vfs = preemptible.vfs_on(node, device_type)
        if given or vfs:
            groups[device_type] = DeviceGroup.of(with_given_back(group.devices, given, vfs))
    return NodeDevices(groups, devices.remainders)
