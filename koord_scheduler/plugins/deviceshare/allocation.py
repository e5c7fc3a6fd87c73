"""Choosing GPUs on one node and scoring nodes: pure functions (Koordinator ``deviceshare/scoring.go``,
``device_resources.go``, ``devicehandler_gpu.go``).

A GPU fits when its free amount covers every per-GPU request. Among fitting GPUs the allocator takes the
``count`` best by device score (then by minor; a Reservation's GPUs first for its owners): with
``LeastAllocated`` the emptiest GPU (spread), with ``MostAllocated`` the fullest one that still fits (pack,
which keeps whole GPUs free for later pods).

Device score, per scored resource the GPU has: ``requested = total - free + pod's request``; LeastAllocated
``(total - requested) * 100 / total`` (0 when requested > total), MostAllocated ``min(requested, total) *
100 / total``; the weighted mean (integer division). The node score applies the same formula to the
sums over the node's healthy GPUs.

The allocation records both memory forms: ``gpu-memory-ratio`` from bytes as
``int(bytes / total * 100)``, bytes from a ratio as ``ratio * total / 100``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from apis.config.deviceshare_args import LEAST_ALLOCATED
from apis.extension.device import RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO, DeviceAllocation
from koord_scheduler.plugins.deviceshare.request import GPURequest

MAX_SCORE = 100


@dataclass(frozen=True, slots=True)
class FreeVF:
    """A virtual function of a device: its group's labels, its minor and PCI bus id."""

    labels: Mapping[str, str]
    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One healthy device (GPU, RDMA NIC, FPGA...): its minor, total and free amounts (plain integers),
    its place in the machine (NUMA node, PCIe switch, socket; -1/"" when unknown), its labels, and its
    virtual functions (all, and those no pod holds)."""

    minor: int
    total: Mapping[str, int]
    free: Mapping[str, int]
    numa: int = -1
    pcie: str = ""
    socket: int = -1
    labels: Mapping[str, str] = field(default_factory=dict)
    all_vfs: tuple[FreeVF, ...] = ()
    free_vfs: tuple[FreeVF, ...] = ()


GPUState = DeviceState


@dataclass(frozen=True, slots=True)
class Scorer:
    """The configured strategy and weights (``DeviceShareArgs.scoringStrategy``)."""

    strategy: str
    weights: Mapping[str, int]

    def score(self, request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]) -> int:
        node_score = weight_sum = 0
        least = self.strategy == LEAST_ALLOCATED
        for name, weight in self.weights.items():
            capacity = total.get(name, 0)
            if capacity == 0:
                continue
            available = free.get(name, 0)
            requested = capacity - available + request.get(name, 0) if capacity >= available else capacity
            if least:
                s = 0 if requested > capacity else (capacity - requested) * MAX_SCORE // capacity
            else:
                s = min(requested, capacity) * MAX_SCORE // capacity
            node_score += s * weight
            weight_sum += weight
        return node_score // weight_sum if weight_sum else 0


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(free.get(name, 0) >= amount for name, amount in request.items())


def _sum(maps: Sequence[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


@dataclass(frozen=True, slots=True)
class DeviceGroup:
    """A node's healthy devices of one type and their sums (computed once per change of the node's
    devices or holdings)."""

    devices: tuple[DeviceState, ...]
    total: Mapping[str, int]
    free: Mapping[str, int]

    @classmethod
    def of(cls, devices: Sequence[DeviceState]) -> DeviceGroup:
        return cls(tuple(devices), _sum([g.total for g in devices]), _sum([g.free for g in devices]))

    @property
    def gpus(self) -> tuple[DeviceState, ...]:
        return self.devices


NodeGPUs = DeviceGroup


def score_node(request: GPURequest, gpus: Sequence[DeviceState] | DeviceGroup, scorer: Scorer) -> int:
    """Koordinator's ``scoreNode`` over the node's healthy GPUs."""
    node = gpus if isinstance(gpus, DeviceGroup) else DeviceGroup.of(gpus)
    if not node.devices:
        return 0
    return scorer.score(request.per_gpu, node.total, node.free)


def can_allocate(request: GPURequest, gpus: Sequence[GPUState]) -> bool:
    """Whether ``request.count`` GPUs fit (Filter's question; no ranking needed)."""
    need = request.count
    per_gpu = request.per_gpu
    for g in gpus:
        if fits(per_gpu, g.free):
            need -= 1
            if need == 0:
                return True
    return need <= 0


def fill_memory(request: Mapping[str, int], total: Mapping[str, int]) -> dict[str, int]:
    """The per-GPU allocation with both memory forms (Koordinator's ``fillGPUTotalMem``)."""
    out = dict(request)
    total_memory = total.get(RESOURCE_GPU_MEMORY, 0)
    has_memory, has_ratio = RESOURCE_GPU_MEMORY in out, RESOURCE_GPU_MEMORY_RATIO in out
    if has_memory and not has_ratio and total_memory > 0:
        out[RESOURCE_GPU_MEMORY_RATIO] = int(out[RESOURCE_GPU_MEMORY] / total_memory * 100)
    elif has_ratio and not has_memory and total_memory > 0:
        out[RESOURCE_GPU_MEMORY] = out[RESOURCE_GPU_MEMORY_RATIO] * total_memory // 100
    return out


def allocate_gpus(
    request: GPURequest,
    gpus: Sequence[DeviceState],
    scorer: Scorer,
    preferred: frozenset[int] = frozenset(),
) -> tuple[DeviceAllocation, ...] | None:
    """The GPUs given to the pod, best first, or None when fewer than ``request.count`` fit. GPUs of
    ``preferred`` (a Reservation's) come first (Koordinator's ``sortDeviceResourcesByMinor``)."""
    candidates = [g for g in gpus if fits(request.per_gpu, g.free)]
    if len(candidates) < request.count:
        return None
    ranked = sorted(
        candidates,
        key=lambda g: (g.minor not in preferred, -scorer.score(request.per_gpu, g.total, g.free), g.minor),
    )
    return tuple(
        DeviceAllocation(minor=g.minor, resources=fill_memory(request.per_gpu, g.total))
        for g in ranked[: request.count]
    )


def with_given_back(
    devices: Sequence[DeviceState],
    given: Mapping[int, Mapping[str, int]],
    vfs: Mapping[int, Mapping[str, int]] | None = None,
) -> tuple[DeviceState, ...]:
    """The devices with ``given[minor]`` added to their free amounts (a preemption dry run's victims give
    their shares back; a negative amount is taken), kept within ``[0, total]``; ``vfs[minor][busID]``
    above 0 frees that VF, below 0 takes it."""
    out: list[DeviceState] = []
    for d in devices:
        delta = given.get(d.minor)
        vf_delta = vfs.get(d.minor) if vfs else None
        if not delta and not vf_delta:
            out.append(d)
            continue
        free = d.free
        if delta:
            free = {
                name: min(max(d.free.get(name, 0) + delta.get(name, 0), 0), total) for name, total in d.total.items()
            }
        free_vfs = d.free_vfs
        if vf_delta:
            now = {vf.bus_id for vf in d.free_vfs}
            now |= {bus for bus, n in vf_delta.items() if n > 0}
            now -= {bus for bus, n in vf_delta.items() if n < 0}
            free_vfs = tuple(vf for vf in d.all_vfs if vf.bus_id in now)
        out.append(replace(d, free=free, free_vfs=free_vfs))
    return tuple(out)
