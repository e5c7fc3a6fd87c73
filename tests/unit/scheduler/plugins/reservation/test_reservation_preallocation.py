"""Pre-allocation (``spec.preAllocation``): which pods a reservation may adopt (:func:`choose`, table),
and reservations that adopt running pods through the whole in-memory scheduler."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from koord_scheduler.plugins.reservation.preallocation import choose
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import PROFILE, ReservationBuilder, make_reservation, run

REQUIRED = "scheduling.koordinator.sh/pre-allocation-required"
C = "cpu"
NO_PREEMPTION = PROFILE.replace("  plugins:\n", '  plugins:\n    postFilter: {disabled: [{name: "*"}]}\n')
"""Reserve pods have the highest priority: without this, DefaultPreemption would make room by evicting."""
assert NO_PREEMPTION != PROFILE


def cpu(*amounts: int) -> list[dict[str, int]]:
    return [{C: a} for a in amounts]


@pytest.mark.parametrize(
    ("request_", "free", "pods", "flags", "want"),
    [
        pytest.param(3, 1, cpu(3), {}, [0], id="adopts-the-pod-that-makes-room"),
        pytest.param(3, 1, cpu(1), {}, None, id="too-small-to-make-room"),
        pytest.param(3, 1, cpu(4), {}, None, id="too-big-for-the-reservation"),
        pytest.param(3, 1, cpu(4, 2), {}, [1], id="first-that-fits"),
        pytest.param(3, 4, cpu(3), {}, [0], id="adopts-even-when-node-has-room"),
        pytest.param(3, 4, cpu(3), {"prefer_none": True}, [], id="prefer-no-pre-allocated-pods"),
        pytest.param(3, 4, cpu(3), {"prefer_none": True, "required": True}, [0], id="required-beats-prefer-none"),
        pytest.param(3, 4, [], {}, [], id="no-candidates-node-has-room"),
        pytest.param(3, 4, [], {"required": True}, None, id="required-without-candidates"),
        pytest.param(3, 4, cpu(5), {}, [], id="none-fit-but-node-has-room"),
        pytest.param(3, 0, cpu(1, 1, 1), {}, None, id="single-mode-takes-one"),
        pytest.param(3, 0, cpu(1, 1, 1), {"multiple": True}, [0, 1, 2], id="multiple-accumulates"),
        pytest.param(3, 1, cpu(1, 1, 1), {"multiple": True}, [0, 1], id="multiple-stops-when-it-fits"),
        pytest.param(3, 0, cpu(2, 2, 1), {"multiple": True}, [0, 2], id="multiple-skips-overflow"),
    ],
)
def test_choose(request_: int, free: int, pods: list[dict[str, int]], flags: dict[str, bool], want: Any) -> None:
    options = {"multiple": False, "prefer_none": False, "required": False, **flags}
    assert choose({C: request_}, {C: free}, pods, **options) == want


def test_choose_checks_every_resource() -> None:
    """The reservation reserves cpu and memory; the pod frees enough cpu but not memory."""
    request = {C: 2, "memory": 4}
    assert (
        choose(request, {C: 0, "memory": 1}, [{C: 2, "memory": 1}], multiple=False, prefer_none=False, required=False)
        is None
    )
    assert choose(
        request, {C: 0, "memory": 3}, [{C: 2, "memory": 1}], multiple=False, prefer_none=False, required=False
    ) == [0]


def node(cpu_: str = "4") -> list:
    return [make_node("n1").capacity(cpu=cpu_, memory="16Gi", pods=110).build()]


def running(name: str, cpu_: str, **labels: str) -> Any:
    return make_pod(name).req(cpu=cpu_).labels({"app": "web", **labels}).node("n1").phase("Running").build()


def pre_allocating(**policy: Any) -> ReservationBuilder:
    return (
        make_reservation("r")
        .req(cpu="3")
        .owner_labels(app="web")
        .spec(allocatePolicy="Restricted", preAllocation=True, allocateOnce=False, **policy)
    )


def allocated(r: Any, pod: str) -> str | None:
    text = r.cluster.pods[f"default/{pod}"].annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    return json.loads(text)["name"] if text else None


async def test_reservation_adopts_a_running_owner_pod() -> None:
    r = await run(node(), [pre_allocating()], [running("p", "3")], profile=NO_PREEMPTION)
    rec = r.reservation("r")
    assert (rec.phase, rec.node_name) == ("Available", "n1")
    assert allocated(r, "p") == "r"
    # The adopted pod is the reservation's owner: the node holds 3 CPUs, not 6.
    assert r.requested_cpu("n1") == 3000


async def test_without_pre_allocation_it_does_not_fit() -> None:
    r = await run(
        node(),
        [make_reservation("r").req(cpu="3").owner_labels(app="web").spec(allocatePolicy="Restricted")],
        [running("p", "3")],
        profile=NO_PREEMPTION,
    )
    assert r.reservation("r").phase == "Pending" and allocated(r, "p") is None


async def test_non_owner_pods_are_not_adopted() -> None:
    q = make_pod("q").req(cpu="3").node("n1").phase("Running").build()
    r = await run(node(), [pre_allocating()], [q], profile=NO_PREEMPTION)
    assert r.reservation("r").phase == "Pending" and allocated(r, "q") is None


async def test_prefer_no_pre_allocated_pods_uses_free_capacity_first() -> None:
    profile = (
        NO_PREEMPTION
        + """  pluginConfig:
  - name: Reservation
    args: {preAllocationConfig: {preferNoPreAllocatedPods: true}}
"""
    )
    r = await run(node("8"), [pre_allocating()], [running("p", "3")], profile=profile)
    assert r.reservation("r").phase == "Available" and allocated(r, "p") is None


@pytest.mark.parametrize(
    ("builder", "want"),
    [
        pytest.param(
            pre_allocating().label(REQUIRED, "true"),
            "no pod match reservation with pre allocation required",
            id="required-without-candidates",
        ),
        pytest.param(
            make_reservation("r").req(cpu="3").owner_labels(app="web").spec(preAllocation=True),
            "reservation pre allocation is unsupported with current attributes",
            id="aligned",
        ),
        pytest.param(
            pre_allocating(preAllocationPolicy={"mode": "Cluster"}),
            "reservation requires cluster mode pre-allocation which is disabled",
            id="cluster-mode-disabled",
        ),
    ],
)
async def test_reservations_that_cannot_pre_allocate_say_why(builder: ReservationBuilder, want: str) -> None:
    q = make_pod("q").req(cpu="1").node("n1").phase("Running").build()
    r = await run(node(), [builder], [q], profile=NO_PREEMPTION)
    rec = r.reservation("r")
    cond = rec.condition("Scheduled")
    assert rec.phase == "Pending" and cond is not None and want in cond[3], cond


async def test_cluster_mode_adopts_labelled_pods_by_priority() -> None:
    profile = (
        NO_PREEMPTION
        + """  pluginConfig:
  - name: Reservation
    args: {preAllocationConfig: {enableClusterMode: true}}
"""
    )
    label = {"pod.koordinator.sh/is-pre-allocatable": "true"}
    low = make_pod("low").req(cpu="3").labels(label).annotation("pod.koordinator.sh/pre-allocatable-priority", "1")
    high = make_pod("high").req(cpu="3").labels(label).annotation("pod.koordinator.sh/pre-allocatable-priority", "9")
    r = await run(
        node("6"),
        [pre_allocating(preAllocationPolicy={"mode": "Cluster"})],
        [low.node("n1").phase("Running").build(), high.node("n1").phase("Running").build()],
        profile=profile,
    )
    assert r.reservation("r").phase == "Available"
    assert (allocated(r, "high"), allocated(r, "low")) == ("r", None)
