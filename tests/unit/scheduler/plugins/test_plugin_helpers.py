"""DefaultNormalizeScore (kube-scheduler pkg/scheduler/framework/plugins/helper/normalize_score.go; hand-computed
rows) and SnapshotCache."""

from __future__ import annotations

import numpy as np
import pytest

from apis.core.types import Node, ObjectMeta
from koord_scheduler.plugins.helpers import SnapshotCache, default_normalize_score, live_nodes
from tests.fwtest import make_snapshot


@pytest.mark.parametrize(
    ("max_priority", "reverse", "scores", "want"),
    [
        pytest.param(100, True, [0, 1, 2], [100, 50, 0], id="row8-taint-counts-0-1-2"),
        pytest.param(100, True, [0, 1, 3], [100, 67, 0], id="row9-taint-counts-0-1-3-truncates"),
        pytest.param(100, True, [0, 0], [100, 100], id="row10-all-zero-reverse-is-max"),
        pytest.param(100, False, [0, 0], [0, 0], id="all-zero-forward-left-alone"),
        pytest.param(100, False, [1, 2, 3], [33, 66, 100], id="forward-truncates"),
        pytest.param(100, False, [5], [100], id="single"),
        pytest.param(100, False, [], [], id="empty"),
        pytest.param(10, False, [-3, 6], [-5, 10], id="negative-truncates-toward-zero"),
        pytest.param(100, True, [-1, -2], [100, 100], id="max-clamped-at-zero"),
    ],
)
def test_default_normalize_score(max_priority: int, reverse: bool, scores: list[int], want: list[int]) -> None:
    arr = np.array(scores, dtype=np.int64)
    default_normalize_score(max_priority, reverse, arr)
    assert arr.tolist() == want
    assert arr.dtype == np.int64


def test_row8_weighted() -> None:
    arr = np.array([0, 1, 2], dtype=np.int64)
    default_normalize_score(100, True, arr)
    assert (arr * 3).tolist() == [300, 150, 0]


def node(name: str, **labels: str) -> Node:
    from apis.core.frozendict import FrozenDict

    return Node(ObjectMeta(name, labels=FrozenDict(labels)))


def test_snapshot_cache_invalidates_on_generation_and_snapshot() -> None:
    snap = make_snapshot([node("a")])
    cache: SnapshotCache[str, int] = SnapshotCache(max_entries=2)
    calls: list[str] = []

    def compute(tag: str) -> int:
        calls.append(tag)
        return len(calls)

    assert cache.get(snap, "k", lambda: compute("first")) == 1
    assert cache.get(snap, "k", lambda: compute("again")) == 1
    snap.upsert_node(node("a", zone="z1"))
    assert cache.get(snap, "k", lambda: compute("after-label-change")) == 2
    other = make_snapshot([node("a")])
    assert cache.get(other, "k", lambda: compute("other-snapshot")) == 3
    assert calls == ["first", "after-label-change", "other-snapshot"]


def test_snapshot_cache_is_bounded_lru() -> None:
    snap = make_snapshot([])
    cache: SnapshotCache[str, str] = SnapshotCache(max_entries=2)
    cache.get(snap, "a", lambda: "a")
    cache.get(snap, "b", lambda: "b")
    cache.get(snap, "a", lambda: "a2")  # touch: b is now least recent
    cache.get(snap, "c", lambda: "c")
    got = (len(cache), cache.get(snap, "a", lambda: "new"), cache.get(snap, "b", lambda: "b-recomputed"))
    assert got == (2, "a", "b-recomputed")


def test_live_nodes_skips_removed() -> None:
    snap = make_snapshot([node("a"), node("b")])
    snap.remove_node("a")
    assert [n.name for _, n in live_nodes(snap)] == ["b"]
