"""ResourceSlices indexed for the allocator, and the resource pools a node can use (upstream's
``GatherPools`` in ``structured/internal/incubating/pools_incubating.go``).

:class:`SliceIndex` is kept current by the ResourceSlice watch: slices by name, by node (``nodeName``),
the node-independent ones (``nodeSelector``, ``allNodes``, per-device selection, shared counters) and by
pool. :func:`gather_pools` then looks only at the slices that can concern one node, instead of all of
them, which is what makes Filter over a thousand nodes affordable.

Each slice carries a cache of its devices' CEL selector results (:class:`SliceEntry`): a selector's value
depends only on the device, so it is computed once per (expression, device) for as long as the slice
is unchanged. An updated slice is a new entry with an empty cache.

Differences from upstream: pools come back sorted by (driver, pool), where upstream iterates a Go map
(random order), so the device picked among equally good pools is deterministic here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.core.selectors import node_selector_matches
from apis.core.types import Node
from apis.resource.types import Device, DeviceId, ResourceSlice

PoolId = tuple[str, str]
"""(driver, pool name)."""


class SliceEntry:
    """A slice and the CEL results of its devices: ``(expression, device index) -> True/False`` or an
    error message (str)."""

    __slots__ = ("cel_results", "slice")

    def __init__(self, resource_slice: ResourceSlice) -> None:
        self.slice = resource_slice
        self.cel_results: dict[tuple[str, int], bool | str] = {}


def _node_independent(s: ResourceSlice) -> bool:
    return not s.node_name


class SliceIndex:
    """The watched ResourceSlices. ``revision`` changes with every event (the plugin uses it to know
    that cached allocator inputs are stale)."""

    def __init__(self) -> None:
        self.entries: dict[str, SliceEntry] = {}
        self.by_node: dict[str, dict[str, SliceEntry]] = {}
        self.node_independent: dict[str, SliceEntry] = {}
        self.by_pool: dict[PoolId, dict[str, SliceEntry]] = {}
        self.revision = 0

    def upsert(self, resource_slice: ResourceSlice) -> None:
        self.remove(resource_slice.name)
        entry = SliceEntry(resource_slice)
        name = resource_slice.name
        self.entries[name] = entry
        if _node_independent(resource_slice):
            self.node_independent[name] = entry
        else:
            self.by_node.setdefault(resource_slice.node_name, {})[name] = entry
        self.by_pool.setdefault((resource_slice.driver, resource_slice.pool), {})[name] = entry
        self.revision += 1

    def remove(self, name: str) -> None:
        entry = self.entries.pop(name, None)
        if entry is None:
            return
        s = entry.slice
        if _node_independent(s):
            self.node_independent.pop(name, None)
        else:
            on_node = self.by_node.get(s.node_name)
            if on_node is not None:
                on_node.pop(name, None)
                if not on_node:
                    del self.by_node[s.node_name]
        in_pool = self.by_pool.get((s.driver, s.pool))
        if in_pool is not None:
            in_pool.pop(name, None)
            if not in_pool:
                del self.by_pool[(s.driver, s.pool)]
        self.revision += 1

    def candidates(self, node_name: str) -> Iterable[SliceEntry]:
        yield from self.by_node.get(node_name, {}).values()
        yield from self.node_independent.values()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device the allocator may pick: its id, its slice (with the CEL results) and its index there."""

    device_id: DeviceId
    entry: SliceEntry
    index: int


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[SliceEntry] = field(default_factory=list)
    """Slices of the pool's current generation with devices for the node."""
    candidates: list[Candidate] = field(default_factory=list)
    """Every device of ``slices``, in slice then device order (the order the allocator tries them)."""

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(node: Node, node_name: str, all_nodes: bool, node_selector: tuple | None) -> bool:  # type: ignore[type-arg]
    """``NodeMatches``: by name, all nodes, or a node selector; nothing set matches nothing."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        return node_selector_matches(node_selector, node.labels, node.name)
    return False


def _device_matches(node: Node, device: Device) -> bool:
    return node_matches(node, device.node_name, device.all_nodes, device.node_selector)


def gather_pools(index: SliceIndex, node: Node, *, partitionable_devices: bool) -> list[Pool]:
    """The pools with devices for ``node``, marked incomplete (not every slice of the current generation
    is there yet) or invalid (duplicate device names), in (driver, pool) order."""
    by_pool: dict[PoolId, list[SliceEntry]] = {}
    for entry in index.candidates(node.name):
        s = entry.slice
        if not partitionable_devices and (s.per_device_node_selection or s.shared_counters):
            continue
        if s.shared_counters:
            relevant = True
        elif s.node_name or s.all_nodes or s.node_selector is not None:
            relevant = node_matches(node, s.node_name, s.all_nodes, s.node_selector)
        elif s.per_device_node_selection:
            relevant = any(_device_matches(node, d) for d in s.devices)
        else:
            relevant = False  # some future way of choosing nodes: not ours to guess
        if not relevant:
            continue
        pool_id = (s.driver, s.pool)
        current = by_pool.get(pool_id)
        if current is None or s.pool_generation > current[0].slice.pool_generation:
            by_pool[pool_id] = [entry]
        elif s.pool_generation == current[0].slice.pool_generation:
            current.append(entry)
    pools: list[Pool] = []
    for pool_id in sorted(by_pool):
        entries = by_pool[pool_id]
        first = entries[0].slice
        if len(entries) != first.resource_slice_count:
            # Slices for other nodes may complete the pool, or a newer generation may replace it.
            generation = first.pool_generation
            same_generation = 0
            obsolete = False
            for other in index.by_pool.get(pool_id, {}).values():
                if other.slice.pool_generation == generation:
                    same_generation += 1
                elif other.slice.pool_generation > generation:
                    obsolete = True
                    break
            if obsolete:
                continue
            if same_generation != first.resource_slice_count:
                pools.append(Pool(pool_id[0], pool_id[1], incomplete=True))
                continue
        pools.append(_build_pool(pool_id, sorted(entries, key=lambda e: e.slice.name)))
    return pools


def _build_pool(pool_id: PoolId, entries: list[SliceEntry]) -> Pool:
    seen: dict[str, str] = {}
    for entry in entries:
        for i, device in enumerate(entry.slice.devices):
            where = f"ResourceSlice {entry.slice.name} spec.devices[{i}].name"
            if device.name in seen:
                return Pool(
                    pool_id[0],
                    pool_id[1],
                    invalid=True,
                    invalid_reason=f"duplicate device name {device.name} ({seen[device.name]}, {where})",
                )
            seen[device.name] = where
    candidates = [
        Candidate(DeviceId(pool_id[0], pool_id[1], device.name), entry, i)
        for entry in entries
        for i, device in enumerate(entry.slice.devices)
    ]
    return Pool(pool_id[0], pool_id[1], slices=entries, candidates=candidates)


class NodePoolCache:
    """:func:`gather_pools` per node, kept while neither the slices (``SliceIndex.revision``) nor the
    node's labels change: the pools a node sees do not depend on the pod."""

    def __init__(self, index: SliceIndex, *, partitionable_devices: bool) -> None:
        self.index = index
        self.partitionable_devices = partitionable_devices
        self._cached: dict[str, tuple[int, Mapping[str, str], list[Pool]]] = {}

    def pools(self, node: Node) -> list[Pool]:
        cached = self._cached.get(node.name)
        revision = self.index.revision
        if cached is not None and cached[0] == revision and (cached[1] is node.labels or cached[1] == node.labels):
            return cached[2]
        pools = gather_pools(self.index, node, partitionable_devices=self.partitionable_devices)
        if len(self._cached) > 100_000:
            self._cached.clear()
        self._cached[node.name] = (revision, node.labels, pools)
        return pools
