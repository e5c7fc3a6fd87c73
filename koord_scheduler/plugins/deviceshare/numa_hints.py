"""DeviceShare as a NUMA hint provider (Koordinator ``deviceshare/topology_hint.go``), pure.

For every set of the node's NUMA nodes (those its devices report; one node first, then pairs...), the
pod's devices are allocated as if only the devices of those NUMA nodes existed. Each feasible set is a
hint for every requested device type; the smallest feasible sets are preferred; a set whose GPUs are
those the whole node would give scores 500 (above any CPU hint's 0..100, so the devices' preference
wins ties), the others 0. When the pod's devices do not fit the node at all, there are no hints and
the failure is returned. A node whose devices report no NUMA node gives no hints (no preference).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from koord_scheduler.framework.numa_affinity import NUMATopologyHint
from koord_scheduler.plugins.deviceshare.allocation import DeviceGroup, Scorer
from koord_scheduler.plugins.deviceshare.allocator import Failure, PodDevices, Result, allocate

DEVICE_NUMA_SCORE = 500


def numa_nodes_of(groups: Mapping[str, DeviceGroup]) -> list[int]:
    return sorted({d.numa for g in groups.values() for d in g.devices if d.numa >= 0})


def mask_of(nodes: tuple[int, ...] | list[int]) -> int:
    mask = 0
    for n in nodes:
        mask |= 1 << n
    return mask


def bits(mask: int) -> frozenset[int]:
    return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)


def _gpu_minors(result: Result) -> tuple[int, ...]:
    return tuple(sorted(a.minor for a in result.get("gpu", ())))


def device_numa_hints(
    pod: PodDevices,
    groups: Mapping[str, DeviceGroup],
    scorer: Scorer,
    *,
    preferred: Mapping[str, frozenset[int]] | None = None,
) -> dict[str, list[NUMATopologyHint]] | Failure | None:
    """Hints per requested device type (see the module docstring); None for no preference."""
    nodes = numa_nodes_of(groups)
    if not nodes:
        return None
    whole = allocate(pod, groups, scorer, preferred=preferred, numa=frozenset(nodes))
    if isinstance(whole, Failure):
        return whole
    best = _gpu_minors(whole)
    feasible: list[tuple[int, int, Result]] = []
    for size in range(1, len(nodes) + 1):
        for combo in itertools.combinations(nodes, size):
            got = allocate(pod, groups, scorer, preferred=preferred, numa=frozenset(combo))
            if not isinstance(got, Failure):
                feasible.append((mask_of(combo), size, got))
    smallest = min(size for _, size, _ in feasible)
    types = [t for t, requests in pod.request.by_type.items() if any(requests.values())]
    return {
        t: [
            NUMATopologyHint(mask, size == smallest, DEVICE_NUMA_SCORE if _gpu_minors(got) == best else 0)
            for mask, size, got in feasible
        ]
        for t in types
    }
