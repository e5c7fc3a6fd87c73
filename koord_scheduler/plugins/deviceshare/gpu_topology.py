"""GPUs chosen by the machine's topology (Koordinator ``deviceshare/allocator_gpu.go``
``allocateByDeviceTopology``, ``allocator_gpu_helper.go`` ``GetGPUTopologyScope``), pure.

The node's GPUs form a tree of scopes: the node (level 1), its NUMA nodes (level 2, by id) and, under
each, its PCIe switches (level 3, by id); built only when every GPU reports its topology. A pod's GPUs
are taken from one scope, searched depth first:

- a scope with fewer GPUs than the pod needs is skipped;
- among its children that can give the GPUs, the deepest result wins, then the one whose scopes already
  hold more used GPUs (``cumulativeNotEmpties``: packing, which keeps empty scopes whole), then, for a
  shared GPU, the better device score; the first found wins ties;
- when no child can, the scope gives them itself if the pod's required topology scope allows (its level
  is not deeper than the scope's): whole GPUs in minor order, or the best-scored GPU for a share.

A GPU is a candidate when the pod's per-GPU request fits its free amounts. Without a tree, or for a pod
sharing more than one GPU, the caller falls back to the score order (:func:`.allocation.allocate_gpus`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from koord_scheduler.plugins.deviceshare.allocation import DeviceState, Scorer, fits
from koord_scheduler.plugins.deviceshare.request import GPURequest

NODE_LEVEL, NUMA_LEVEL, PCIE_LEVEL = 1, 2, 3


@dataclass(frozen=True, slots=True)
class Scope:
    level: int
    minors: tuple[int, ...]
    children: tuple[Scope, ...] = ()


def topology_tree(devices: Sequence[DeviceState]) -> Scope | None:
    """The scope tree of the GPUs, or None when one of them reports no topology (no PCIe id)."""
    if not devices or any(not d.pcie for d in devices):
        return None
    by_numa: dict[int, dict[str, list[int]]] = {}
    for d in devices:
        by_numa.setdefault(d.numa, {}).setdefault(d.pcie, []).append(d.minor)
    numa_scopes: list[Scope] = []
    for numa in sorted(by_numa):
        pcies = by_numa[numa]
        children = tuple(Scope(PCIE_LEVEL, tuple(sorted(pcies[p]))) for p in sorted(pcies))
        numa_scopes.append(Scope(NUMA_LEVEL, tuple(sorted(m for p in pcies.values() for m in p)), children))
    return Scope(NODE_LEVEL, tuple(sorted(d.minor for d in devices)), tuple(numa_scopes))


@dataclass(slots=True)
class _Result:
    minors: list[int]
    not_empties: int
    depth: int
    score: int


@dataclass(slots=True)
class _Context:
    request: GPURequest
    free: Mapping[int, DeviceState]
    used: frozenset[int]
    scorer: Scorer | None
    required_level: int
    devices: dict[int, tuple[bool, int]] = field(default_factory=dict)
    """Minor → (satisfied, score), computed once per minor."""

    def device(self, minor: int) -> tuple[bool, int]:
        known = self.devices.get(minor)
        if known is not None:
            return known
        d = self.free.get(minor)
        ok = d is not None and fits(self.request.per_gpu, d.free)
        score = 0
        if ok and d is not None and self.request.shared and self.scorer is not None:
            score = self.scorer.score(self.request.per_gpu, d.total, d.free)
        self.devices[minor] = (ok, score)
        return ok, score


def _from_scope(ctx: _Context, scope: Scope, not_empties: int, depth: int) -> _Result | None:
    count = ctx.request.count
    if len(scope.minors) < count:
        return None
    depth += 1
    if ctx.used.intersection(scope.minors):
        not_empties += 1
    best: _Result | None = None
    for child in scope.children:
        if len(child.minors) < count:
            continue
        found = _from_scope(ctx, child, not_empties, depth)
        if found is None or not found.minors:
            continue
        if best is None:
            best = found
            continue
        if best.depth < found.depth or (best.depth == found.depth and best.not_empties < found.not_empties):
            best = found
        if (
            ctx.request.shared
            and best.depth == found.depth
            and best.not_empties == found.not_empties
            and best.score < found.score
        ):
            best = found
    if best is not None:
        return best
    if ctx.required_level > scope.level:
        return None
    candidates: list[int] = []
    best_minor, best_score, satisfied = -1, -1, False
    for minor in scope.minors:
        ok, score = ctx.device(minor)
        if not ok:
            continue
        if not ctx.request.shared:
            candidates.append(minor)
            if len(candidates) == count:
                satisfied = True
                break
            continue
        satisfied = True
        if score > best_score:
            best_minor, best_score = minor, score
    if not satisfied:
        return None
    return _Result(candidates if not ctx.request.shared else [best_minor], not_empties, depth, best_score)


def allocate_by_topology(
    request: GPURequest,
    devices: Sequence[DeviceState],
    scorer: Scorer | None,
    *,
    required_level: int = 0,
    tree: Scope | None = None,
) -> list[int] | None:
    """The minors of the GPUs to give, or None when no scope can give them (or there is no tree)."""
    tree = tree if tree is not None else topology_tree(devices)
    if tree is None:
        return None
    free = {d.minor: d for d in devices}
    used = frozenset(d.minor for d in devices if any(d.free.get(k, 0) < v for k, v in d.total.items()))
    found = _from_scope(_Context(request, free, used, scorer, required_level), tree, 0, 0)
    return found.minors if found is not None else None
