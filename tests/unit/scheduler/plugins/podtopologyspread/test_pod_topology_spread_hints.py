"""PodTopologySpread queueing hints: rows after upstream ``plugin_test.go``
(``Test_isSchedulableAfterPodChange`` / ``Test_isSchedulableAfterNodeChange``), plus the bind transition
the scheduler reports as an update."""

from __future__ import annotations

import pytest

from apis.config.plugin_args import PodTopologySpreadArgs, TopologySpreadConstraint
from apis.core.parse import parse_pod
from apis.core.types import Node, Pod
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, QueueingHint
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from tests.builders import make_node, make_pod
from tests.unit.scheduler.queue.queue_testing import make_harness

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
ZONE = "zone"
HOST = "node"


def plugin() -> pts.PodTopologySpread:
    return pts.from_args(None)


def waiting(*, honor_taints: bool = False, tolerate: bool = False) -> Pod:
    """The pod the plugin rejected: hard zone and host constraints selecting ``foo``."""
    builder = make_pod("p").label("foo", "").spread(1, ZONE, {"foo": ""}).spread(1, HOST, {"foo": ""})
    if tolerate:
        builder.toleration("t")
    obj = builder.obj()
    if honor_taints:
        obj["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = "Honor"
    return parse_pod(obj)


def assigned(name: str, labels: dict[str, str], *, namespace: str = "default") -> Pod:
    return make_pod(name, namespace).labels(labels).node("n1").build()


def pending(name: str, labels: dict[str, str]) -> Pod:
    return make_pod(name).labels(labels).build()


WAITING = waiting()


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, assigned("a", {"foo": ""}), QUEUE, id="add-pod-matching-selector"),
        pytest.param(None, pending("a", {"foo": ""}), SKIP, id="add-unscheduled-pod"),
        pytest.param(pending("a", {}), pending("a", {"foo": ""}), SKIP, id="update-unscheduled-pod"),
        pytest.param(pending("a", {"foo": ""}), None, SKIP, id="delete-unscheduled-pod"),
        pytest.param(None, assigned("a", {"foo": ""}, namespace="other"), SKIP, id="add-pod-other-namespace"),
        pytest.param(None, assigned("a", {"bar": ""}), SKIP, id="add-pod-not-matching-selector"),
        pytest.param(assigned("a", {"foo": ""}), None, QUEUE, id="delete-pod-matching-selector"),
        pytest.param(assigned("a", {"bar": ""}), None, SKIP, id="delete-pod-not-matching-selector"),
        pytest.param(
            assigned("a", {"foo": "", "x": "1"}),
            assigned("a", {"foo": "", "x": "2"}),
            SKIP,
            id="update-unrelated-label",
        ),
        pytest.param(
            assigned("a", {"bar": ""}), assigned("a", {"bar": "", "foo": ""}), QUEUE, id="add-label-matching-selector"
        ),
        pytest.param(assigned("a", {"foo": ""}), assigned("a", {}), QUEUE, id="remove-label-matching-selector"),
        pytest.param(assigned("a", {"foo": ""}), assigned("a", {"foo": ""}), SKIP, id="update-without-label-change"),
        pytest.param(pending("a", {"foo": ""}), assigned("a", {"foo": ""}), QUEUE, id="pending-pod-bound-is-an-add"),
        pytest.param(
            pending("a", {"bar": ""}), assigned("a", {"bar": ""}), SKIP, id="pending-pod-bound-not-matching-is-an-add"
        ),
    ],
)
def test_hint_after_pod_change(old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    assert plugin().hint_after_pod_change(WAITING, old, new) == want


@pytest.mark.parametrize(
    ("honor", "want"),
    [
        pytest.param(True, QUEUE, id="new-toleration-with-node-taints-policy-honor"),
        pytest.param(False, SKIP, id="new-toleration-without-node-taints-policy-honor"),
    ],
)
def test_hint_after_the_waiting_pods_own_toleration_change(honor: bool, want: QueueingHint) -> None:
    pod, tolerated = waiting(honor_taints=honor), waiting(honor_taints=honor, tolerate=True)
    assert pod.uid == tolerated.uid and tolerated.tolerations != pod.tolerations
    assert plugin().hint_after_pod_change(pod, pod, tolerated) == want


def node(name: str, *, taint: str = "", **labels: str) -> Node:
    builder = make_node(name).labels(labels)
    if taint:
        builder.taint(taint)
    return builder.build()


BOTH = {ZONE: "a", HOST: "n1"}


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(node("n1", **BOTH), node("n1", zone="b", node="n1"), QUEUE, id="update-topology-key-value"),
        pytest.param(node("n1", x="1"), node("n1", x="2"), SKIP, id="non-matching-node-updates-unrelated-label"),
        pytest.param(node("n1", **BOTH), node("n1", x="1", **BOTH), SKIP, id="matching-node-adds-unrelated-label"),
        pytest.param(None, node("n1", x="1"), SKIP, id="create-node-without-keys"),
        pytest.param(None, node("n1", **BOTH), QUEUE, id="create-node-with-all-keys"),
        pytest.param(node("n1", x="1"), None, SKIP, id="delete-node-without-keys"),
        pytest.param(node("n1", **BOTH), None, QUEUE, id="delete-node-with-all-keys"),
        pytest.param(None, node("n1", zone="a"), SKIP, id="create-node-with-one-of-two-keys"),
        pytest.param(node("n1", x="1"), node("n1", zone="a"), SKIP, id="update-node-to-one-of-two-keys"),
        pytest.param(node("n1", zone="a"), node("n1", **BOTH), QUEUE, id="update-node-to-all-keys"),
        pytest.param(node("n1", **BOTH), node("n1", zone="a"), QUEUE, id="update-node-loses-a-key"),
        pytest.param(node("n1", **BOTH), node("n1", taint="t", **BOTH), QUEUE, id="taint-change-node-with-all-keys"),
        pytest.param(node("n1", zone="a"), node("n1", taint="t", zone="a"), SKIP, id="taint-change-node-with-one-key"),
    ],
)
def test_hint_after_node_change(old: Node | None, new: Node | None, want: QueueingHint) -> None:
    assert plugin().hint_after_node_change(WAITING, old, new) == want


def test_hints_read_the_default_constraints_when_the_pod_has_none() -> None:
    args = PodTopologySpreadArgs(
        defaulting_type="List",
        default_constraints=[
            TopologySpreadConstraint(max_skew=1, topology_key=ZONE, when_unsatisfiable="DoNotSchedule")
        ],
    )
    listed = pts.from_args(args)
    owned = make_pod("p").label("app", "web").owner("ReplicaSet", "rs").build()
    assert listed.hint_after_node_change(owned, None, node("n1", zone="a")) == QUEUE
    assert listed.hint_after_node_change(owned, None, node("n1", x="1")) == SKIP
    assert listed.hint_after_pod_change(owned, None, assigned("a", {"app": "web"})) == QUEUE
    # System defaults are ScheduleAnyway only: nothing this plugin's Filter rejects can change.
    assert plugin().hint_after_pod_change(owned, None, assigned("a", {"app": "web"})) == SKIP


def test_a_hint_answers_queue_for_objects_it_cannot_read() -> None:
    assert plugin().hint_after_pod_change(WAITING, None, object()) == QUEUE
    assert plugin().hint_after_node_change(WAITING, object(), None) == QUEUE


def test_events_carry_the_hints() -> None:
    p = plugin()
    by_resource = {e.event.resource: e for e in p.events_to_register()}
    assert by_resource[EventResource.POD].event.action == ActionType.ALL
    assert by_resource[EventResource.POD].hint == p.hint_after_pod_change
    assert by_resource[EventResource.NODE].event.action == (
        ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
    )
    assert by_resource[EventResource.NODE].hint == p.hint_after_node_change


def test_the_queue_moves_a_rejected_pod_only_for_a_pod_that_can_help() -> None:
    p = plugin()
    h = make_harness(plugin_events={pts.NAME: p.events_to_register()})
    h.queue.add(WAITING)
    h.fail(unschedulable=frozenset({pts.NAME}))
    added = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD)

    h.queue.on_cluster_event(added, None, assigned("other", {"bar": ""}))
    h.queue.on_cluster_event(ClusterEvent(EventResource.NODE, ActionType.ADD), None, node("n9", x="1"))
    assert h.incoming[-1] == ("unschedulable", "ScheduleAttemptFailure")

    h.queue.on_cluster_event(added, None, assigned("match", {"foo": ""}))
    assert h.incoming[-1][0] == "backoff"
