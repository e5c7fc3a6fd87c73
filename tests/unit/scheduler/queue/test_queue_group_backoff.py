"""Pods a NextPod hook picks (``pop_key``) join the round of the pod ``pop`` took: they back off as a group,
and pop-from-backoff never cuts a group's backoff short. ``locations`` lists where each pod is."""

from __future__ import annotations

from queue_testing import FIT, NODE_ADD, Harness, counts, key, make_harness, make_pod

from koord_scheduler.framework.types import QueuedPodInfo
from koord_scheduler.scheduler.queue import ACTIVE, BACKOFF, IN_FLIGHT, UNSCHEDULABLE


def fail_with_event(h: Harness, qpi: QueuedPodInfo) -> None:
    """Requeue ``qpi`` rejected by NodeResourcesFit; with a node added while it was tried it goes to
    backoff, else to the unschedulable pool."""
    qpi.unschedulable_plugins = frozenset({FIT})
    h.queue.add_unschedulable(qpi)


def test_a_round_shares_its_attempts_and_waits_out_its_backoff_while_a_plain_pod_does_not() -> None:
    h = make_harness()  # pop-from-backoff on
    for name in ("lead", "m1", "m2"):
        h.queue.add(make_pod(name))
    h.clock.advance(0.5)
    lead = h.queue.pop()
    assert lead is not None and lead.key == key("lead")
    m1, m2 = h.queue.pop_key(key("m1")), h.queue.pop_key(key("m2"))
    assert m1 is not None and m2 is not None
    assert (lead.group_backoff, m1.group_backoff, m2.group_backoff) == (True, True, True)
    h.queue.on_cluster_event(NODE_ADD, None, None)
    for qpi in (lead, m1, m2):
        fail_with_event(h, qpi)
    assert {lead.backoff_expiry, m1.backoff_expiry, m2.backoff_expiry} == {lead.backoff_expiry}
    assert h.queue.pending_counts() == counts(backoff=3)
    assert h.queue.pop() is None, "a group's backoff is not cut short when activeQ is empty"

    h.queue.add(make_pod("plain"))
    plain = h.queue.pop()
    assert plain is not None and not plain.group_backoff
    h.queue.on_cluster_event(NODE_ADD, None, None)
    fail_with_event(h, plain)
    again = h.queue.pop()
    assert again is not None and again.key == key("plain"), "a plain pod's backoff is (KEP-5142)"
    h.queue.done(again.key)

    h.clock.advance(2.0)
    h.queue.flush()
    assert sorted(h.pop_names()) == ["lead", "m1", "m2"]


def test_members_take_the_larger_attempt_count() -> None:
    h = make_harness()
    for name in ("old", "new"):
        h.queue.add(make_pod(name))
    old = h.queue.pop_key(key("old"))
    assert old is not None
    for _ in range(3):  # "old" fails three times on its own
        fail_with_event(h, old)
        old = h.queue.pop_key(key("old"))
        assert old is not None
    fail_with_event(h, old)
    new = h.queue.pop()
    assert new is not None and new.key == key("new") and new.attempts == 1
    member = h.queue.pop_key(key("old"))
    assert member is not None
    assert (new.attempts, member.attempts) == (5, 5)


def test_end_backoff_early_ends_the_first_group_backoff_and_leaves_errors() -> None:
    h = make_harness()
    for name in ("a", "a1", "b", "b1", "err"):
        h.queue.add(make_pod(name))
    first = h.queue.pop()
    assert first is not None and first.key == key("a")
    member = h.queue.pop_key(key("a1"))
    assert member is not None
    h.queue.on_cluster_event(NODE_ADD, None, None)
    for qpi in (first, member):
        fail_with_event(h, qpi)
    h.clock.advance(0.85)  # a's group still backs off (until the next whole second), b's will end a second later
    second = h.queue.pop()
    assert second is not None and second.key == key("b")
    member = h.queue.pop_key(key("b1"))
    assert member is not None
    h.queue.on_cluster_event(NODE_ADD, None, None)
    for qpi in (second, member):
        fail_with_event(h, qpi)
    error = h.queue.pop()
    assert error is not None and error.key == key("err")
    h.queue.add_unschedulable(error, error=True)

    assert h.queue.end_backoff_early()
    assert sorted(h.pop_names()) == ["a", "a1"], "the group whose backoff ends first"
    assert h.queue.end_backoff_early()
    assert sorted(h.pop_names()) == ["b", "b1"]
    assert not h.queue.end_backoff_early(), "a pod that failed with an error is not a group"
    assert h.queue.pending_counts() == counts(backoff=1)


def test_locations_name_each_pod_once() -> None:
    h = make_harness()
    for name in ("active", "flying", "unsched", "backing"):
        h.queue.add(make_pod(name))
    for name, event in (("backing", True), ("unsched", False)):
        qpi = h.queue.pop_key(key(name))
        assert qpi is not None
        if event:
            h.queue.on_cluster_event(NODE_ADD, None, None)
        qpi.unschedulable_plugins = frozenset({FIT})
        h.queue.add_unschedulable(qpi)
    assert h.queue.pop_key(key("flying")) is not None
    h.queue.add(make_pod("gated", gates=("example.com/hold",)))
    h.queue.add(make_pod("deleted"))
    gone = h.queue.pop_key(key("deleted"))
    assert gone is not None
    h.queue.delete(gone.pod)
    assert h.queue.locations() == {
        key("active"): [ACTIVE],
        key("backing"): [BACKOFF],
        key("unsched"): [UNSCHEDULABLE],
        key("gated"): ["gated"],
        key("flying"): [IN_FLIGHT],
    }
