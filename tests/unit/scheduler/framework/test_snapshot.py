from __future__ import annotations

import numpy as np

from koord_scheduler.framework.snapshot import CPU_COL, MEMORY_COL, ClusterSnapshot
from tests.builders import make_node, make_pod

GI = 1024**3


def test_pods_are_accounted_in_the_node_row() -> None:
    snap = ClusterSnapshot()
    pos = snap.upsert_node(make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).build())
    snap.add_pod(make_pod("a").req(cpu="500m", memory="1Gi").node("n1").build())
    snap.add_pod(make_pod("b").node("n1").build())  # best effort: no requests, non-zero defaults
    assert snap.requested[pos, CPU_COL] == 500
    assert snap.requested[pos, MEMORY_COL] == GI
    assert snap.non_zero_requested[pos].tolist() == [600, GI + 200 * 1024 * 1024]
    assert snap.pod_count[pos] == 2
    assert snap.allocatable[pos, CPU_COL] == 4000 and snap.allowed_pods[pos] == 10


def test_removing_and_updating_pods_restores_the_row() -> None:
    snap = ClusterSnapshot()
    pos = snap.upsert_node(make_node("n1").capacity(cpu="4", memory="8Gi").build())
    small = make_pod("a").req(cpu="1").node("n1").build()
    big = make_pod("a").req(cpu="3").node("n1").build()
    snap.add_pod(small)
    snap.add_pod(big)  # same key: an update replaces the old accounting
    assert snap.requested[pos, CPU_COL] == 3000 and snap.pod_count[pos] == 1
    snap.remove_pod(big)
    assert snap.requested[pos].tolist() == [0] * len(snap.resource_names)
    assert snap.pod_count[pos] == 0


def test_new_resource_gets_a_column_for_every_node() -> None:
    snap = ClusterSnapshot()
    a = snap.upsert_node(make_node("a").capacity(cpu="4").build())
    b = snap.upsert_node(make_node("b").capacity({"nvidia.com/gpu": 2}, cpu="4").build())
    col = snap.column("nvidia.com/gpu")
    assert col is not None
    assert snap.allocatable[a, col] == 0 and snap.allocatable[b, col] == 2
    snap.add_pod(make_pod("p").req({"nvidia.com/gpu": 1}).node("b").build())
    assert snap.requested[b, col] == 1


def test_a_node_removed_with_pods_keeps_them_until_they_go() -> None:
    snap = ClusterSnapshot()
    snap.upsert_node(make_node("n1").capacity(cpu="4").build())
    pod = make_pod("a").req(cpu="1").node("n1").build()
    snap.add_pod(pod)
    snap.remove_node("n1")
    assert snap.num_nodes == 0 and len(snap.node_order()) == 0
    pos = snap.upsert_node(make_node("n1").capacity(cpu="8").build())  # comes back: same pods
    assert snap.requested[pos, CPU_COL] == 1000 and snap.pod_count[pos] == 1
    snap.remove_pod(pod)
    snap.remove_node("n1")
    assert snap.num_nodes == 0


def test_pod_on_unknown_node_is_accounted_when_the_node_appears() -> None:
    snap = ClusterSnapshot()
    snap.add_pod(make_pod("a").req(cpu="1").node("late").build())
    pos = snap.upsert_node(make_node("late").capacity(cpu="4").build())
    assert snap.requested[pos, CPU_COL] == 1000


def test_node_order_interleaves_zones_like_the_node_tree() -> None:
    snap = ClusterSnapshot()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")]:
        snap.upsert_node(make_node(name).label("topology.kubernetes.io/zone", zone).build())
    names = [snap.info(int(p)).name for p in snap.node_order()]
    assert names == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_capacity_grows_past_the_initial_size() -> None:
    snap = ClusterSnapshot(initial_capacity=2)
    for i in range(50):
        snap.upsert_node(make_node(f"n{i}").capacity(cpu="1").build())
    assert snap.num_nodes == 50 and snap.capacity >= 50
    assert int(np.sum(snap.allocatable[:, CPU_COL])) == 50_000


def test_generations_move_only_on_relevant_changes() -> None:
    snap = ClusterSnapshot()
    snap.upsert_node(make_node("n1").capacity(cpu="1").build())
    g = snap.nodes_generation
    snap.upsert_node(make_node("n1").capacity(cpu="2").build())
    assert snap.nodes_generation == g, "allocatable changes do not touch label/taint generation"
    snap.upsert_node(make_node("n1").capacity(cpu="2").label("x", "y").build())
    assert snap.nodes_generation == g + 1
    p = snap.pods_generation
    snap.add_pod(make_pod("a").node("n1").build())
    assert snap.pods_generation == p + 1


def test_node_order_and_generation_see_a_node_added_after_a_read() -> None:
    """Regression: a node added after node_order() was computed must appear in it."""
    snap = ClusterSnapshot()
    snap.upsert_node(make_node("a").build())
    assert len(snap.node_order()) == 1
    generation = snap.nodes_generation
    snap.upsert_node(make_node("b").build())
    assert [snap.info(int(p)).name for p in snap.node_order()] == ["a", "b"]
    assert snap.nodes_generation == generation + 1
    snap.remove_node("a")
    assert [snap.info(int(p)).name for p in snap.node_order()] == ["b"]


def test_a_node_returning_from_ghost_rejoins_the_order() -> None:
    snap = ClusterSnapshot()
    snap.upsert_node(make_node("a").build())
    snap.add_pod(make_pod("p").node("a").build())
    snap.remove_node("a")
    assert len(snap.node_order()) == 0
    snap.upsert_node(make_node("a").build())
    assert [snap.info(int(p)).name for p in snap.node_order()] == ["a"]


def test_changed_since_lists_touched_positions_and_gives_up_when_too_old() -> None:
    snap = ClusterSnapshot()
    a = snap.upsert_node(make_node("a").build())
    b = snap.upsert_node(make_node("b").build())
    mark = snap.version
    snap.add_pod(make_pod("p").node("b").build())
    snap.touch(a)
    changed = snap.changed_since(mark)
    assert changed is not None and sorted(changed.tolist()) == sorted([a, b])
    assert snap.changed_since(snap.version) is not None and len(snap.changed_since(snap.version)) == 0  # type: ignore[arg-type]
    for _ in range(70_000):
        snap.touch(a)
    assert snap.changed_since(mark) is None, "a version older than the log must force a full recheck"


def test_changes_since_splits_live_and_removed_nodes() -> None:
    snap = ClusterSnapshot()
    a = snap.upsert_node(make_node("a").build())
    b = snap.upsert_node(make_node("b").build())
    mark = snap.version
    snap.touch(a)
    snap.remove_node("b")
    split = snap.changes_since(mark)
    assert split is not None
    assert (split[0].tolist(), split[1].tolist()) == ([a], [b])
    assert snap.changes_since(mark) is split, "asked twice at one version: answered once"
    snap.touch(a)
    again = snap.changes_since(mark)
    assert again is not split and again is not None and again[0].tolist() == [a]


def test_changes_since_splits_a_short_log_and_a_long_one_alike() -> None:
    """Up to eight versions back the log is split directly; further back through ``changed_since``: the
    same live / removed sets either way, with repeats counted once, and read-only."""
    snap = ClusterSnapshot()
    pos = [snap.upsert_node(make_node(f"n{i}").build()) for i in range(12)]
    for touches in (3, 8, 9, 30):
        mark = snap.version
        for k in range(touches - 2):
            snap.touch(pos[k % 3])
        snap.remove_node(f"n{touches % 12}")
        snap.touch(pos[(touches + 1) % 12])
        assert snap.version - mark >= touches
        split = snap.changes_since(mark)
        changed = snap.changed_since(mark)
        assert split is not None and changed is not None
        expected_live = sorted(p for p in set(changed.tolist()) if snap.valid[p])
        expected_gone = sorted(p for p in set(changed.tolist()) if not snap.valid[p])
        assert sorted(split[0].tolist()) == expected_live
        assert sorted(split[1].tolist()) == expected_gone == [pos[touches % 12]]
        assert len(set(split[0].tolist())) == len(split[0])
        assert not split[0].flags.writeable and not split[1].flags.writeable
        assert split[0].dtype == np.intp and split[1].dtype == np.intp


def test_request_vector_is_shared_by_pods_with_equal_requests_and_read_only() -> None:
    snap = ClusterSnapshot()
    first = snap.request_vector(make_pod("p").req(cpu="1", memory="1Gi").build())
    second = snap.request_vector(make_pod("q").req(cpu="1", memory="1Gi").build())
    assert second is first
    assert not first.flags.writeable
    other = snap.request_vector(make_pod("r").req(cpu="2").build())
    assert other is not first and int(other[snap.resource_index["cpu"]]) == 2000
    wider = snap.request_vector(make_pod("s").req({"example.com/gpu": "1"}).build())
    assert len(wider) == len(snap.resource_names)
    assert len(snap.request_vector(make_pod("t").req(cpu="1", memory="1Gi").build())) == len(snap.resource_names)


def test_only_pod_change_since_names_the_one_position_and_none_otherwise() -> None:
    snap = ClusterSnapshot()
    for name in ("n1", "n2"):
        snap.upsert_node(make_node(name).build())
    start = snap.pods_generation
    assert snap.only_pod_change_since(start) is None  # no change yet
    snap.add_pod(make_pod("a").node("n2").build())
    assert snap.only_pod_change_since(start) == snap.positions["n2"]
    assert snap.only_pod_change_since(start) == snap.pods_changed_since(start)[0]  # type: ignore[index]
    snap.touch(snap.positions["n1"])  # a touch is no pod change
    assert snap.only_pod_change_since(start) == snap.positions["n2"]
    snap.add_pod(make_pod("b").node("n1").build())
    assert snap.only_pod_change_since(start) is None  # two changes
    assert snap.only_pod_change_since(start + 1) == snap.positions["n1"]
    assert snap.only_pod_change_since(-1) is None
