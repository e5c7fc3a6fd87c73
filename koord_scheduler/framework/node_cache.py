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
    __slots__ = ("ids", "index", "layout", "seen", "statuses")

    def __init__(self, capacity: int, layout: int) -> None:
        self.ids = np.full(capacity, UNKNOWN, dtype=np.int32)
        self.seen = np.full(capacity, -1, dtype=np.int64)
        self.statuses: list[Status] = []
        self.index: dict[Status, int] = {}
        self.layout = layout


class _ScoreEntry:
    __slots__ = ("layout", "scores", "seen")

    def __init__(self, capacity: int, layout: int) -> None:
        self.scores = np.zeros(capacity, dtype=np.int64)
        self.seen = np.full(capacity, -1, dtype=np.int64)
        self.layout = layout


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
        order = snapshot.node_order()
        versions = snapshot.row_version
        dirty = order[entry.seen[order] != versions[order]]
        if len(dirty):
            local_ids, local_statuses = compute(dirty)
            remap = np.array([self._intern(entry, s) for s in local_statuses] + [PASSED], dtype=np.int32)
            # local id -1 maps to the appended PASSED slot
            entry.ids[dirty] = remap[np.where(local_ids < 0, len(local_statuses), local_ids)]
            entry.seen[dirty] = versions[dirty]
            self.recomputed_nodes += len(dirty)
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
        """Raw (un-normalised) scores for ``positions``, recomputing only nodes that changed."""
        entry = self._scores.get(key)
        if entry is None or entry.layout != snapshot.layout_version or len(entry.scores) != snapshot.capacity:
            entry = _ScoreEntry(snapshot.capacity, snapshot.layout_version)
            self._scores[key] = entry
            if len(self._scores) > self._max_scores:
                self._scores.popitem(last=False)
        else:
            self._scores.move_to_end(key)
        versions = snapshot.row_version
        stale = entry.seen[positions] != versions[positions]
        if stale.any():
            need = positions[stale]
            entry.scores[need] = np.asarray(compute(need), dtype=np.int64)
            entry.seen[need] = versions[need]
        return entry.scores[positions]

    def clear(self) -> None:
        self._filters.clear()
        self._scores.clear()
