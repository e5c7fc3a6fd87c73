"""Pod updates as cluster events (kube's PodSchedulingPropertiesChange) and event labels."""

from __future__ import annotations

import pytest
from queue_testing import make_pod

from apis.core.types import Pod, Toleration
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource
from koord_scheduler.scheduler.queue import event_label, pod_scheduling_property_events

_UNSCHEDULED = EventResource.UNSCHEDULED_POD


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            make_pod("p", labels={"a": "1"}),
            make_pod("p", labels={"a": "2"}),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_LABEL),),
            id="label-change",
        ),
        pytest.param(
            make_pod("p", requests={"cpu": 2000}),
            make_pod("p", requests={"cpu": 1000}),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_SCALE_DOWN),),
            id="request-lowered",
        ),
        pytest.param(
            make_pod("p", requests={"cpu": 1000, "memory": 1}),
            make_pod("p", requests={"cpu": 1000}),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_SCALE_DOWN),),
            id="request-removed",
        ),
        pytest.param(
            make_pod("p", requests={"cpu": 1000}),
            make_pod("p", requests={"cpu": 2000}),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE),),
            id="request-raised-is-other-update",
        ),
        pytest.param(
            make_pod("p", gates=("g",)),
            make_pod("p"),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),),
            id="gates-eliminated",
        ),
        pytest.param(
            make_pod("p", gates=("g", "h")),
            make_pod("p", gates=("g",)),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE),),
            id="one-gate-left-is-other-update",
        ),
        pytest.param(
            make_pod("p"),
            make_pod("p", tolerations=(Toleration(key="k"),)),
            (ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_TOLERATIONS),),
            id="toleration-added",
        ),
        pytest.param(
            make_pod("p", labels={"a": "1"}, gates=("g",)),
            make_pod("p", labels={"a": "2"}),
            (
                ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_LABEL),
                ClusterEvent(_UNSCHEDULED, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
            ),
            id="several-changes-in-kube-order",
        ),
        pytest.param(
            make_pod("p", labels={"a": "1"}),
            make_pod("p", labels={"a": "2"}, node="n1"),
            (ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_LABEL),),
            id="assigned-pod",
        ),
    ],
)
def test_pod_scheduling_property_events(old: Pod, new: Pod, want: tuple[ClusterEvent, ...]) -> None:
    assert pod_scheduling_property_events(old, new) == want


@pytest.mark.parametrize(
    ("event", "want"),
    [
        pytest.param(ClusterEvent(EventResource.NODE, ActionType.ADD), "NodeAdd", id="node-add"),
        pytest.param(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT), "NodeUpdateNodeTaint", id="taint"),
        pytest.param(ClusterEvent(EventResource.WILDCARD, ActionType.ALL), "*All", id="wildcard"),
        pytest.param(
            ClusterEvent(EventResource.NODE, ActionType.ADD, label="NodeReady"),
            "NodeReady",
            id="custom-label",
        ),
        pytest.param(
            ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.DELETE),
            "NodeAdd|Delete",
            id="combined",
        ),
    ],
)
def test_event_label(event: ClusterEvent, want: str) -> None:
    assert event_label(event) == want
