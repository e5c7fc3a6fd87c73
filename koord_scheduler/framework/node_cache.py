"""Per-node results reused across pods that look the same to the plugins.

Most pods in a burst are alike (same requests, tolerations, selectors). A plugin that implements
``sign_pod(pod) -> Hashable | None`` declares that its Filter/Score answer for a node depends only on
that signature and on the node's own state. For such pods the runtime keeps the last answer per node
and recomputes only the nodes whose ``row_version`` moved since (the node changed, a pod was added to
or removed from it, or a plugin called ``snapshot.touch``). The answers are identical to a full pass;
only the work differs. This is the batch analogue of kube-scheduler's OpportunisticBatching.

Three kinds of entry: Filter status ids per node (for the whole signed Filter chain), raw scores per
node (one signed Score plugin), and weighted sums per node (every signed Score plugin without
NormalizeScore, folded together, see :mod:`~koord_scheduler.framework.score_phase`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from itertools import count
from typing import NamedTuple, TypeVar

import numpy as np

from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status

UNKNOWN = -2
PASSED = -1
FEW_NODES = 4
"""Up to this many nodes, results are bookkept in plain Python, and plugins that have both the batch and
the per-node form of Filter/Score are asked through the per-node one (cheaper on one node). The one
threshold: plugins do not keep their own. Measured crossover (5,000 nodes, 2-core VM): a per-node Score
costs 3-4 µs a node, NodeResourcesFit's and BalancedAllocation's batch Score 15-19 µs for any handful of
nodes, so the batch form wins from about five nodes (an entry of one request shape in a 16-shape mix
recomputes 16 nodes on average)."""


_entry_serials = count()


class FilterAnswer(NamedTuple):
    """What :meth:`NodeResultCache.filter_ids` returns."""

    ids: np.ndarray
    """Status ids over every position (``PASSED`` for nodes that fit, ``UNKNOWN`` for positions without
    a live node)."""
    statuses: list[Status]
    failing: int
    """How many positions hold a failure id."""
    stamp: tuple[int, int]
    """Equal stamps mean equal ``ids`` and ``statuses``: (the entry's serial, its count of changes)."""


class _FilterEntry:
    __slots__ = ("changes", "failing", "ids", "index", "layout", "serial", "statuses", "version")

    def __init__(self, capacity: int, layout: int) -> None:
        self.serial = next(_entry_serials)
        self.changes = 0
        """Bumped whenever ``ids`` may have changed (the stamp of :class:`FilterAnswer`)."""
        self.ids = np.full(capacity, UNKNOWN, dtype=np.int32)
        self.failing = 0
        """How many positions hold a failure id (>= 0); 0 means every position passes."""
        self.version = -1
        """``snapshot.version`` when the entry was last brought up to date; -1: never."""
        self.statuses: list[Status] = []
        self.index: dict[Status, int] = {}
        self.layout = layout


class _ScoreEntry:
    __slots__ = ("changes", "layout", "scores", "serial", "version")

    def __init__(self, capacity: int, layout: int) -> None:
        self.serial = next(_entry_serials)
        self.changes = 0
        """Bumped whenever ``scores`` changed (see :meth:`NodeResultCache.raw_scores_stamped`)."""
        self.scores = np.zeros(capacity, dtype=np.int64)
        self.version = -1
        self.layout = layout


class _SumEntry:
    __slots__ = ("invalid", "invalid_count", "layout", "sums", "version")

    def __init__(self, capacity: int, layout: int) -> None:
        self.sums = np.zeros(capacity, dtype=np.int64)
        self.invalid = np.zeros(capacity, dtype=np.bool_)
        """Per position: some plugin's raw score was outside [MIN_NODE_SCORE, MAX_NODE_SCORE]."""
        self.invalid_count = 0
        self.version = -1
        self.layout = layout


def _dirty(snapshot: ClusterSnapshot, since: int) -> Positions:
    """Live nodes changed after ``since`` (every live node when ``since`` is -1 or too old)."""
    return _changes(snapshot, since)[0]


def _changes(snapshot: ClusterSnapshot, since: int) -> tuple[Positions, Positions | None]:
    """``(live nodes to recompute, positions whose node is gone)``; the second is None when every live
    node is recomputed (``since`` is -1 or too old), and then everything the entry held is forgotten."""
    split = snapshot.changes_since(since) if since >= 0 else None
    if split is None:
        return snapshot.node_order(), None
    return split


FilterCompute = Callable[[Positions], tuple[np.ndarray, list[Status]]]
"""``compute(dirty) -> (ids aligned with dirty (-1 = passed, else index into statuses), statuses)``."""

SumCompute = Callable[[Positions], tuple[IntArray, np.ndarray | None]]
"""``compute(dirty) -> (weighted sums aligned with dirty, per node: whether any raw score was out of range)``;
None for the second when no score was."""

_Entry = TypeVar("_Entry", _FilterEntry, _ScoreEntry, _SumEntry)


class NodeResultCache:
    """Bounded LRU caches keyed by pod signature."""

    def __init__(self, *, max_filter_entries: int = 64, max_score_entries: int = 64) -> None:
        self._filters: OrderedDict[Hashable, _FilterEntry] = OrderedDict()
        self._scores: OrderedDict[Hashable, _ScoreEntry] = OrderedDict()
        self._sums: OrderedDict[Hashable, _SumEntry] = OrderedDict()
        self._max_filters = max_filter_entries
        self._max_scores = max_score_entries
        self.hits = 0

    def filter_ids(self, key: Hashable, snapshot: ClusterSnapshot, compute: FilterCompute) -> FilterAnswer:
        """Status ids over every position, the status table, how many positions fail, and a stamp that
        changes whenever the ids may have (:class:`FilterAnswer`)."""
        entry = self._filters.get(key)
        if entry is None or entry.layout != snapshot.layout_version or len(entry.ids) != snapshot.capacity:
            entry = _lru_insert(
                self._filters, key, _FilterEntry(snapshot.capacity, snapshot.layout_version), self._max_filters
            )
        else:
            self._filters.move_to_end(key)
            self.hits += 1
        dirty, gone = _changes(snapshot, entry.version)
        if gone is None:
            entry.ids.fill(UNKNOWN)
            entry.failing = 0
            entry.changes += 1
        elif len(gone):
            entry.failing -= int(np.count_nonzero(entry.ids[gone] >= 0))
            entry.ids[gone] = UNKNOWN
            entry.changes += 1
        if len(dirty):
            local_ids, local_statuses = compute(dirty)
            remap = [self._intern(entry, s) for s in local_statuses]
            if len(dirty) <= FEW_NODES:
                # Scalar updates beat a handful of numpy calls on the node or two a cycle changes.
                ids = entry.ids
                for pos, local in zip(dirty.tolist(), np.asarray(local_ids).tolist(), strict=True):
                    fresh_id = PASSED if local < 0 else remap[local]
                    old_id = int(ids[pos])
                    if fresh_id != old_id:
                        entry.failing += (fresh_id >= 0) - (old_id >= 0)
                        ids[pos] = fresh_id
                        entry.changes += 1
            elif not local_statuses:
                # Every changed node passes (the usual case): no id table to build.
                if entry.failing:
                    entry.failing -= int(np.count_nonzero(entry.ids[dirty] >= 0))
                entry.ids[dirty] = PASSED
                entry.changes += 1
            else:
                # local id -1 maps to the appended PASSED slot
                table = np.array([*remap, PASSED], dtype=np.int32)
                fresh = table[np.where(local_ids < 0, len(local_statuses), local_ids)]
                entry.failing += int(np.count_nonzero(fresh >= 0)) - int(np.count_nonzero(entry.ids[dirty] >= 0))
                entry.ids[dirty] = fresh
                entry.changes += 1
        entry.version = snapshot.version
        return FilterAnswer(entry.ids, entry.statuses, entry.failing, (entry.serial, entry.changes))

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
        The result is a new array the caller may modify.
        """
        scores, _ = self.raw_scores_stamped(key, snapshot, compute)
        return scores[positions]

    def raw_scores_stamped(
        self, key: Hashable, snapshot: ClusterSnapshot, compute: Callable[[Positions], IntArray]
    ) -> tuple[IntArray, tuple[int, int]]:
        """The entry's raw scores over every position (read them, do not modify them) and a stamp that
        is equal for equal scores: (the entry's serial, its count of changes)."""
        entry = self._scores.get(key)
        if entry is None or entry.layout != snapshot.layout_version or len(entry.scores) != snapshot.capacity:
            entry = _lru_insert(
                self._scores, key, _ScoreEntry(snapshot.capacity, snapshot.layout_version), self._max_scores
            )
        else:
            self._scores.move_to_end(key)
        dirty = _dirty(snapshot, entry.version)
        if len(dirty):
            fresh = np.asarray(compute(dirty), dtype=np.int64)
            if entry.version < 0 or not np.array_equal(entry.scores[dirty], fresh):
                entry.scores[dirty] = fresh
                entry.changes += 1
        entry.version = snapshot.version
        return entry.scores, (entry.serial, entry.changes)

    def weighted_sums(
        self, key: Hashable, snapshot: ClusterSnapshot, positions: Positions, compute: SumCompute
    ) -> IntArray | None:
        """Cached weighted score sums for ``positions`` (a new array), recomputing only changed nodes;
        None when some node the entry holds had a raw score out of range (the caller then scores
        plugin by plugin, which reports it as it always did). An exception from ``compute``
        propagates; the entry then recomputes the same nodes next time."""
        entry = self._sums.get(key)
        if entry is None or entry.layout != snapshot.layout_version or len(entry.sums) != snapshot.capacity:
            entry = _lru_insert(
                self._sums, key, _SumEntry(snapshot.capacity, snapshot.layout_version), self._max_scores
            )
        else:
            self._sums.move_to_end(key)
            self.hits += 1
        dirty, gone = _changes(snapshot, entry.version)
        if gone is None:
            entry.invalid.fill(False)
            entry.invalid_count = 0
        elif len(gone):
            entry.invalid_count -= int(np.count_nonzero(entry.invalid[gone]))
            entry.invalid[gone] = False
        if len(dirty):
            sums, invalid = compute(dirty)
            entry.sums[dirty] = sums
            if invalid is None:
                if entry.invalid_count:
                    entry.invalid_count -= int(np.count_nonzero(entry.invalid[dirty]))
                    entry.invalid[dirty] = False
            elif len(dirty) <= FEW_NODES:
                flags = entry.invalid
                for pos, bad in zip(dirty.tolist(), np.asarray(invalid).tolist(), strict=True):
                    entry.invalid_count += bad - bool(flags[pos])
                    flags[pos] = bad
            else:
                entry.invalid_count += int(np.count_nonzero(invalid)) - int(np.count_nonzero(entry.invalid[dirty]))
                entry.invalid[dirty] = invalid
        entry.version = snapshot.version
        if entry.invalid_count:
            return None
        return entry.sums[positions]

    @property
    def filter_entries(self) -> int:
        """How many Filter entries the cache holds."""
        return len(self._filters)

    def clear(self) -> None:
        self._filters.clear()
        self._scores.clear()
        self._sums.clear()


def _lru_insert(entries: OrderedDict[Hashable, _Entry], key: Hashable, entry: _Entry, limit: int) -> _Entry:
    entries[key] = entry
    if len(entries) > limit:
        entries.popitem(last=False)
    return entry


def cacheable_signature(value: object) -> bool:
    """Whether a signature can key the cache: signatures built from plugin-replaced pods may hold plain
    dicts; those are simply not cached."""
    try:
        hash(value)
    except TypeError:
        return False
    return True
