"""PrioritySort (kube-scheduler ``queuesort/priority_sort.go``).

``less(a, b)``: higher ``spec.priority`` first; equal priorities pop in the order they were (re)added to
the queue. A pod without a priority has priority 0 (the parser already defaults it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koord_scheduler.framework.handle import FrameworkHandle
from koord_scheduler.framework.interfaces import QueueSortKey, QueueSortPlugin
from koord_scheduler.framework.types import QueuedPodInfo
from koord_scheduler.plugins import names

NAME = names.PRIORITY_SORT
ARGS = None


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float]:
        """The same order as :meth:`less` as a heap key (the queue uses it instead of ``less``)."""
        return (-qpi.pod.priority, qpi.timestamp)


def new(args: Any, handle: FrameworkHandle) -> PrioritySort:
    return PrioritySort()


if TYPE_CHECKING:
    _queue_sort: type[QueueSortPlugin] = PrioritySort
    _sort_key: type[QueueSortKey] = PrioritySort
