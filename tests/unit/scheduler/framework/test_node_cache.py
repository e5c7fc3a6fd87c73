"""NodeResultCache bookkeeping: the Filter entry's failure count stays exact as nodes come and go."""

from __future__ import annotations

import numpy as np

from koord_scheduler.framework.node_cache import PASSED, UNKNOWN, FilterCompute, NodeResultCache
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Status, unschedulable
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot

FULL = unschedulable("node is full")


def failing_names(snap: ClusterSnapshot, names: set[str]) -> tuple[FilterCompute, list[list[str]]]:
    """A Filter chain stand-in: nodes named in ``names`` fail with FULL; records what it was asked."""
    asked: list[list[str]] = []

    def compute(dirty: Positions) -> tuple[np.ndarray, list[Status]]:
        asked.append(sorted(snap.info(p).name for p in dirty.tolist()))
        ids = np.array([0 if snap.info(p).name in names else -1 for p in dirty.tolist()], dtype=np.int32)
        return ids, [FULL]

    return compute, asked


def test_failing_count_follows_changes_removals_and_returns() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(4)])
    cache = NodeResultCache()
    full = {"n1", "n2"}
    compute, asked = failing_names(snap, full)

    ids, statuses, failing, _ = cache.filter_ids("k", snap, compute)
    assert (failing, statuses) == (2, [FULL])
    assert ids[snap.positions["n1"]] == 0 and ids[snap.positions["n0"]] == PASSED

    full.discard("n1")
    snap.add_pod(make_pod("p").node("n1").build())
    _, _, failing, _ = cache.filter_ids("k", snap, compute)
    assert (failing, asked[-1]) == (1, ["n1"])

    gone = snap.positions["n2"]
    snap.remove_node("n2")
    ids, _, failing, _ = cache.filter_ids("k", snap, compute)
    assert failing == 0, "a removed node's failure must not count"
    assert ids[gone] == UNKNOWN

    full.add("n2")
    snap.upsert_node(make_node("n2").build())
    _, _, failing, _ = cache.filter_ids("k", snap, compute)
    assert (failing, asked[-1]) == (1, ["n2"])


def test_a_change_log_overflow_recomputes_everything_and_recounts() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(3)])
    cache = NodeResultCache()
    compute, asked = failing_names(snap, {"n0", "n1"})
    cache.filter_ids("k", snap, compute)
    snap.remove_node("n1")
    for _ in range(70_000):
        snap.touch(snap.positions["n0"])
    _, _, failing, _ = cache.filter_ids("k", snap, compute)
    assert (failing, asked[-1]) == (1, ["n0", "n2"])


def test_the_stamp_moves_only_when_an_answer_changes() -> None:
    snap = make_snapshot([make_node(f"n{i}").build() for i in range(3)])
    cache = NodeResultCache()
    full = {"n1"}
    compute, asked = failing_names(snap, full)
    first = cache.filter_ids("k", snap, compute).stamp

    snap.add_pod(make_pod("p").node("n0").build())  # n0 recomputed, still passes
    same = cache.filter_ids("k", snap, compute)
    assert asked[-1] == ["n0"]
    assert same.stamp == first, "a recomputed node with the same answer keeps the stamp"

    full.add("n0")
    snap.add_pod(make_pod("q").node("n0").build())  # n0 now fails
    moved = cache.filter_ids("k", snap, compute)
    assert moved.stamp != first
    assert moved.failing == 2

    other = cache.filter_ids("other", snap, compute)
    assert other.stamp[0] != moved.stamp[0], "entries of different keys never share a stamp"
