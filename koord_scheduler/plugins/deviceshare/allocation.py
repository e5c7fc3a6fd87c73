"""Choosing GPUs on one node and scoring nodes: pure functions (Koordinator ``deviceshare/scoring.go``,
``device_resources.go``, ``devicehandler_gpu.go``).

A GPU fits when its free amount covers every per-GPU request. Among fitting GPUs the allocator takes the
``count`` best by device score (then by minor): with ``LeastAllocated`` the emptiest GPU (spread), with
``MostAllocated`` the fullest one that still fits (pack, which keeps whole GPUs free for later pods).

Device score, per scored resource the GPU has: ``requested = total - free + pod's request``; LeastAllocated
``(total - requested) * 100 / total`` (0 when requested > total), MostAllocated ``min(requested, total) *
100 / total``; the weighted mean (integer division). The node score applies the same formula to the
sums over the node's healthy GPUs.

The allocation records both memory forms: ``gpu-memory-ratio`` from bytes as
``int(bytes / total * 100)``, bytes from a ratio as ``ratio * total / 100``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.config.deviceshare_args import LEAST_ALLOCATED
from apis.extension.device import RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO, DeviceAllocation
from koord_scheduler.plugins.deviceshare.request import GPURequest

MAX_SCORE = 100


@dataclass(frozen=True, slots=True)
class GPUState:
    """One healthy GPU: its minor, total and free amounts (plain integers)."""

    minor: int
    total: Mapping[str, int]
    free: Mapping[str, int]


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
class NodeGPUs:
    """A node's healthy GPUs and their sums (computed once per change of the node's devices or pods)."""

    gpus: tuple[GPUState, ...]
    total: Mapping[str, int]
    free: Mapping[str, int]

    @classmethod
    def of(cls, gpus: Sequence[GPUState]) -> NodeGPUs:
        return cls(tuple(gpus), _sum([g.total for g in gpus]), _sum([g.free for g in gpus]))


def score_node(request: GPURequest, gpus: Sequence[GPUState] | NodeGPUs, scorer: Scorer) -> int:
    """Koordinator's ``scoreNode`` over the node's healthy GPUs."""
    node = gpus if isinstance(gpus, NodeGPUs) else NodeGPUs.of(gpus)
    if not node.gpus:
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


def allocate_gpus(request: GPURequest, gpus: Sequence[GPUState], scorer: Scorer) -> tuple[DeviceAllocation, ...] | None:
    """The GPUs given to the pod, best first, or None when fewer than ``request.count`` fit."""
    candidates = [g for g in gpus if fits(request.per_gpu, g.free)]
    if len(candidates) < request.count:
        return None
    ranked = sorted(candidates, key=lambda g: (-scorer.score(request.per_gpu, g.total, g.free), g.minor))
    return tuple(
        DeviceAllocation(minor=g.minor, resources=fill_memory(request.per_gpu, g.total))
        for g in ranked[: request.count]
    )


def with_given_back(gpus: Sequence[GPUState], given: Mapping[int, Mapping[str, int]]) -> tuple[GPUState, ...]:
    """The GPUs with ``given[minor]`` added to their free amounts (a preemption dry run's victims give
    their shares back; a negative amount is taken), kept within ``[0, total]``."""
    out: list[GPUState] = []
    for g in gpus:
        delta = given.get(g.minor)
        if not delta:
            out.append(g)
            continue
        free = {name: min(max(g.free.get(name, 0) + delta.get(name, 0), 0), total) for name, total in g.total.items()}
        out.append(GPUState(minor=g.minor, total=g.total, free=free))
    return tuple(out)
