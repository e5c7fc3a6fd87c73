"""Merging NUMA hints into one affinity and admitting it under a node's NUMA topology policy
(Koordinator ``pkg/scheduler/frameworkext/topologymanager``, itself the kubelet topology manager's merge).

Pure: hints per resource in, ``(best hint, admitted, reasons)`` out. A hint's ``mask`` is a bit mask of
NUMA node ids (bit ``i`` is NUMA node ``i``); ``None`` means "any NUMA node" (no preference).

- ``SingleNUMANode`` keeps only preferred single-node hints and admits only a preferred result;
- ``Restricted`` admits only a preferred result;
- ``BestEffort`` always admits; an unsatisfied best hint becomes "all NUMA nodes".

A NUMA node's status (idle, single, shared) comes from the cpusets already bound on it; with the pod's
``singleNUMANodeExclusive: Required`` a multi-NUMA hint may not touch a ``single`` node and a single-NUMA
hint may not land on a ``shared`` one (such hints stop being preferred).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from apis.extension.numa import NUMATopologyPolicy

ERR_UNSATISFIED_RESOURCE = "Unsatisfied NUMA {}"
ERR_UNALIGNED = "Unaligned NUMA Hint cause {}"


class NUMANodeStatus(StrEnum):
    IDLE = "idle"
    SHARED = "shared"
    SINGLE = "single"


class NUMAExclusive(StrEnum):
    NONE = ""
    PREFERRED = "Preferred"
    REQUIRED = "Required"


@dataclass(frozen=True, slots=True)
class NUMAHint:
    mask: int | None
    preferred: bool
    score: int = 0
    unsatisfied: bool = False


def mask_of(nodes: Sequence[int]) -> int:
    mask = 0
    for node in nodes:
        mask |= 1 << node
    return mask


def bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def count(mask: int) -> int:
    return bin(mask).count("1")


def narrower(a: int, b: int) -> bool:
    """``IsNarrowerThan``: fewer NUMA nodes, or as many and a smaller mask value."""
    ca, cb = count(a), count(b)
    return a < b if ca == cb else ca < cb


def mask_text(mask: int | None) -> str:
    """The Go ``BitMask.String()`` form: binary, zero-padded to a multiple of two digits (``01``, ``11``,
    ``0100``); ``<nil>`` for no mask."""
    if mask is None:
        return "<nil>"
    grouping = 2
    for shift in range(64 - grouping, 0, -grouping):
        if mask > 1 << shift:
            return format(mask, f"0{shift + grouping}b")
    return format(mask, f"0{grouping}b")


def exclusive_ok(mask: int | None, exclusive: NUMAExclusive, statuses: Mapping[int, NUMANodeStatus]) -> bool:
    """``checkExclusivePolicy``."""
    if mask is None:
        return False
    if exclusive is not NUMAExclusive.REQUIRED:
        return True
    nodes = bits(mask)
    if len(nodes) > 1:
        return all(statuses.get(n, NUMANodeStatus.IDLE) is not NUMANodeStatus.SINGLE for n in nodes)
    return statuses.get(nodes[0], NUMANodeStatus.IDLE) is not NUMANodeStatus.SHARED


def _summary(resource: str, hints: Sequence[NUMAHint]) -> str:
    preferred = [mask_text(h.mask) for h in hints if not h.unsatisfied and h.preferred]
    possible = [mask_text(h.mask) for h in hints if not h.unsatisfied]
    return f"{resource} prefer [{' '.join(preferred)}] among [{' '.join(possible)}]"


def _filter_provider_hints(
    providers: Sequence[Mapping[str, Sequence[NUMAHint] | None]],
) -> tuple[list[list[NUMAHint]], list[str], list[str]]:
    """``filterProvidersHints``: one hint list per (provider, resource); no list → a preferred any-NUMA
    hint; an empty list → an unsatisfied hint and the reason ``Unsatisfied NUMA <resource>``."""
    all_hints: list[list[NUMAHint]] = []
    reasons: list[str] = []
    summary: list[str] = []
    for hints in providers:
        if not hints:
            all_hints.append([NUMAHint(None, True)])
            continue
        for resource in sorted(hints):
            listed = hints[resource]
            if listed is None:
                all_hints.append([NUMAHint(None, True)])
            elif not listed:
                all_hints.append([NUMAHint(None, False, unsatisfied=True)])
                reasons.append(ERR_UNSATISFIED_RESOURCE.format(resource))
            else:
                summary.append(_summary(resource, listed))
                all_hints.append(list(listed))
    summary.sort()
    return all_hints, reasons, summary


def _merge_permutation(all_nodes: int, permutation: Sequence[NUMAHint]) -> NUMAHint:
    preferred, satisfied = True, True
    masks = [h.mask for h in permutation if h.mask is not None]
    merged = all_nodes
    for mask in masks:
        merged &= mask
        if mask != masks[0]:
            preferred = False
    widest = max((count(m) for m in masks), default=0)
    for hint in permutation:
        preferred = preferred and hint.preferred
        satisfied = satisfied and not hint.unsatisfied
    satisfied = (not masks or widest == count(merged)) and satisfied
    return NUMAHint(merged, preferred, unsatisfied=not satisfied)


def merge_hints(
    numa_nodes: Sequence[int],
    hint_lists: Sequence[Sequence[NUMAHint]],
    exclusive: NUMAExclusive,
    statuses: Mapping[int, NUMANodeStatus],
) -> NUMAHint:
    """``mergeFilteredHints``: the best of every permutation's bitwise AND. Preferred beats not preferred;
    then narrower wins; at the same width a higher summed score wins; else the first found stays."""
    all_nodes = mask_of(numa_nodes)
    best = NUMAHint(all_nodes, False)
    for permutation in itertools.product(*hint_lists):
        merged = _merge_permutation(all_nodes, permutation)
        mask = merged.mask
        if mask is None or mask == 0:
            continue
        if not exclusive_ok(mask, exclusive, statuses):
            merged = replace(merged, preferred=False)
        merged = replace(merged, score=sum(h.score for h in permutation if h.mask == mask))
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        best_mask = all_nodes if best.mask is None else best.mask
        if not narrower(mask, best_mask):
            if count(mask) == count(best_mask) and merged.score > best.score:
                best = merged
            continue
        best = merged
    return best


def admit(
    policy: NUMATopologyPolicy,
    numa_nodes: Sequence[int],
    providers: Sequence[Mapping[str, Sequence[NUMAHint] | None]],
    exclusive: NUMAExclusive,
    statuses: Mapping[int, NUMANodeStatus],
) -> tuple[NUMAHint, bool, list[str]]:
    """``Policy.Merge`` for BestEffort, Restricted and SingleNUMANode: the best hint, whether the pod is
    admitted, and the reasons when it is not."""
    hint_lists, reasons, summary = _filter_provider_hints(providers)
    all_nodes = mask_of(numa_nodes)
    if policy is NUMATopologyPolicy.BEST_EFFORT:
        best = merge_hints(numa_nodes, hint_lists, exclusive, statuses)
        if best.unsatisfied:
            best = NUMAHint(all_nodes, False)
        return best, True, []
    if policy is NUMATopologyPolicy.RESTRICTED:
        if reasons:
            return NUMAHint(all_nodes, False), False, reasons
        best = merge_hints(numa_nodes, hint_lists, exclusive, statuses)
        if not best.preferred:
            return best, False, [ERR_UNALIGNED.format(" & ".join(summary))]
        return best, True, []
    if policy is NUMATopologyPolicy.SINGLE_NUMA_NODE:
        if reasons:
            return NUMAHint(None, False), False, reasons
        single = [[h for h in hints if h.preferred and (h.mask is None or count(h.mask) == 1)] for hints in hint_lists]
        best = merge_hints(numa_nodes, single, exclusive, statuses)
        if best.mask == all_nodes:
            best = NUMAHint(None, best.preferred)
        if not best.preferred:
            return best, False, [ERR_UNALIGNED.format(",".join(summary))]
        return best, True, []
    return NUMAHint(None, True), True, []
