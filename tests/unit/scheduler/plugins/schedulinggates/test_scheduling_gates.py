"""SchedulingGates PreEnqueue and its queueing hint."""

from __future__ import annotations

import pytest

from apis.core.types import ObjectMeta, Pod
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import ActionType, EventResource, QueueingHint
from koord_scheduler.plugins.schedulinggates import plugin as gates


def pod(*scheduling_gates: str, name: str = "p", uid: str = "u1") -> Pod:
    return Pod(ObjectMeta(name, "default", uid=uid), scheduling_gates=scheduling_gates)


@pytest.mark.parametrize(
    ("gated", "want"),
    [
        pytest.param(pod(), Status(), id="no-gates-enqueues"),
        pytest.param(
            pod("g1"),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("waiting for scheduling gates: [g1]",)),
            id="one-gate",
        ),
        pytest.param(
            pod("g1", "g2"),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("waiting for scheduling gates: [g1 g2]",)),
            id="gates-printed-like-go-slice",
        ),
    ],
)
def test_pre_enqueue(gated: Pod, want: Status) -> None:
    assert gates.SchedulingGates().pre_enqueue(gated) == want


@pytest.mark.parametrize(
    ("new", "want"),
    [
        pytest.param(pod(), QueueingHint.QUEUE, id="own-gates-removed"),
        pytest.param(pod(name="other", uid="u2"), QueueingHint.SKIP, id="other-pod"),
        pytest.param(None, QueueingHint.SKIP, id="no-object"),
    ],
)
def test_hint(new: Pod | None, want: QueueingHint) -> None:
    assert gates.is_schedulable_after_gates_eliminated(pod("g1"), pod("g1"), new) == want


def test_registers_gates_eliminated() -> None:
    (registered,) = gates.SchedulingGates().events_to_register()
    assert registered.event.resource == EventResource.POD
    assert registered.event.action == ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
