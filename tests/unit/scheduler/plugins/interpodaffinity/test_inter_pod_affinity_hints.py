"""InterPodAffinity queueing hints: rows after upstream ``plugin_test.go``
(``Test_isSchedulableAfterPodChange`` / ``Test_isSchedulableAfterNodeChange``), plus the bind transition
the scheduler reports as an update."""

from __future__ import annotations

import pytest

from apis.core.types import Node, Pod
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, QueueingHint
from koord_scheduler.plugins.interpodaffinity import plugin as ipa
from tests.builders import make_node, make_pod
from tests.unit.scheduler.queue.queue_testing import make_harness

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
ZONE = "zone"
HOST = "node"

AFFINITY = make_pod("p").pod_affinity(ZONE, {"aaa": "a"}).build()
"""Waits for a pod labelled aaa=a in its zone."""
ANTI = make_pod("p").pod_affinity(HOST, {"aaa": "a"}, anti=True).build()
"""Waits for the pods labelled aaa=a to leave its host."""
BOTH = make_pod("p").pod_affinity(ZONE, {"aaa": "a"}).pod_affinity(HOST, {"bbb": "b"}, anti=True).build()


def assigned(labels: dict[str, str], *, namespace: str = "default") -> Pod:
    return make_pod("a", namespace).labels(labels).node("n1").build()


def pending(labels: dict[str, str]) -> Pod:
    return make_pod("a").labels(labels).build()


@pytest.mark.parametrize(
    ("waiting", "old", "new", "want"),
    [
        pytest.param(AFFINITY, None, assigned({"aaa": "a"}), QUEUE, id="add-pod-matching-affinity"),
        pytest.param(AFFINITY, None, pending({"aaa": "a"}), SKIP, id="add-unscheduled-pod"),
        pytest.param(
            AFFINITY, None, assigned({"aaa": "a"}, namespace="other"), SKIP, id="add-pod-in-another-namespace"
        ),
        pytest.param(
            AFFINITY,
            assigned({"aaa": "b"}),
            assigned({"aaa": "a"}),
            QUEUE,
            id="update-pod-from-non-match-to-match-affinity",
        ),
        pytest.param(
            AFFINITY,
            assigned({"aaa": "a"}),
            assigned({"aaa": "a", "x": "1"}),
            SKIP,
            id="update-pod-matching-affinity-before-and-after",
        ),
        pytest.param(AFFINITY, pending({"aaa": "b"}), pending({"aaa": "a"}), SKIP, id="update-unscheduled-pod"),
        pytest.param(
            AFFINITY,
            assigned({"aaa": "a"}),
            assigned({"aaa": "b"}),
            SKIP,
            id="update-pod-from-match-to-non-match-affinity",
        ),
        pytest.param(ANTI, assigned({"aaa": "b"}), None, SKIP, id="delete-pod-not-matching-anti-affinity"),
        pytest.param(ANTI, assigned({"aaa": "a"}), None, QUEUE, id="delete-pod-matching-anti-affinity"),
        pytest.param(ANTI, pending({"aaa": "a"}), None, SKIP, id="delete-unscheduled-pod"),
        pytest.param(
            ANTI,
            assigned({"aaa": "a"}),
            assigned({"aaa": "b"}),
            QUEUE,
            id="update-pod-from-match-to-non-match-anti-affinity",
        ),
        pytest.param(
            ANTI,
            assigned({"aaa": "b"}),
            assigned({"aaa": "a"}),
            SKIP,
            id="update-pod-from-non-match-to-match-anti-affinity",
        ),
        pytest.param(ANTI, None, assigned({"aaa": "a"}), SKIP, id="add-pod-anti-affinity-only"),
        pytest.param(AFFINITY, pending({"aaa": "a"}), assigned({"aaa": "a"}), QUEUE, id="pending-pod-bound-is-an-add"),
        pytest.param(
            BOTH, assigned({"aaa": "a", "bbb": "b"}), None, QUEUE, id="delete-pod-matching-all-anti-affinity-terms"
        ),
    ],
)
def test_hint_after_pod_change(waiting: Pod, old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    assert ipa.InterPodAffinity.hint_after_pod_change(waiting, old, new) == want


def node(**labels: str) -> Node:
    return make_node("n1").labels(labels).build()


@pytest.mark.parametrize(
    ("waiting", "old", "new", "want"),
    [
        pytest.param(AFFINITY, None, node(zone="a"), QUEUE, id="add-node-with-affinity-key"),
        pytest.param(AFFINITY, None, node(x="1"), SKIP, id="add-node-without-affinity-key"),
        pytest.param(AFFINITY, node(zone="a"), node(zone="b"), QUEUE, id="update-affinity-key-value"),
        pytest.param(AFFINITY, node(x="1"), node(x="1", zone="a"), QUEUE, id="update-node-gains-affinity-key"),
        pytest.param(
            AFFINITY, node(zone="a", x="1"), node(zone="a", x="2"), SKIP, id="update-label-other-than-affinity-key"
        ),
        pytest.param(ANTI, None, node(x="1"), QUEUE, id="add-any-node-with-anti-affinity"),
        pytest.param(
            ANTI, node(node="n1", x="1"), node(node="n1", x="2"), SKIP, id="update-label-unrelated-to-anti-affinity"
        ),
        pytest.param(ANTI, node(node="n1"), node(x="1"), QUEUE, id="update-node-loses-anti-affinity-key"),
        pytest.param(ANTI, node(x="1"), node(node="n1"), SKIP, id="update-node-gains-anti-affinity-key"),
        pytest.param(ANTI, node(node="n1"), node(node="n2"), QUEUE, id="update-anti-affinity-key-value"),
        pytest.param(make_pod("p").build(), None, node(zone="a"), SKIP, id="pod-without-terms"),
    ],
)
def test_hint_after_node_change(waiting: Pod, old: Node | None, new: Node | None, want: QueueingHint) -> None:
    assert ipa.InterPodAffinity.hint_after_node_change(waiting, old, new) == want


def test_preferred_terms_never_queue() -> None:
    preferred = make_pod("p").pod_affinity(ZONE, {"aaa": "a"}, weight=10).build()
    assert ipa.InterPodAffinity.hint_after_pod_change(preferred, None, assigned({"aaa": "a"})) == SKIP
    assert ipa.InterPodAffinity.hint_after_node_change(preferred, None, node(zone="a")) == SKIP


def test_a_hint_answers_queue_for_objects_it_cannot_read() -> None:
    assert ipa.InterPodAffinity.hint_after_pod_change(AFFINITY, "pod", None) == QUEUE
    assert ipa.InterPodAffinity.hint_after_node_change(AFFINITY, None, 1) == QUEUE


def test_events_carry_the_hints() -> None:
    plugin = ipa.InterPodAffinity()
    by_resource = {e.event.resource: e for e in plugin.events_to_register()}
    assert by_resource[EventResource.POD].event.action == ActionType.ALL
    assert by_resource[EventResource.POD].hint == plugin.hint_after_pod_change
    assert by_resource[EventResource.NODE].event.action == ActionType.ADD | ActionType.UPDATE_NODE_LABEL
    assert by_resource[EventResource.NODE].hint == plugin.hint_after_node_change


def test_the_queue_moves_a_rejected_pod_only_for_a_change_that_can_help() -> None:
    plugin = ipa.InterPodAffinity()
    h = make_harness(plugin_events={ipa.NAME: plugin.events_to_register()})
    h.queue.add(AFFINITY)
    h.fail(unschedulable=frozenset({ipa.NAME}))

    h.queue.on_cluster_event(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD), None, assigned({"aaa": "b"}))
    h.queue.on_cluster_event(ClusterEvent(EventResource.NODE, ActionType.ADD), None, node(x="1"))
    assert h.incoming[-1] == ("unschedulable", "ScheduleAttemptFailure")

    h.queue.on_cluster_event(
        ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL), node(x="1"), node(x="1", zone="a")
    )
    assert h.incoming[-1][0] == "backoff"
