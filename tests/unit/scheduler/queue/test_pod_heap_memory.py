"""The queue's heap sheds removed pods without being popped (a standby replica never pops)."""

from __future__ import annotations

from queue_testing import make_pod

from koord_scheduler.framework.types import QueuedPodInfo
from koord_scheduler.scheduler.queue.pod_heap import PodHeap


def test_removed_entries_are_shed_without_pops() -> None:
    heap = PodHeap(lambda qpi, seq: (seq,))
    live: list[str] = []
    most = 0
    for seq in range(5000):
        pod = make_pod(f"p{seq}")
        heap.push(QueuedPodInfo(pod, timestamp=0.0), seq, pod.key)
        live.append(pod.key)
        if len(live) > 20:  # churn: twenty pending at a time, the rest bound by someone else
            heap.remove(live.pop(0))
        most = max(most, len(heap._entries))
    assert len(heap) == 20
    assert most <= 2 * 20 + 130, most  # live + at most the tolerated stale entries, never the 5,000 pushed
    assert sorted(q.pod.key for q in heap) == sorted(live)
    assert [heap.pop() is not None for _ in range(20)] == [True] * 20
    assert heap.pop() is None
