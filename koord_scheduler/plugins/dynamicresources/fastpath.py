"""Filter's fast path for claims a device count decides.

Most pods ask for "n devices of a class, maybe narrowed by selectors": every unallocated claim's requests
are ``exactly`` requests with ``ExactCount``, the same class and the same selectors, no admin access and
no constraints (and device taints are off). For such a pod, upstream's depth-first search succeeds on a
node exactly when the node's complete, valid pools hold at least the requests' total count of free devices
that match, and it takes the first ones in pool order; whatever it tries first, no choice of one request
can hurt another (they want interchangeable devices). So Filter only counts, and stops at the total, in
the same candidate order the search uses: the selectors it evaluates (and the CEL errors it can raise) are
the search's own. The allocation itself is computed once, by the full search, for the node Reserve gets.

Pods with anything else (prioritized lists, ``All``, constraints, several kinds of requests, admin access),
and nodes with an invalid pool (whose message the search builds), take the full search per node.
``tests/unit/scheduler/plugins/dynamicresources/test_fastpath.py`` checks on random clusters that both
paths find the same nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from apis.core.types import Node
from apis.resource.types import ALLOCATION_RESULTS_MAX_SIZE, AllocationMode, DeviceClass, DeviceId, ResourceClaim
from koord_scheduler.plugins.dynamicresources.allocator import AllocationError, Allocator
from koord_scheduler.plugins.dynamicresources.claims import ClaimTracker


@dataclass(frozen=True, slots=True)
class CountNeed:
    """``count`` free devices of ``device_class`` matching ``selectors`` (errors name ``claim_key``)."""

    device_class: DeviceClass
    selectors: tuple[str, ...]
    count: int
    claim_key: str


def count_need(
    claims: Sequence[ResourceClaim], classes: dict[str, DeviceClass], *, device_taints: bool
) -> CountNeed | None:
    """The :class:`CountNeed` of ``claims`` (the unallocated claims of one pod), or None when the full
    search is needed."""
    if device_taints or len(claims) != 1:
        return None
    (claim,) = claims
    if claim.spec.constraints or not claim.spec.requests:
        return None
    shape: tuple[str, tuple[str, ...]] | None = None
    total = 0
    for request in claim.spec.requests:
        sub = request.exactly
        if sub is None or sub.allocation_mode is not AllocationMode.EXACT_COUNT or sub.admin_access is not None:
            return None
        if shape is None:
            shape = (sub.device_class_name, sub.selectors)
        elif shape != (sub.device_class_name, sub.selectors):
            return None
        total += sub.count
    assert shape is not None
    device_class = classes.get(shape[0])
    if device_class is None or total > ALLOCATION_RESULTS_MAX_SIZE:
        return None  # the search reports these
    return CountNeed(device_class, shape[1], total, claim.key)


def enough_devices(allocator: Allocator, node: Node, need: CountNeed) -> bool | None:
    """Whether ``node`` has ``need.count`` free matching devices; None when the node has an invalid pool
    (the full search then gives the reason). Raises :class:`~.allocator.AllocationError` for a CEL error,
    as the search would at the same device."""
    pools = allocator.node_pools.pools(node)
    allocated = allocator.allocated
    found = 0
    for pool in pools:
        if pool.invalid:
            return None
        if pool.incomplete:
            continue
        for candidate in pool.candidates:
            if candidate.device_id in allocated:
                continue
            if not allocator.device_matches(candidate, need.device_class, need.selectors, need.claim_key, node):
                continue
            if candidate.entry.slice.devices[candidate.index].consumes_counters:
                continue  # DRAPartitionableDevices is off: never allocated
            found += 1
            if found >= need.count:
                return True
    return False


_MAX_SHAPES = 256


class _ShapeCounts:
    """For one (class, selectors): per node, the matching devices and how many are free."""

    __slots__ = ("claim_revision", "device_node", "free", "matching", "slice_revision", "uncounted")

    def __init__(self, slice_revision: int, claim_revision: int) -> None:
        self.slice_revision = slice_revision
        self.claim_revision = claim_revision
        self.matching: dict[str, tuple[DeviceId, ...]] = {}
        self.free: dict[str, int] = {}
        self.device_node: dict[DeviceId, str] = {}
        self.uncounted: set[str] = set()
        """Nodes the count cannot stand for: a pool not local to the node (shared with other nodes), or a
        selector error somewhere in its devices. They take :func:`enough_devices`."""


class CountIndex:
    """:func:`enough_devices` for many nodes at once: per (class, selectors), each node's matching devices
    (from node-local pools only; computed once per ResourceSlice revision) and its number of free ones,
    brought up to date from the claim tracker's log of devices that changed (a pod's allocation touches one
    node), so Filter costs a dictionary lookup per node instead of walking its devices."""

    def __init__(self, claims: ClaimTracker) -> None:
        self.claims = claims
        self._shapes: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _ShapeCounts] = {}

    def answer(self, allocator: Allocator, node: Node, need: CountNeed) -> bool | None:
        """As :func:`enough_devices`, for one node."""
        return self.answerer(allocator, need)(node)

    def answerer(self, allocator: Allocator, need: CountNeed) -> Callable[[Node], bool | None]:
        """:func:`enough_devices` for the nodes of one cycle: the counts are brought up to date once, then
        each node costs a lookup (the first time a node is seen, its devices are walked once)."""
        counts = self._counts(allocator, need)
        free = counts.free
        uncounted = counts.uncounted
        want = need.count

        def answer(node: Node) -> bool | None:
            have = free.get(node.name)
            if have is None:
                if node.name in uncounted or not self._count_node(counts, allocator, node, need):
                    return enough_devices(allocator, node, need)
                have = free[node.name]
            return have >= want

        return answer

    def _counts(self, allocator: Allocator, need: CountNeed) -> _ShapeCounts:
        key = (need.device_class.name, need.device_class.selectors, need.selectors)
        slice_revision = allocator.node_pools.index.revision
        counts = self._shapes.get(key)
        if counts is None or counts.slice_revision != slice_revision:
            if len(self._shapes) >= _MAX_SHAPES:
                self._shapes.clear()  # many distinct selectors: start again rather than grow
            counts = self._shapes[key] = _ShapeCounts(slice_revision, self.claims.revision)
            return counts
        if counts.claim_revision != self.claims.revision:
            changed = self.claims.changed_since(counts.claim_revision)
            counts.claim_revision = self.claims.revision
            if changed is None:
                counts.free.clear()
            else:
                for device in changed:
                    node_name = counts.device_node.get(device)
                    if node_name is not None:
                        counts.free[node_name] = self._free(counts.matching[node_name])
        return counts

    def _free(self, devices: tuple[DeviceId, ...]) -> int:
        allocated = self.claims
        return sum(1 for d in devices if not allocated.is_allocated(d))

    def _count_node(self, counts: _ShapeCounts, allocator: Allocator, node: Node, need: CountNeed) -> bool:
        """Fill in ``node``; False when it cannot be counted (it is then marked so)."""
        matching = counts.matching.get(node.name)
        if matching is None:
            found: list[DeviceId] = []
            for pool in allocator.node_pools.pools(node):
                if pool.invalid:
                    counts.uncounted.add(node.name)
                    return False
                if pool.incomplete:
                    continue
                for candidate in pool.candidates:
                    if not candidate.entry.slice.node_name:
                        counts.uncounted.add(node.name)
                        return False
                    try:
                        ok = allocator.device_matches(
                            candidate, need.device_class, need.selectors, need.claim_key, node
                        )
                    except AllocationError:
                        counts.uncounted.add(node.name)
                        return False
                    if ok and not candidate.entry.slice.devices[candidate.index].consumes_counters:
                        found.append(candidate.device_id)
            matching = counts.matching[node.name] = tuple(found)
            for device in matching:
                counts.device_node[device] = node.name
        counts.free[node.name] = self._free(matching)
        return True
