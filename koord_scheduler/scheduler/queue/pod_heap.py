"""A min-heap of queued pods addressable by pod key: O(log n) push and pop, O(1) removal.

Removal is lazy: the index forgets the entry and pop skips entries the index no longer points to; the heap
is rebuilt once stale entries outnumber live ones, so memory stays within twice the live size.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from koord_scheduler.framework.types import QueuedPodInfo

Order = Callable[[QueuedPodInfo, int], tuple[Any, ...]]
"""(pod, arrival sequence number) -> a tuple whose ``<`` orders the heap. Entries with equal tuples come out
in arrival order. A flat tuple compares several times faster than a nested one, and heap pops are all
comparisons."""

_Entry = tuple[Any, ...]
"""``order + (seq, key, pod)``. The sequence number is unique, so comparing entries never reaches the key or
the pod."""

_COMPACT_MIN_STALE = 128
"""Stale entries tolerated before a rebuild is considered: a standby replica never pops, so removals are
its only way to shed the pods the leader bound."""


class PodHeap:
    """Queued pods ordered by ``order``, at most one per pod key."""

    __slots__ = ("_entries", "_index", "_order", "_stale")

    def __init__(self, order: Order) -> None:
        self._order = order
        self._entries: list[_Entry] = []
        self._index: dict[str, _Entry] = {}
        self._stale = 0

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        """Live pods in no particular order."""
        return (entry[-1] for entry in self._index.values())

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._index.get(key)
        return None if entry is None else entry[-1]

    def push(self, qpi: QueuedPodInfo, seq: int, key: str) -> None:
        """Add ``qpi`` (whose key is ``key``), replacing any pod with the same key. ``seq`` must be new."""
        if key in self._index:
            self.remove(key)
        entry = (*self._order(qpi, seq), seq, key, qpi)
        self._index[key] = entry
        heapq.heappush(self._entries, entry)

    def peek(self) -> QueuedPodInfo | None:
        entries, index = self._entries, self._index
        while entries:
            entry = entries[0]
            if index.get(entry[-2]) is entry:
                return entry[-1]  # type: ignore[no-any-return]
            heapq.heappop(entries)
            self._stale -= 1
        return None

    def pop(self) -> QueuedPodInfo | None:
        entries, index = self._entries, self._index
        while entries:
            entry = heapq.heappop(entries)
            key = entry[-2]
            if index.get(key) is entry:
                del index[key]
                return entry[-1]  # type: ignore[no-any-return]
            self._stale -= 1
        return None

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self._index.pop(key, None)
        if entry is None:
            return None
        self._stale += 1
        if self._stale > _COMPACT_MIN_STALE and self._stale > len(self._index):
            index = self._index
            self._entries = [e for e in self._entries if index.get(e[-2]) is e]
            heapq.heapify(self._entries)
            self._stale = 0
        return entry[-1]  # type: ignore[no-any-return]
