"""A min-heap of queued pods addressable by pod key: O(log n) push and pop, O(1) removal.

Removal is lazy: the entry is blanked and skipped when it reaches the top; the heap is rebuilt once blanks
outnumber live entries, so memory stays within twice the live size.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from koord_scheduler.framework.types import QueuedPodInfo

Order = Callable[[QueuedPodInfo, int], Any]
"""(pod, arrival sequence number) -> a value whose ``<`` orders the heap. Including the sequence number makes
ties on the pod's own fields go first come, first served."""

_QPI = 2
_SEQ = 3
_COMPACT_MIN_STALE = 1024


class PodHeap:
    """Queued pods ordered by ``order``, at most one per pod key.

    Entries are ``[order_value, push_count, qpi | None, seq]`` lists; the push count is unique, so comparing
    entries never reaches the pod (or the blank left by a removal).
    """

    __slots__ = ("_entries", "_index", "_order", "_pushes", "_stale")

    def __init__(self, order: Order) -> None:
        self._order = order
        self._entries: list[list[Any]] = []
        self._index: dict[str, list[Any]] = {}
        self._stale = 0
        self._pushes = 0

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        """Live pods in no particular order."""
        return (entry[_QPI] for entry in self._index.values())

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._index.get(key)
        return None if entry is None else entry[_QPI]

    def push(self, qpi: QueuedPodInfo, seq: int) -> None:
        """Add ``qpi``, replacing any pod with the same key."""
        self.remove(qpi.key)
        self._pushes += 1
        entry = [self._order(qpi, seq), self._pushes, qpi, seq]
        self._index[qpi.key] = entry
        heapq.heappush(self._entries, entry)

    def peek(self) -> QueuedPodInfo | None:
        entries = self._entries
        while entries and entries[0][_QPI] is None:
            heapq.heappop(entries)
            self._stale -= 1
        return entries[0][_QPI] if entries else None

    def pop(self) -> QueuedPodInfo | None:
        entries = self._entries
        while entries:
            qpi: QueuedPodInfo | None = heapq.heappop(entries)[_QPI]
            if qpi is None:
                self._stale -= 1
                continue
            del self._index[qpi.key]
            return qpi
        return None

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self._index.pop(key, None)
        if entry is None:
            return None
        qpi: QueuedPodInfo = entry[_QPI]
        entry[_QPI] = None
        self._stale += 1
        if self._stale > _COMPACT_MIN_STALE and self._stale > len(self._index):
            self._entries = [e for e in self._entries if e[_QPI] is not None]
            heapq.heapify(self._entries)
            self._stale = 0
        return qpi

    def reorder(self, key: str) -> None:
        """Re-place the pod under ``key`` after a field its order uses changed; keeps its arrival rank."""
        entry = self._index.get(key)
        if entry is not None:
            qpi, seq = entry[_QPI], entry[_SEQ]
            self.push(qpi, seq)
