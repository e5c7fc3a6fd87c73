"""PrioritySort (kube-scheduler ``queuesort/priority_sort.go``).

``less(a, b)``: higher ``spec.priority`` first; equal priorities pop in the order they were (re)added to
the queue. A pod without a priority has priority 0 (the parser already defaults it).
"""

from __future__ import annotations

from koord_scheduler.framework.fast_paths import QueueSortKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import QueueSortPlugin
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


def new(args: None, handle: Handle) -> PrioritySort:
    return PrioritySort()


def declared_capabilities(plugin: PrioritySort) -> tuple[QueueSortPlugin, QueueSortKey]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin
