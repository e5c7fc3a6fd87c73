"""NUMA hints for one pod on one node, and the split of its requests over the NUMA nodes of a hint
(Koordinator ``resource_manager.go``: ``generateResourceHints``, ``tryBestToDistributeEvenly``,
``trimNUMANodeResources``).

Pure. Amounts are the scheduler's integers: millicores for ``cpu``, bytes or counts otherwise.

Hints: every non-empty set of NUMA nodes, smallest first and lexicographic within a size, is tried with
a dry-run allocation (``feasible``); each feasible set that touches no NUMA node lacking a requested
resource becomes a hint for every requested resource the NUMA zones report, scored by the NUMA scorer.
A hint is preferred when it has the fewest NUMA nodes of all feasible ones, or when the policy is
``Restricted``. A requested resource the zones report but no set can hold gets an empty hint list.

Split: the hint's NUMA nodes are ordered by what they have available of the resource (least first;
Koordinator's comparator indexes that order by slice position rather than by NUMA node id, which only
matters when the ids are not 0..n-1; pykoord orders by the NUMA node's own availability), and the i-th
of k nodes takes ``min(available, remaining / (k - i))``. Bound CPUs split in whole CPUs (whole cores
under a required FullPCPUs policy).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from apis.core.types import CPU
from apis.extension.numa import NUMATopologyPolicy
from koord_scheduler.plugins.nodenumaresource.topology_manager import NUMAHint, mask_of

ERR_INSUFFICIENT_NUMA = "Insufficient NUMA {}"

Amounts = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class CPUSplit:
    """How bound CPUs split: ``bind`` (whole CPUs) and, under a required FullPCPUs policy, whole cores
    of ``cpus_per_core``."""

    bind: bool = False
    full_cores: bool = False
    cpus_per_core: int = 1


def iterate_masks(numa_nodes: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """``bitmask.IterateBitMasks``: subsets by size, lexicographic within a size."""
    for size in range(1, len(numa_nodes) + 1):
        yield from itertools.combinations(numa_nodes, size)


def _split(resource: str, amount: int, parts: int, split: CPUSplit) -> int:
    if resource != CPU or not split.bind:
        return amount // parts
    cpus = -(-amount // 1000)  # Quantity.Value() rounds up
    if split.full_cores and split.cpus_per_core > 0:
        cores = cpus // split.cpus_per_core
        return cores // parts * split.cpus_per_core * 1000
    return cpus // parts * 1000


def distribute(
    requests: Amounts,
    available: Mapping[int, Amounts],
    nodes: Sequence[int],
    split: CPUSplit = CPUSplit(),
) -> tuple[dict[int, dict[str, int]], list[str]]:
    """``tryBestToDistributeEvenly``: per NUMA node of ``nodes``, what it gives of each request, and the
    reasons (``Insufficient NUMA <resource>``) for requested resources the zones report but could not
    cover."""
    numa_resources = {name for amounts in available.values() for name in amounts}
    result: dict[int, dict[str, int]] = {}
    reasons: list[str] = []
    for resource in sorted(requests):
        remaining = requests[resource]
        if resource not in numa_resources:
            continue
        ordered = sorted(nodes, key=lambda n: (available.get(n, {}).get(resource, 0), n))
        for i, node in enumerate(ordered):
            share = _split(resource, remaining, len(ordered) - i, split)
            got = min(available.get(node, {}).get(resource, 0), share)
            if got > 0:
                result.setdefault(node, {})[resource] = got
                remaining -= got
        if remaining != 0:
            reasons.append(ERR_INSUFFICIENT_NUMA.format(resource))
    return result, reasons


def available_numa(allocatable: Mapping[int, Amounts], allocated: Mapping[int, Amounts]) -> dict[int, dict[str, int]]:
    """Zone allocatable minus what bound and assumed pods hold there, never below zero."""
    return {
        node: {name: max(0, amount - allocated.get(node, {}).get(name, 0)) for name, amount in amounts.items()}
        for node, amounts in allocatable.items()
    }


def generate_hints(
    numa_nodes: Sequence[int],
    allocatable: Mapping[int, Amounts],
    available: Mapping[int, Amounts],
    requests: Amounts,
    *,
    policy: NUMATopologyPolicy,
    feasible: Callable[[tuple[int, ...]], bool],
    score: Callable[[dict[str, int], dict[str, int]], int],
) -> dict[str, list[NUMAHint]]:
    """Hints per requested resource (see the module docstring). ``score(requested, total)`` scores a
    set from what is already used there and its total; ``feasible(nodes)`` is the dry-run allocation."""
    numa_resources = {name for amounts in allocatable.values() for name in amounts}
    lacking = {
        name: mask_of([n for n in numa_nodes if available.get(n, {}).get(name, 0) <= 0]) for name in numa_resources
    }
    min_size = dict.fromkeys(requests, len(numa_nodes))
    hints: dict[str, list[NUMAHint]] = {}
    hinted: set[str] = set()
    for nodes in iterate_masks(numa_nodes):
        total: dict[str, int] = {}
        free: dict[str, int] = {}
        for node in nodes:
            for name, amount in allocatable.get(node, {}).items():
                total[name] = total.get(name, 0) + amount
            for name, amount in available.get(node, {}).items():
                free[name] = free.get(name, 0) + amount
        hinted.update(name for name in requests if name in total)
        used = {name: max(0, amount - free.get(name, 0)) for name, amount in total.items()}
        hint_score = score(used, total)
        if not feasible(nodes):
            continue
        mask = mask_of(nodes)
        if any(mask & lacking.get(name, 0) for name in hinted):
            continue
        for name in sorted(hinted):
            if len(nodes) < min_size.get(name, len(numa_nodes)):
                min_size[name] = len(nodes)
            hints.setdefault(name, []).append(NUMAHint(mask, False, hint_score))
    restricted = policy is NUMATopologyPolicy.RESTRICTED
    for name, listed in hints.items():
        size = min_size.get(name, len(numa_nodes))
        hints[name] = [NUMAHint(h.mask, restricted or bin(h.mask or 0).count("1") == size, h.score) for h in listed]
    for name in requests:
        if name in hinted:
            hints.setdefault(name, [])
    return hints


def trim_cpu(available: Mapping[int, Amounts], bindable_cpus: Mapping[int, int]) -> dict[int, dict[str, int]]:
    """``trimNUMANodeResources``: under a required bind policy a NUMA node offers no more CPU than the
    CPUs the policy would let the pod take there (``bindable_cpus``, a count per NUMA node)."""
    trimmed: dict[int, dict[str, int]] = {}
    for node, amounts in available.items():
        row = dict(amounts)
        cpu = row.get(CPU, 0)
        if cpu and bindable_cpus.get(node, 0) * 1000 < cpu:
            row[CPU] = bindable_cpus.get(node, 0) * 1000
        trimmed[node] = row
    return trimmed
