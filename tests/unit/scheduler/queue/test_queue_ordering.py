"""activeQ order, attempt bookkeeping, deletes and updates of queued pods, pending counts."""

from __future__ import annotations

import pytest
from queue_testing import AFFINITY, FIT, NODE_ADD, T0, Harness, counts, key, make_harness, make_pod


@pytest.mark.parametrize("use_sort_key", [pytest.param(True, id="sort-key"), pytest.param(False, id="less")])
def test_priority_order_then_fifo(use_sort_key: bool) -> None:
    h = make_harness(use_sort_key=use_sort_key)
    for name, priority in [("a", 0), ("b", 10), ("c", 0), ("d", 10), ("e", 5), ("f", 0)]:
        h.queue.add(make_pod(name, priority=priority))

    assert h.pop_names() == ["b", "d", "e", "a", "c", "f"]


@pytest.mark.parametrize("use_sort_key", [pytest.param(True, id="sort-key"), pytest.param(False, id="less")])
def test_earlier_timestamp_first_among_equal_priority(use_sort_key: bool) -> None:
    h = make_harness(use_sort_key=use_sort_key)
    h.queue.add(make_pod("first"))
    h.clock.advance(1)
    h.queue.add(make_pod("second"))
    h.fail(unschedulable=frozenset({FIT}))  # "first" fails and comes back with a newer timestamp
    h.queue.on_cluster_event(NODE_ADD, None, None)
    h.clock.advance(5)
    h.queue.flush()

    assert h.pop_names() == ["second", "first"]


def test_pop_counts_attempts_and_keeps_first_attempt_time() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    first = h.queue.pop()
    assert first is not None
    assert (first.attempts, first.initial_attempt_timestamp) == (1, T0)

    h.clock.advance(3)
    h.queue.add_unschedulable(first)  # no rejecting plugin: error backoff, 1 s
    assert first.timestamp == T0 + 3
    h.clock.advance(2)
    second = h.queue.pop()

    assert second is first
    assert (second.attempts, second.initial_attempt_timestamp) == (2, T0)


def test_pop_clears_the_previous_attempts_rejectors() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    h.fail(unschedulable=frozenset({AFFINITY}), pending=frozenset({FIT}))
    h.queue.on_cluster_event(NODE_ADD, None, None)
    qpi = h.queue.pop()

    assert qpi is not None
    assert (qpi.unschedulable_plugins, qpi.pending_plugins) == (frozenset(), frozenset())


def test_pop_on_empty_queue() -> None:
    h = make_harness()
    assert h.queue.pop() is None


def _put(h: Harness, where: str) -> None:
    """Leave pod "p" in ``where``."""
    pod = make_pod("p", gates=("wait",) if where == "gated" else ())
    h.queue.add(pod)
    if where in ("active", "gated"):
        return
    if where == "in-flight":
        assert h.queue.pop() is not None
    elif where == "unschedulable":
        h.fail(unschedulable=frozenset({FIT}))
    elif where == "backoff":
        h.fail(unschedulable=frozenset({FIT}), events=[(NODE_ADD, None)])
    elif where == "error-backoff":
        h.fail(error=True)


@pytest.mark.parametrize(
    ("where", "want_before"),
    [
        pytest.param("active", counts(active=1), id="active"),
        pytest.param("backoff", counts(backoff=1), id="backoff"),
        pytest.param("error-backoff", counts(backoff=1), id="error-backoff"),
        pytest.param("unschedulable", counts(unschedulable=1), id="unschedulable"),
        pytest.param("gated", counts(gated=1), id="gated"),
        pytest.param("in-flight", counts(), id="in-flight"),
    ],
)
def test_delete_removes_from_every_sub_queue(where: str, want_before: dict[str, int]) -> None:
    h = make_harness()
    _put(h, where)
    assert (h.queue.pending_counts(), key("p") in h.queue) == (want_before, True)

    h.queue.delete(make_pod("p"))
    h.clock.advance(400)
    h.queue.flush()

    assert (h.queue.pending_counts(), key("p") in h.queue, h.queue.pop()) == (counts(), False, None)


def test_failed_attempt_of_pod_deleted_in_flight_is_dropped() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.queue.pop()
    assert qpi is not None
    h.queue.delete(make_pod("p"))

    h.queue.add_unschedulable(qpi)

    assert (h.queue.pending_counts(), key("p") in h.queue) == (counts(), False)


def test_stale_delete_of_an_older_pod_with_the_same_name_is_ignored() -> None:
    h = make_harness()
    h.queue.add(make_pod("p", uid="new"))
    h.queue.delete(make_pod("p", uid="old"))

    assert h.queue.pending_counts() == counts(active=1)


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("active", id="active"),
        pytest.param("backoff", id="backoff"),
        pytest.param("unschedulable", id="unschedulable"),
        pytest.param("gated", id="gated"),
    ],
)
def test_update_that_sets_node_name_removes_the_pod(where: str) -> None:
    h = make_harness()
    _put(h, where)

    h.queue.update(make_pod("p"), make_pod("p", node="n1"))

    assert (h.queue.pending_counts(), key("p") in h.queue) == (counts(), False)


def test_failed_attempt_of_pod_bound_in_flight_is_dropped() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.queue.pop()
    assert qpi is not None
    h.queue.update(make_pod("p"), make_pod("p", node="n1"))

    h.queue.add_unschedulable(qpi)

    assert h.queue.pending_counts() == counts()


def test_update_in_active_queue_reorders() -> None:
    h = make_harness()
    h.queue.add(make_pod("a"))
    h.queue.add(make_pod("b"))

    h.queue.update(make_pod("b"), make_pod("b", priority=100))

    assert h.pop_names() == ["b", "a"]


def test_update_of_unknown_pod_adds_it() -> None:
    h = make_harness()
    h.queue.update(make_pod("p"), make_pod("p"))

    assert (h.queue.pending_counts(), h.incoming) == (counts(active=1), [("active", "UnscheduledPodUpdate")])


def test_update_of_in_flight_pod_keeps_the_newest_version() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.queue.pop()
    assert qpi is not None
    newer = make_pod("p", labels={"v": "2"})
    h.queue.update(make_pod("p"), newer)
    assert h.queue.pending_counts() == counts()  # not queued twice

    qpi.unschedulable_plugins = frozenset({FIT})
    h.queue.add_unschedulable(qpi)

    assert qpi.pod is newer


def test_add_of_a_known_pod_is_an_update() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    h.queue.add(make_pod("p", labels={"v": "2"}))

    qpi = h.queue.pop()
    assert qpi is not None
    assert (qpi.pod.labels, h.queue.pending_counts()) == ({"v": "2"}, counts())


def test_add_ignores_assigned_pods() -> None:
    h = make_harness()
    h.queue.add(make_pod("p", node="n1"))

    assert h.queue.pending_counts() == counts()


def test_pending_counts_one_in_each() -> None:
    h = make_harness()
    h.queue.add(make_pod("u"))
    h.fail(unschedulable=frozenset({AFFINITY}))
    h.queue.add(make_pod("b"))
    h.fail(unschedulable=frozenset({FIT}), events=[(NODE_ADD, "irrelevant")])  # helps Fit, not Affinity
    h.queue.add(make_pod("g", gates=("wait",)))
    h.queue.add(make_pod("a"))

    assert h.queue.pending_counts() == counts(active=1, backoff=1, unschedulable=1, gated=1)


def test_done_is_idempotent_and_ends_in_flight() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.queue.pop()
    assert qpi is not None
    assert key("p") in h.queue

    h.queue.done(qpi.key)
    h.queue.done(qpi.key)

    assert key("p") not in h.queue
