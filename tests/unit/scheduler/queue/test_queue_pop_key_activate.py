"""``pop_key`` (a plugin picks the next pod: Koordinator's NextPod) and ``activate`` (kube's Activate)."""

from __future__ import annotations

from queue_testing import FIT, key, make_harness, make_pod


def test_pop_key_takes_a_pod_from_any_sub_queue_and_starts_its_attempt() -> None:
    h = make_harness()
    for name in ("active", "unsched", "backoff"):
        h.queue.add(make_pod(name))
    for name, error in (("unsched", False), ("backoff", True)):
        qpi = h.queue.pop_key(key(name))
        assert qpi is not None
        qpi.unschedulable_plugins = frozenset({FIT})
        h.queue.add_unschedulable(qpi, error=error)
    assert (h.queue.pending_counts()["unschedulable"], h.queue.pending_counts()["backoff"]) == (1, 1)
    for name in ("unsched", "backoff"):
        qpi = h.queue.pop_key(key(name))
        assert qpi is not None and qpi.attempts == 2, "the attempt is counted"
        assert key(name) in h.queue, "in flight until done"
        assert h.queue.pop_key(key(name)) is None, "not queued while in flight"
        h.queue.done(key(name))
    assert h.pop_names() == ["active"]


def test_pop_key_leaves_a_pod_gated_by_pre_enqueue() -> None:
    h = make_harness()
    h.queue.add(make_pod("held", gates=("example.com/hold",)))
    assert h.queue.pop_key(key("held")) is None
    assert h.queue.pending_counts()["gated"] == 1
    assert h.queue.pop_key(key("nobody")) is None


def test_activate_moves_unschedulable_and_backoff_pods_to_active_now() -> None:
    h = make_harness(pop_from_backoff=False)
    for name in ("a", "b"):
        h.queue.add(make_pod(name))
    h.fail(unschedulable=frozenset({FIT}))  # a: unschedulable pool
    h.fail(error=True)  # b: error backoff
    assert h.queue.pop() is None
    h.queue.activate([key("a"), key("b"), key("unknown")])
    assert sorted(h.pop_names()) == ["a", "b"]


def test_activate_reruns_pre_enqueue_for_gated_pods() -> None:
    h = make_harness()
    h.queue.add(make_pod("held", gates=("example.com/hold",)))
    h.queue.activate([key("held")])
    assert h.queue.pending_counts()["gated"] == 1, "still gated: PreEnqueue still says no"
    assert h.queue.pop() is None
