"""Per-node devices and what pods hold of them (Koordinator ``deviceshare/device_cache.go``).

A node's devices come from its ``Device`` object. What is used comes from pods: the allocation
annotation of pods bound to the node, and the allocations this scheduler reserved but has not yet seen
bound. Unhealthy devices count for nothing. Free amounts are recomputed per node when either side
changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.extension.device import DEVICE_GPU, DeviceAllocation
from apis.scheduling.device import NodeDeviceRecord
from koord_scheduler.plugins.deviceshare.allocation import GPUState, NodeGPUs

Allocations = Mapping[str, Sequence[DeviceAllocation]]


class DeviceCache:
    def __init__(self) -> None:
        self.devices: dict[str, NodeDeviceRecord] = {}
        self._held: dict[str, dict[str, Allocations]] = {}
        """Node → pod key → what the pod holds there."""
        self._pod_node: dict[str, str] = {}
        self._gpus: dict[str, NodeGPUs] = {}

    # ----- devices -----

    def set_device(self, record: NodeDeviceRecord) -> None:
        self.devices[record.name] = record
        self._gpus.pop(record.name, None)

    def delete_device(self, name: str) -> None:
        self.devices.pop(name, None)
        self._gpus.pop(name, None)

    # ----- pods -----

    def assign(self, pod_key: str, node: str, allocations: Allocations) -> None:
        self.unassign(pod_key)
        self._held.setdefault(node, {})[pod_key] = allocations
        self._pod_node[pod_key] = node
        self._gpus.pop(node, None)

    def unassign(self, pod_key: str) -> None:
        node = self._pod_node.pop(pod_key, None)
        if node is None:
            return
        held = self._held.get(node)
        if held is not None:
            held.pop(pod_key, None)
            if not held:
                del self._held[node]
        self._gpus.pop(node, None)

    def holds(self, pod_key: str) -> bool:
        return pod_key in self._pod_node

    def held_on(self, node: str) -> Mapping[str, Allocations]:
        return self._held.get(node, {})

    # ----- queries -----

    def gpus(self, node: str) -> NodeGPUs | None:
        """The node's healthy GPUs with free amounts; None when the node has no Device object."""
        cached = self._gpus.get(node)
        if cached is not None:
            return cached
        record = self.devices.get(node)
        if record is None:
            return None
        used: dict[int, dict[str, int]] = {}
        for allocations in self._held.get(node, {}).values():
            for a in allocations.get(DEVICE_GPU, ()):
                row = used.setdefault(a.minor, {})
                for name, amount in a.resources.items():
                    row[name] = row.get(name, 0) + amount
        states: list[GPUState] = []
        for d in record.of_type(DEVICE_GPU):
            if not d.health:
                continue
            taken = used.get(d.minor, {})
            free = {name: max(total - taken.get(name, 0), 0) for name, total in d.resources.items()}
            states.append(GPUState(minor=d.minor, total=d.resources, free=free))
        result = NodeGPUs.of(states)
        self._gpus[node] = result
        return result
