"""Per-node results reused across pods that look the same to the plugins.

Most pods in a burst are alike (same requests, tolerations, selectors). A plugin that implements
``sign_pod(pod) -> Hashable | None`` declares that its Filter/Score answer for a node depends only on
that signature and on the node's own state. For such pods the runtime keeps the last answer per node
and recomputes only the nodes whose ``row_version`` moved since (the node changed, a pod was added to
or removed from it, or a plugin called ``snapshot.touch``). The answers are identical to a full pass;
only the work differs. This is the batch analogue of kube-scheduler's OpportunisticBatching.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status

UNKNOWN = -2
PASSED = -1


class _FilterEntry:
    __slots__ = ("ids", "index", "layout", "statuses", "version")

    def __init__(self, capacity: int, layout: int) -> None:
        self.ids = np.full(capacity, UNKNOWN, dtype=np.int32)
        self.version = -1
        """``snapshot.version`` when the entry was last brought up to date; -1: never."""
        self.statuses: list[Status] = []
        self.index: dict[Status, int] = {}
        self.layout = layout


class _ScoreEntry:
    __slots__ = ("layout", "scores", "version")

    def __init__(self, capacity: int, layout: int) -> None:
        self.scores = np.zeros(capacity, dtype=np.int64)
        self.version = -1
        self.layout = layout


def _dirty(snapshot: ClusterSnapshot, since: int) -> Positions:
    """Live nodes changed after ``since`` (every live node when ``since`` is -1 or too old)."""
    order = snapshot.node_order()
    changed = snapshot.changed_since(since) if since >= 0 else None
    if changed is None:
        return order
    if len(changed) == 0:
        return changed
    return changed[snapshot.valid[changed]]


FilterCompute = Callable[[Positions], tuple[np.ndarray, list[Status]]]
"""``compute(dirty) -> (ids aligned with dirty (-1 = passed, else index into statuses), statuses)``."""


class NodeResultCache:
    """Bounded LRU caches keyed by pod signature."""

    def __init__(self, *, max_filter_entries: int = 16, max_score_entries: int = 64) -> None:
        self._filters: OrderedDict[Hashable, _FilterEntry] = OrderedDict()
        self._scores: OrderedDict[Hashable, _ScoreEntry] = OrderedDict()
        self._max_filters = max_filter_entries
        self._max_scores = max_score_entries
        self.hits = 0
        self.recomputed_nodes = 0

    def filter_ids(
        self, key: Hashable, snapshot: ClusterSnapshot, compute: FilterCompute
    ) -> tuple[np.ndarray, list[Status]]:
        """Status ids over every position (``PASSED`` for nodes that fit) and the status table."""
        entry = self._filters.get(key)
        if entry is None or entry.layout != snapshot.layout_version or len(entry.ids) != snapshot.capacity:
            entry = _FilterEntry(snapshot.capacity, snapshot.layout_version)
            self._filters[key] = entry
            if len(self._filters) > self._max_filters:
                self._filters.popitem(last=False)
        else:
            self._filters.move_to_end(key)
            self.hits += 1
        dirty = _dirty(snapshot, entry.version)
        if len(dirty):
            local_ids, local_statuses = compute(dirty)
            remap = np.array([self._intern(entry, s) for s in local_statuses] + [PASSED], dtype=np.int32)
            # local id -1 maps to the appended PASSED slot
            entry.ids[dirty] = remap[np.where(local_ids < 0, len(local_statuses), local_ids)]
            self.recomputed_nodes += len(dirty)
        entry.version = snapshot.version
        return entry.ids, entry.statuses

    @staticmethod
    def _intern(entry: _FilterEntry, status: Status) -> int:
        found = entry.index.get(status)
        if found is None:
            found = len(entry.statuses)
            entry.statuses.append(status)
            entry.index[status] = found
        return found

    def raw_scores(
        self,
        key: Hashable,
        snapshot: ClusterSnapshot,
        positions: Positions,
        compute: Callable[[Positions], IntArray],
    ) -> IntArray:
        """Raw (un-normalised) scores for ``positions``, recomputing only nodes that changed.

        The entry holds a score for every live node (changed nodes are rescored whether or not they
        are feasible now), so any subset of nodes can be asked for later without a per-node check.
        """
        entry = self._scores.get(key)
        if entry is None or entry.layout != snapshot.layout_version or len(entry.scores) != snapshot.capacity:
            entry = _ScoreEntry(snapshot.capacity, snapshot.layout_version)
            self._scores[key] = entry
            if len(self._scores) > self._max_scores:
                self._scores.popitem(last=False)
        else:
            self._scores.move_to_end(key)
        dirty = _dirty(snapshot, entry.version)
        if len(dirty):
            entry.scores[dirty] = np.asarray(compute(dirty), dtype=np.int64)
        entry.version = snapshot.version
        return entry.scores[positions]

    def clear(self) -> None:
        self._filters.clear()
        self._scores.clear()
