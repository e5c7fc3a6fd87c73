"""The columnar view of the cluster that plugins read.

Per-node numbers live in numpy arrays indexed by a node's *position*, a stable small integer handed out
when the node is first seen. Labels, taints, pods and ports live in one :class:`NodeInfo` record per node.

The scheduler cache mutates this object in place as events arrive, between scheduling cycles (the event
loop is single threaded), so taking a "snapshot" costs nothing and a change costs O(changed nodes).
Plugins must treat it as read-only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

from apis.core.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Node, ObjectMeta, Pod

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Positions = npt.NDArray[np.intp]

BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)
"""Always columns 0, 1, 2; other resources get a column when first seen."""
CPU_COL, MEMORY_COL, EPHEMERAL_COL = 0, 1, 2

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")

_MAX_CHANGE_LOG = 1 << 16
_NO_POSITIONS: Positions = np.empty(0, dtype=np.intp)
_NO_POSITIONS.flags.writeable = False

PortKey = tuple[str, str, int]
"""(host IP, protocol, port)."""


class NodeInfo:
    """One node and the pods accounted on it (bound, assumed and reserved alike)."""

    __slots__ = ("churn", "generation", "node", "pods", "position", "used_ports")

    def __init__(self, position: int, node: Node | None) -> None:
        self.position = position
        self.node = node
        self.pods: dict[str, Pod] = {}
        self.used_ports: Counter[PortKey] = Counter()
        self.generation = 0
        self.churn = 0
        """Pods removed from ``pods`` or replaced under their key by :meth:`ClusterSnapshot.add_pod`.
        While it stays the same, ``pods`` only gained keys (and had objects swapped for equivalent ones,
        :meth:`ClusterSnapshot.swap_pod`): readers that mirror ``pods`` need only the new keys."""

    @property
    def name(self) -> str:
        return self.node.name if self.node is not None else ""


def zone_key(labels: Mapping[str, str]) -> str:
    """kube-scheduler's ``GetZoneKey``: region and zone joined, or "" when the node has neither."""
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class ClusterSnapshot:
    """Columnar node state. Mutators are for the scheduler cache only."""

    def __init__(self, initial_capacity: int = 64) -> None:
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {n: i for i, n in enumerate(BASE_RESOURCES)}
        cap = max(1, initial_capacity)
        width = len(self.resource_names)
        self.allocatable: IntArray = np.zeros((cap, width), dtype=np.int64)
        self.requested: IntArray = np.zeros((cap, width), dtype=np.int64)
        self.non_zero_requested: IntArray = np.zeros((cap, 2), dtype=np.int64)
        self.pod_count: IntArray = np.zeros(cap, dtype=np.int64)
        self.allowed_pods: IntArray = np.zeros(cap, dtype=np.int64)
        self.valid: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.row_version: IntArray = np.zeros(cap, dtype=np.int64)
        """Per position: the value of ``version`` when anything about the node changed last (the node
        object, its pods, or plugin-held per-node state a plugin reported with :meth:`touch`)."""
        self.version = 0
        self._change_log: list[int] = []
        """Position touched at each version: ``_change_log[v - _log_base - 1]`` is the node of version v."""
        self._log_base = 0
        self._changed_memo: tuple[int, int, Positions] | None = None
        self._split_memo: tuple[int, int, tuple[Positions, Positions] | None] | None = None
        self._allocatable_memo: tuple[Positions, slice | list[int], int, IntArray, IntArray, bool] | None = None
        """(positions, columns, version, the allocatable array read, rows, all positive) of the last
        :meth:`allocatable_rows` answer."""
        self.layout_version = 0
        """Bumped when columns are added: per-node caches over columns must be rebuilt."""
        self.infos: list[NodeInfo | None] = [None] * cap
        self.positions: dict[str, int] = {}
        self._ghosts: dict[str, int] = {}
        """Entries for nodes that are gone (or not seen yet) but still have pods accounted."""
        self._free: list[int] = []
        self._next = 0
        self._order: Positions | None = None
        self.nodes_generation = 0
        """Bumped whenever a node is added, removed, or its labels, taints or spec change."""
        self.pods_generation = 0
        """Bumped whenever a pod is added to or removed from any node."""
        self._pod_log: list[int] = []
        """Position of each pod add/remove: ``_pod_log[g - _pod_log_base - 1]`` moved ``pods_generation`` to g."""
        self._pod_log_base = 0
        self.node_objects_version = 0
        """Bumped whenever a node object is set (added or updated in any way) or removed."""
        self._vector_cache: dict[Mapping[str, int], tuple[int, IntArray]] = {}

    # ----- reading -----

    @property
    def capacity(self) -> int:
        """Length of every per-node array (positions are < capacity)."""
        return len(self.infos)

    @property
    def num_nodes(self) -> int:
        return len(self.positions)

    def node_order(self) -> Positions:
        """Positions of the live nodes in kube-scheduler's node-tree order (zones interleaved)."""
        if self._order is None:
            order = self._build_order()
            order.flags.writeable = False  # shared by every cycle until the nodes change
            self._order = order
        return self._order

    def info(self, position: int) -> NodeInfo:
        info = self.infos[position]
        if info is None or info.node is None:
            raise KeyError(f"no node at position {position}")
        return info

    def node_info(self, name: str) -> NodeInfo | None:
        pos = self.positions.get(name)
        return None if pos is None else self.infos[pos]

    def node(self, position: int) -> Node:
        node = self.info(position).node
        assert node is not None
        return node

    def iter_nodes(self) -> Iterator[NodeInfo]:
        for pos in self.node_order():
            info = self.infos[int(pos)]
            assert info is not None
            yield info

    def touch(self, position: int) -> None:
        """Mark a node changed for per-node caches (plugins call it when their own per-node state, such
        as a NodeMetric or a reservation, changes)."""
        self.version += 1
        self.row_version[position] = self.version
        self._log_base += _append_bounded(self._change_log, position)

    def changed_since(self, version: int) -> Positions | None:
        """Positions touched after ``version`` (unique, unordered), or None when that is too long ago
        for the change log (the caller then rechecks every node)."""
        if version < self._log_base:
            return None
        memo = self._changed_memo
        if memo is not None and memo[0] == version and memo[1] == self.version:
            return memo[2]
        recent = self._change_log[version - self._log_base :]
        if not recent:
            result = _NO_POSITIONS
        elif len(recent) <= 64:
            unique = set(recent)
            result = np.fromiter(unique, dtype=np.intp, count=len(unique))
        else:
            result = np.unique(np.asarray(recent, dtype=np.intp))
        # Every per-node cache asks the same question within a cycle: answer it once per version
        # (read-only, since callers share it).
        result.flags.writeable = False
        self._changed_memo = (version, self.version, result)
        return result

    def pods_changed_since(self, generation: int) -> list[int] | None:
        """Positions where a pod was added or removed after ``pods_generation`` was ``generation`` (in
        order, with repeats; a fresh list), or None when that is too long ago for the log."""
        if generation < self._pod_log_base:
            return None
        return self._pod_log[generation - self._pod_log_base :]

    def only_pod_change_since(self, generation: int) -> int | None:
        """The position of the one pod added or removed after ``pods_generation`` was ``generation``; None
        when there were none or several (:meth:`pods_changed_since` without building a list)."""
        if generation + 1 != self.pods_generation or not self._pod_log:
            return None
        return self._pod_log[-1]

    def changes_since(self, version: int) -> tuple[Positions, Positions] | None:
        """``(live, gone)``: positions touched after ``version`` that hold a live node, and those that
        do not (the node was removed); read-only, unordered. None when ``version`` is too old for the
        change log. Answered once per ``(version, self.version)``: every per-node cache asks each cycle."""
        memo = self._split_memo
        if memo is not None and memo[0] == version and memo[1] == self.version:
            return memo[2]
        if self._log_base <= version and self.version - version <= 8:
            # The few nodes a cycle (or the handful of cycles since a per-shape cache entry was last
            # used) changed: split the log's positions directly, without building the unsplit array
            # first (half the cost; the per-node caches of a many-shape workload ask this several times
            # a cycle, each with its own version).
            touched = set(self._change_log[version - self._log_base :])
            is_live = self.valid
            on_live = [p for p in touched if is_live[p]]
            gone = (
                _NO_POSITIONS
                if len(on_live) == len(touched)
                else np.array([p for p in touched if not is_live[p]], dtype=np.intp)
            )
            short = (np.array(on_live, dtype=np.intp), gone)
            short[0].flags.writeable = False
            gone.flags.writeable = False
            self._split_memo = (version, self.version, short)
            return short
        changed = self.changed_since(version)
        if changed is None:
            split = None
        elif len(changed) <= 8:
            # Scalar reads beat four numpy calls on the one or two nodes a cycle usually changes.
            valid = self.valid
            listed = changed.tolist()
            split = (
                np.array([p for p in listed if valid[p]], dtype=np.intp),
                np.array([p for p in listed if not valid[p]], dtype=np.intp),
            )
        else:
            live = self.valid[changed]
            # Nodes are rarely removed: when every changed node is live, the memoised array is the answer.
            split = (changed, _NO_POSITIONS) if live.all() else (changed[live], changed[~live])
        if split is not None:
            split[0].flags.writeable = False
            split[1].flags.writeable = False
        self._split_memo = (version, self.version, split)
        return split

    def allocatable_rows(self, positions: Positions, columns: slice | list[int]) -> tuple[IntArray, bool]:
        """``allocatable[positions][:, columns]`` (read-only) and whether every one of its cells is > 0.

        The resource Score plugins (NodeResourcesFit, BalancedAllocation) score the same changed nodes one
        after the other, on the same columns (cpu, memory): the last answer is kept and returned again
        while ``positions`` is the same read-only array, ``columns`` are equal and nothing changed
        (``version``; the allocatable array itself, which a new column replaces). A writable
        ``positions`` is never kept (its contents could change under the same identity)."""
        memo = self._allocatable_memo
        if (
            memo is not None
            and memo[0] is positions
            and memo[2] == self.version
            and memo[3] is self.allocatable
            and memo[1] == columns
        ):
            return memo[4], memo[5]
        rows: IntArray = self.allocatable[positions][:, columns]
        positive = bool(rows.min() > 0) if rows.size else True
        if not positions.flags.writeable:
            rows.flags.writeable = False
            self._allocatable_memo = (positions, columns, self.version, self.allocatable, rows, positive)
        return rows, positive

    def column(self, resource: str) -> int | None:
        return self.resource_index.get(resource)

    def request_vector(self, pod: Pod) -> IntArray:
        """The pod's Filter request as a row over ``resource_names`` (adds columns for new resources).

        Read-only and shared: cached per distinct ``pod.requests`` (pods of one template, and the copies
        the scheduler makes of a pod to assume and bind it, share one vector)."""
        requests = pod.requests
        width = len(self.resource_names)
        try:
            cached = self._vector_cache.get(requests)
            cacheable = True
        except TypeError:  # a plugin-built pod with a plain dict
            cached, cacheable = None, False
        if cached is not None and cached[0] == width:
            return cached[1]
        for name in requests:
            if name != PODS and name not in self.resource_index:
                self._add_column(name)
        width = len(self.resource_names)
        vec = np.zeros(width, dtype=np.int64)
        for name, amount in requests.items():
            if name != PODS:
                vec[self.resource_index[name]] = amount
        vec.flags.writeable = False
        if cacheable:
            if len(self._vector_cache) > 4096:
                self._vector_cache.clear()
            self._vector_cache[requests] = (width, vec)
        return vec

    # ----- mutation (scheduler cache only) -----

    def upsert_node(self, node: Node) -> int:
        pos = self.positions.get(node.name)
        was_live = pos is not None
        if pos is None:
            pos = self._ghosts.pop(node.name, None)
        if pos is None:
            pos = self._allocate_position()
            self.infos[pos] = NodeInfo(pos, None)
        info = self.infos[pos]
        assert info is not None
        old = info.node if was_live else None
        info.node = node
        info.generation += 1
        self.node_objects_version += 1
        self.touch(pos)
        self.positions[node.name] = pos
        self.valid[pos] = True
        self._write_allocatable(pos, node)
        if old is None or old.labels != node.labels:
            self._order = None
        if (
            old is None
            or old.labels != node.labels
            or old.taints != node.taints
            or (old.unschedulable != node.unschedulable)
        ):
            self.nodes_generation += 1
        return pos

    def remove_node(self, name: str) -> None:
        """Forget the node. Pods still accounted on it keep their NodeInfo until they are removed."""
        pos = self.positions.pop(name, None)
        if pos is None:
            return
        info = self.infos[pos]
        assert info is not None
        self.valid[pos] = False
        self.allocatable[pos] = 0
        self.allowed_pods[pos] = 0
        self.node_objects_version += 1
        self.touch(pos)
        self._order = None
        self.nodes_generation += 1
        if info.pods:
            info.node = _ghost(name)
            self._ghosts[name] = pos
        else:
            self._release(pos)

    def add_pod(self, pod: Pod) -> None:
        """Account a pod with ``node_name`` set on its node (creating a ghost entry if the node is unknown)."""
        pos = self.positions.get(pod.node_name)
        if pos is None:
            pos = self._ghost_position(pod.node_name)
        if pos is None:
            pos = self._allocate_position()
            self.infos[pos] = NodeInfo(pos, _ghost(pod.node_name))
            self._ghosts[pod.node_name] = pos
        info = self.infos[pos]
        assert info is not None
        if pod.key in info.pods:
            self._account(pos, info.pods[pod.key], sign=-1)
            info.churn += 1
        info.pods[pod.key] = pod
        self._account(pos, pod, sign=1)

    def swap_pod(self, old: Pod, new: Pod) -> None:
        """Replace ``old`` by ``new`` on its node without accounting or touching anything: for a ``new``
        that every reader would treat exactly as ``old`` (same node, requests, ports, labels ...; the
        caller checks). Per-node caches keep their answers."""
        pos = self.positions.get(old.node_name)
        if pos is None:
            pos = self._ghost_position(old.node_name)
        info = self.infos[pos] if pos is not None else None
        if info is None or info.pods.get(old.key) is not old:
            raise KeyError(f"pod {old.key} is not accounted on node {old.node_name!r}")
        info.pods[old.key] = new

    def remove_pod(self, pod: Pod) -> None:
        pos = self.positions.get(pod.node_name)
        if pos is None:
            pos = self._ghost_position(pod.node_name)
        if pos is None:
            return
        info = self.infos[pos]
        assert info is not None
        old = info.pods.pop(pod.key, None)
        if old is None:
            return
        info.churn += 1
        self._account(pos, old, sign=-1)
        if not self.valid[pos] and not info.pods:
            self._release(pos)

    # ----- internals -----

    def _account(self, pos: int, pod: Pod, *, sign: int) -> None:
        vec = self.request_vector(pod)
        row = self.requested[pos]
        if sign > 0:
            row += vec
        else:
            row -= vec
        self.non_zero_requested[pos, 0] += sign * pod.non_zero_cpu
        self.non_zero_requested[pos, 1] += sign * pod.non_zero_memory
        self.pod_count[pos] += sign
        info = self.infos[pos]
        assert info is not None
        for hp in pod.host_ports:
            key = (hp.host_ip, hp.protocol, hp.port)
            info.used_ports[key] += sign
            if info.used_ports[key] <= 0:
                del info.used_ports[key]
        info.generation += 1
        self.pods_generation += 1
        self._pod_log_base += _append_bounded(self._pod_log, pos)
        self.touch(pos)

    def _write_allocatable(self, pos: int, node: Node) -> None:
        for name in node.allocatable:
            if name != PODS and name not in self.resource_index:
                self._add_column(name)
        row = np.zeros(len(self.resource_names), dtype=np.int64)
        for name, amount in node.allocatable.items():
            if name != PODS:
                row[self.resource_index[name]] = amount
        self.allocatable[pos] = row
        self.allowed_pods[pos] = node.allocatable.get(PODS, 0)

    def _add_column(self, name: str) -> None:
        self.layout_version += 1
        self.resource_index[name] = len(self.resource_names)
        self.resource_names.append(name)
        pad = np.zeros((self.capacity, 1), dtype=np.int64)
        self.allocatable = np.hstack([self.allocatable, pad])
        self.requested = np.hstack([self.requested, pad])

    def _allocate_position(self) -> int:
        if self._free:
            return self._free.pop()
        if self._next >= self.capacity:
            self._grow(self.capacity * 2)
        pos = self._next
        self._next += 1
        return pos

    def _ghost_position(self, name: str) -> int | None:
        return self._ghosts.get(name)

    def _release(self, pos: int) -> None:
        self.touch(pos)
        info = self.infos[pos]
        if info is not None:
            self._ghosts.pop(info.name, None)
        self.infos[pos] = None
        self.requested[pos] = 0
        self.non_zero_requested[pos] = 0
        self.pod_count[pos] = 0
        self._free.append(pos)

    def _grow(self, new_cap: int) -> None:
        extra = new_cap - self.capacity

        def pad(arr: IntArray) -> IntArray:
            return np.concatenate([arr, np.zeros((extra, *arr.shape[1:]), dtype=arr.dtype)])

        self.allocatable = pad(self.allocatable)
        self.requested = pad(self.requested)
        self.non_zero_requested = pad(self.non_zero_requested)
        self.pod_count = pad(self.pod_count)
        self.allowed_pods = pad(self.allowed_pods)
        self.valid = np.concatenate([self.valid, np.zeros(extra, dtype=np.bool_)])
        self.row_version = np.concatenate([self.row_version, np.zeros(extra, dtype=np.int64)])
        self.layout_version += 1
        self.infos.extend([None] * extra)

    def _build_order(self) -> Positions:
        zones: dict[str, list[int]] = {}
        for pos in sorted(self.positions.values()):
            info = self.infos[pos]
            assert info is not None and info.node is not None
            zones.setdefault(zone_key(info.node.labels), []).append(pos)
        if len(zones) <= 1:
            return np.fromiter(next(iter(zones.values()), []), dtype=np.intp)
        ordered: list[int] = []
        lists = list(zones.values())
        depth = max(len(z) for z in lists)
        for i in range(depth):
            ordered.extend(z[i] for z in lists if i < len(z))
        return np.asarray(ordered, dtype=np.intp)


def _ghost(name: str) -> Node:
    return Node(meta=ObjectMeta(name=name))


def _append_bounded(log: list[int], position: int) -> int:
    """Append to a change log; past ``_MAX_CHANGE_LOG`` entries drop its older half. Returns how many
    entries were dropped (the caller moves its log base by that much)."""
    log.append(position)
    if len(log) <= _MAX_CHANGE_LOG:
        return 0
    drop = len(log) // 2
    del log[:drop]
    return drop
