"""Where failed and gated pods go, and what brings them back: hints, in-flight events, backoff, flushes."""

from __future__ import annotations

import pytest
from queue_testing import (
    AFFINITY,
    EVERYTHING,
    FIT,
    GATES,
    NODE_ADD,
    NODE_LABEL,
    NODE_TAINT,
    SILENT,
    T0,
    FakeClock,
    counts,
    default_plugin_events,
    key,
    make_harness,
    make_pod,
    priority_less,
)

from apis.core.types import Pod
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import ClusterEvent, ClusterEventWithHint, QueueingHint
from koord_scheduler.scheduler.queue import SchedulingQueue

_NONE: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("unschedulable", "pending", "event", "new", "want"),
    [
        pytest.param({FIT}, _NONE, NODE_ADD, None, counts(backoff=1), id="matching-event-no-hint-queues"),
        pytest.param({FIT}, _NONE, NODE_TAINT, None, counts(unschedulable=1), id="non-matching-event-keeps"),
        pytest.param({FIT}, _NONE, NODE_LABEL, None, counts(unschedulable=1), id="event-of-another-plugin-keeps"),
        pytest.param({AFFINITY}, _NONE, NODE_LABEL, "relevant", counts(backoff=1), id="hint-queue-moves"),
        pytest.param({AFFINITY}, _NONE, NODE_LABEL, "irrelevant", counts(unschedulable=1), id="hint-skip-keeps"),
        pytest.param({AFFINITY}, _NONE, NODE_LABEL, "boom", counts(backoff=1), id="failing-hint-queues"),
        pytest.param(
            {FIT, AFFINITY},
            _NONE,
            NODE_ADD,
            "irrelevant",
            counts(backoff=1),
            id="any-rejector-saying-queue-moves",
        ),
        pytest.param({SILENT}, _NONE, NODE_TAINT, None, counts(backoff=1), id="plugin-without-events-gets-every-event"),
        pytest.param(
            {"NotRegistered"},
            _NONE,
            NODE_TAINT,
            None,
            counts(backoff=1),
            id="unknown-plugin-gets-every-event",
        ),
        pytest.param(
            {AFFINITY},
            _NONE,
            EVERYTHING,
            "irrelevant",
            counts(backoff=1),
            id="wildcard-event-moves-regardless-of-hints",
        ),
        pytest.param(_NONE, {FIT}, NODE_ADD, None, counts(active=1), id="pending-plugin-queue-skips-backoff"),
        pytest.param(
            {AFFINITY},
            {FIT},
            NODE_LABEL,
            "relevant",
            counts(backoff=1),
            id="pending-plugin-silent-unschedulable-plugin-backs-off",
        ),
    ],
)
def test_cluster_event_moves_unschedulable_pod(
    unschedulable: set[str], pending: frozenset[str], event: ClusterEvent, new: object, want: dict[str, int]
) -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    h.fail(unschedulable=frozenset(unschedulable), pending=pending)
    assert h.queue.pending_counts() == counts(unschedulable=1)

    h.queue.on_cluster_event(event, None, new)

    assert h.queue.pending_counts() == want


def test_cluster_event_after_backoff_ended_goes_active() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    h.fail(unschedulable=frozenset({FIT}))
    h.clock.advance(2)

    h.queue.on_cluster_event(NODE_ADD, None, None)

    assert h.queue.pending_counts() == counts(active=1)


@pytest.mark.parametrize(
    ("unschedulable", "pending", "events", "want"),
    [
        pytest.param({FIT}, _NONE, [(NODE_ADD, None)], counts(backoff=1), id="helpful-event-in-flight-backs-off"),
        pytest.param({FIT}, _NONE, [(NODE_TAINT, None)], counts(unschedulable=1), id="unrelated-event-in-flight"),
        pytest.param(
            {AFFINITY}, _NONE, [(NODE_LABEL, "irrelevant")], counts(unschedulable=1), id="hint-skip-in-flight"
        ),
        pytest.param(
            {AFFINITY},
            _NONE,
            [(NODE_LABEL, "irrelevant"), (NODE_LABEL, "relevant")],
            counts(backoff=1),
            id="any-event-in-flight-counts",
        ),
        pytest.param(_NONE, {FIT}, [(NODE_ADD, None)], counts(active=1), id="pending-plugin-in-flight-goes-active"),
        pytest.param({FIT}, _NONE, [], counts(unschedulable=1), id="no-event-in-flight"),
    ],
)
def test_events_during_the_attempt_are_replayed(
    unschedulable: set[str],
    pending: frozenset[str],
    events: list[tuple[ClusterEvent, object]],
    want: dict[str, int],
) -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))

    h.fail(unschedulable=frozenset(unschedulable), pending=pending, events=events)

    assert h.queue.pending_counts() == want


def test_events_before_the_attempt_do_not_count() -> None:
    h = make_harness()
    h.queue.add(make_pod("other"))
    h.queue.add(make_pod("p"))
    other = h.queue.pop()
    assert other is not None
    h.queue.on_cluster_event(NODE_ADD, None, None)  # while "other" is in flight, before "p" is popped

    h.fail(unschedulable=frozenset({FIT}))

    assert h.queue.pending_counts() == counts(unschedulable=1)


def test_events_seen_by_a_long_attempt_survive_a_short_one() -> None:
    h = make_harness()
    h.queue.add(make_pod("long"))
    h.queue.add(make_pod("short"))
    long_attempt = h.queue.pop()
    assert long_attempt is not None
    h.queue.on_cluster_event(NODE_ADD, None, None)
    short_attempt = h.queue.pop()
    assert short_attempt is not None
    h.queue.done(short_attempt.key)

    long_attempt.unschedulable_plugins = frozenset({FIT})
    h.queue.add_unschedulable(long_attempt)

    assert h.queue.pending_counts() == counts(backoff=1)


def test_pod_never_popped_is_requeued_after_backoff() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.queue.pop()
    assert qpi is not None
    h.queue.done(qpi.key)  # done before add_unschedulable: the in-flight events are gone
    qpi.unschedulable_plugins = frozenset({FIT})

    h.queue.add_unschedulable(qpi)

    assert h.queue.pending_counts() == counts(backoff=1)


@pytest.mark.parametrize(
    ("error", "unschedulable"),
    [
        pytest.param(True, frozenset(), id="error-status"),
        pytest.param(False, frozenset(), id="no-rejecting-plugin-is-an-error"),
        pytest.param(True, frozenset({FIT}), id="error-flag-wins"),
    ],
)
def test_error_goes_to_error_backoff_which_pop_from_backoff_skips(error: bool, unschedulable: frozenset[str]) -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.fail(unschedulable=unschedulable, error=error)
    assert (qpi.error_backoff, h.queue.pending_counts(), h.queue.pop()) == (True, counts(backoff=1), None)

    h.clock.advance(1.75)  # T0 + 1 truncates to T0 - 0.25 + 1; released at the next whole second
    h.queue.flush()

    assert (h.queue.pending_counts(), h.incoming[-1]) == (counts(active=1), ("active", "BackoffComplete"))


@pytest.mark.parametrize(
    ("pop_from_backoff", "advance", "want_popped"),
    [
        pytest.param(True, 0, True, id="on-pops-before-expiry"),
        pytest.param(False, 0, False, id="off-waits"),
        pytest.param(False, 1.0, False, id="off-waits-through-expiry-instant"),
        pytest.param(False, 1.01, True, id="off-pops-after-expiry"),
    ],
)
def test_pop_from_backoff_when_active_is_empty(pop_from_backoff: bool, advance: float, want_popped: bool) -> None:
    h = make_harness(pop_from_backoff=pop_from_backoff)
    h.queue.add(make_pod("p"))
    h.fail(unschedulable=frozenset({FIT}), events=[(NODE_ADD, None)])
    h.clock.advance(advance)

    popped = h.queue.pop()

    assert (popped is not None) == want_popped


def test_pop_from_backoff_prefers_active() -> None:
    h = make_harness()
    h.queue.add(make_pod("backing-off", priority=100))
    h.fail(unschedulable=frozenset({FIT}), events=[(NODE_ADD, None)])
    h.queue.add(make_pod("ready"))

    assert h.pop_names() == ["ready", "backing-off"]


@pytest.mark.parametrize(
    ("attempts", "want_released_after"),
    [
        pytest.param(1, 1.75, id="1s"),
        pytest.param(2, 2.75, id="2s"),
        pytest.param(3, 4.75, id="4s"),
        pytest.param(4, 8.75, id="8s"),
        pytest.param(5, 10.75, id="10s-cap"),
        pytest.param(6, 10.75, id="10s-cap-again"),
    ],
)
def test_backoff_flush_releases_on_the_whole_second(attempts: int, want_released_after: float) -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    qpi = h.queue.pop()
    assert qpi is not None
    qpi.attempts = attempts
    qpi.unschedulable_plugins = frozenset({FIT})
    h.queue.on_cluster_event(NODE_ADD, None, None)
    h.queue.add_unschedulable(qpi)

    h.clock.now = T0 + want_released_after - 0.01
    h.queue.flush()
    before = h.queue.pending_counts()
    h.clock.now = T0 + want_released_after
    h.queue.flush()

    assert (before, h.queue.pending_counts()) == (counts(backoff=1), counts(active=1))


def test_unschedulable_pods_flushed_after_five_minutes() -> None:
    h = make_harness()
    h.queue.add(make_pod("old"))
    h.fail(unschedulable=frozenset({FIT}))
    h.clock.advance(100)
    h.queue.add(make_pod("young"))
    h.fail(unschedulable=frozenset({FIT}))

    h.clock.advance(200)  # "old" has waited exactly 300 s: not more than the limit
    h.queue.flush()
    at_limit = h.queue.pending_counts()
    h.clock.advance(0.5)
    h.queue.flush()

    assert (at_limit, h.queue.pending_counts()) == (
        counts(unschedulable=2),
        counts(active=1, unschedulable=1),
    )
    assert h.incoming[-1] == ("active", "UnschedulableTimeout")
    assert h.pop_names() == ["old"]


def test_gated_pod_ungated_by_update() -> None:
    h = make_harness()
    gated = make_pod("p", gates=("example.com/wait",))
    h.queue.add(gated)
    assert (h.queue.pending_counts(), h.queue.pop()) == (counts(gated=1), None)

    relabelled = make_pod("p", gates=("example.com/wait",), labels={"a": "b"})
    h.queue.update(gated, relabelled)
    assert h.queue.pending_counts() == counts(gated=1)

    h.queue.update(relabelled, make_pod("p", labels={"a": "b"}))

    qpi = h.queue.pop()
    assert qpi is not None
    assert (qpi.pod.scheduling_gates, qpi.attempts, h.queue.pending_counts()) == ((), 1, counts())
    assert h.incoming == [
        ("unschedulable", "PodAdd"),
        ("active", "UnscheduledPodUpdatePodSchedulingGatesEliminated"),
    ]


def test_gated_pod_is_not_moved_by_unrelated_cluster_events_nor_timeout() -> None:
    h = make_harness()
    h.queue.add(make_pod("p", gates=("wait",)))

    h.queue.on_cluster_event(NODE_ADD, None, None)
    h.clock.advance(600)
    h.queue.flush()

    assert h.queue.pending_counts() == counts(gated=1)


def test_pre_enqueue_runs_again_when_an_unschedulable_pod_moves() -> None:
    admitted = True

    def quota_pre_enqueue(pod: Pod) -> Status:
        return Status() if admitted else Status(Code.UNSCHEDULABLE, ("over quota",), "Quota")

    queue = SchedulingQueue(
        less=priority_less,
        pre_enqueue=quota_pre_enqueue,
        plugin_events=default_plugin_events(),
        clock=FakeClock(),
    )
    queue.add(make_pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = frozenset({FIT})
    queue.add_unschedulable(qpi)
    admitted = False

    queue.on_cluster_event(NODE_ADD, None, None)

    assert (queue.pending_counts(), qpi.gated, qpi.unschedulable_plugins) == (
        counts(gated=1),
        True,
        frozenset({FIT, "Quota"}),
    )


def test_hint_receives_the_waiting_pod_and_the_event_objects() -> None:
    seen: list[tuple[str, object, object]] = []

    def hint(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        seen.append((pod.name, old, new))
        return QueueingHint.SKIP

    h = make_harness(plugin_events={FIT: [ClusterEventWithHint(NODE_ADD, hint)]})
    h.queue.add(make_pod("p"))
    h.fail(unschedulable=frozenset({FIT}))

    h.queue.on_cluster_event(NODE_ADD, "old-node", "new-node")

    assert seen == [("p", "old-node", "new-node")]


def test_incoming_metrics_for_a_round_trip() -> None:
    h = make_harness()
    h.queue.add(make_pod("p"))
    h.fail(unschedulable=frozenset({FIT}))
    h.queue.on_cluster_event(NODE_ADD, None, None)
    h.clock.advance(2)
    h.queue.flush()

    assert h.incoming == [
        ("active", "PodAdd"),
        ("unschedulable", "ScheduleAttemptFailure"),
        ("backoff", "NodeAdd"),
        ("active", "BackoffComplete"),
    ]
    assert key("p") in h.queue


def test_many_unschedulable_pods_one_event() -> None:
    h = make_harness()
    for i in range(50):
        h.queue.add(make_pod(f"p{i}"))
        h.fail(unschedulable=frozenset({FIT if i % 2 else GATES}))

    h.queue.on_cluster_event(NODE_ADD, None, None)

    assert h.queue.pending_counts() == counts(backoff=25, unschedulable=25)
