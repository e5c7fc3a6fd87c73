"""Scheduling-queue throughput: add + pop of many pods, and the cost of a cluster event over a full pool.

Pods get 10 priorities; activeQ is ordered by PrioritySort's key ``(-priority, timestamp)``. Prints
milliseconds for adding N pods, popping them all (with ``done``), and the same with the ``less``-function
fallback; then, with N pods in the unschedulable pool, one matching and one non-matching node event.

    .venv/bin/python bench/queue_ops.py [--pods 10000]
"""

from __future__ import annotations

import argparse
import heapq
import time

from apis.core.types import ObjectMeta, Pod
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueuedPodInfo,
)
from koord_scheduler.scheduler.queue import QueueOptions, SchedulingQueue

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
SUCCESS = Status()


def _less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    return a.pod.priority > b.pod.priority or (a.pod.priority == b.pod.priority and a.timestamp < b.timestamp)


def _key(qpi: QueuedPodInfo) -> tuple[int, float]:
    return (-qpi.pod.priority, qpi.timestamp)


def _queue(*, use_key: bool) -> tuple[SchedulingQueue, list[float]]:
    clock = [1_700_000_000.0]
    queue = SchedulingQueue(
        less=_less,
        pre_enqueue=lambda pod: SUCCESS,
        plugin_events={"NodeResourcesFit": [ClusterEventWithHint(NODE_ADD)]},
        clock=lambda: clock[0],
        options=QueueOptions(sort_key=_key if use_key else None),
    )
    return queue, clock


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def add_pop(pods: list[Pod], *, use_key: bool) -> tuple[float, float]:
    queue, _ = _queue(use_key=use_key)
    start = time.perf_counter()
    for pod in pods:
        queue.add(pod)
    added = _ms(start)
    start = time.perf_counter()
    while (qpi := queue.pop()) is not None:
        queue.done(qpi.key)
    return added, _ms(start)


def raw_heapq(n: int) -> float:
    """The floor: heappush + heappop of n flat tuples, to put the queue's figures in this machine's terms."""
    start = time.perf_counter()
    entries: list[tuple[int, float, int]] = []
    for i in range(n):
        heapq.heappush(entries, (-(i % 10), 1.0, i))
    while entries:
        heapq.heappop(entries)
    return _ms(start)


def event_over_pool(pods: list[Pod]) -> tuple[float, float]:
    queue, clock = _queue(use_key=True)
    for pod in pods:
        queue.add(pod)
    while (qpi := queue.pop()) is not None:
        qpi.unschedulable_plugins = frozenset({"NodeResourcesFit"})
        queue.add_unschedulable(qpi)
    start = time.perf_counter()
    queue.on_cluster_event(NODE_TAINT, None, None)
    unmatched = _ms(start)
    clock[0] += 20
    start = time.perf_counter()
    queue.on_cluster_event(NODE_ADD, None, None)
    return unmatched, _ms(start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=10_000)
    args = parser.parse_args()
    pods = [
        Pod(meta=ObjectMeta(name=f"p{i}", namespace="default", uid=f"u{i}"), priority=i % 10) for i in range(args.pods)
    ]
    best: dict[str, float] = {}
    for _ in range(5):
        for use_key, label in ((True, "sort_key"), (False, "less")):
            added, popped = add_pop(pods, use_key=use_key)
            for name, value in ((f"add ({label})", added), (f"pop+done ({label})", popped)):
                best[name] = min(best.get(name, float("inf")), value)
        best["raw heapq push+pop (floor)"] = min(
            best.get("raw heapq push+pop (floor)", float("inf")), raw_heapq(args.pods)
        )
        unmatched, matched = event_over_pool(pods)
        for name, value in (("event, no match, full pool", unmatched), ("event, all move, full pool", matched)):
            best[name] = min(best.get(name, float("inf")), value)
    print(f"{args.pods} pods, best of 5 (ms)")
    for name, value in best.items():
        print(f"  {name:32s} {value:8.2f}")
    total = best["add (sort_key)"] + best["pop+done (sort_key)"]
    print(f"  {'add + pop (sort_key) total':32s} {total:8.2f}")


if __name__ == "__main__":
    main()
