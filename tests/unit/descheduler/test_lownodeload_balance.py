"""LowNodeLoad's pool pass, with the cases of Koordinator's ``TestLowNodeLoad``
(pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go): three nodes (4 CPU, 3000 bytes of
memory, 9/10/10 pods; n3 unschedulable), 400m pods, usage = requests, anomaly after one detection.
Pods owned by a DaemonSet, mirror/local-storage and system-critical ones are not evictable (their
DefaultEvictor filter), given here as the ``evictable`` predicate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from apis.extension import PriorityClass
from apis.extension.qos import QoSClass
from koord_scheduler.descheduler.lownodeload.balance import PoolOptions, assess_pool, plan_evictions, why_idle
from koord_scheduler.descheduler.lownodeload.policy import NodeLoad, PodLoad, fill_thresholds


@dataclass(frozen=True)
class P:
    name: str
    cpu: int = 400
    memory: int = 0
    node: str = "n1"
    evictable: bool = True
    priority: int = 0
    priority_class: str = ""

    def load(self) -> PodLoad:
        # Koordinator's default priority class: a Burstable pod is LS, so prod; a label overrides it.
        pc = PriorityClass(self.priority_class) if self.priority_class else PriorityClass.PROD
        return PodLoad(
            "default",
            self.name,
            {"cpu": self.cpu, "memory": self.memory},
            priority_class=pc,
            priority=self.priority,
            kube_qos="Burstable",
            qos=QoSClass.LS,
        )


NOT_EVICTABLE = [P("p6", evictable=False), P("p7", evictable=False), P("p8", evictable=False)]


@dataclass
class Case:
    low: Mapping[str, float]
    high: Mapping[str, float]
    pods: list[P]
    prod_low: Mapping[str, float] = field(default_factory=dict)
    prod_high: Mapping[str, float] = field(default_factory=dict)
    deviation: bool = False


def _nodes(pods: list[P]) -> list[NodeLoad]:
    out = []
    for name, max_pods, unschedulable in (("n1", 9, False), ("n2", 10, False), ("n3", 10, True)):
        on = [p for p in pods if p.node == name]
        loads = tuple(p.load() for p in on)
        usage = {"cpu": sum(p.cpu for p in on), "memory": sum(p.memory for p in on), "pods": len(on)}
        prod = [p for p in loads if p.prod]
        prod_usage = {
            "cpu": sum(p.usage["cpu"] for p in prod if p.usage),
            "memory": sum(p.usage["memory"] for p in prod if p.usage),
            "pods": len(prod),
        }
        out.append(
            NodeLoad(
                name,
                {"cpu": 4000, "memory": 3000, "pods": max_pods},
                usage,
                prod_usage,
                loads,
                unschedulable=unschedulable,
            )
        )
    return out


def _plan(case: Case) -> list[str]:
    thresholds = fill_thresholds(case.low, case.high, case.prod_low, case.prod_high, use_deviation=case.deviation)
    options = PoolOptions(thresholds, use_deviation=case.deviation)
    assessment = assess_pool(_nodes(case.pods), options)
    not_evictable = {p.name for p in case.pods if not p.evictable}
    planned = plan_evictions(
        assessment,
        options,
        abnormal=assessment.classified.high,
        abnormal_prod=assessment.classified.prod_high,
        evictable=lambda pod: pod.name not in not_evictable,
    )
    return [e.pod.name for e in planned]


RS = [P(f"p{i}") for i in range(1, 6)]
LOW: dict[str, float] = {"cpu": 30, "pods": 30}
HIGH: dict[str, float] = {"cpu": 50, "pods": 50}


@pytest.mark.parametrize(
    ("case", "want_evicted"),
    [
        pytest.param(
            Case(LOW, HIGH, [P(f"p{i}", evictable=False) for i in range(1, 9)] + [P("p9", node="n2")]),
            0,
            id="no-evictable-pods",
        ),
        pytest.param(Case(LOW, HIGH, [*RS, *NOT_EVICTABLE, P("p9", node="n2")]), 4, id="without-priorities"),
        pytest.param(
            Case(
                LOW,
                HIGH,
                [P(f"p{i}", memory=300) for i in range(1, 6)]
                + [
                    P("p6", memory=300, evictable=False),
                    P("p7", memory=300, evictable=False),
                    P("p8", memory=300, evictable=False),
                    P("p9", memory=2100, node="n2"),
                ],
            ),
            3,
            id="stop-when-memory-capacity-is-depleted",
        ),
        pytest.param(
            Case(
                {"cpu": 5, "pods": 5}, {"cpu": 5, "pods": 5}, [*RS, *NOT_EVICTABLE, P("p9", node="n2")], deviation=True
            ),
            2,
            id="deviation-thresholds",
        ),
        pytest.param(
            Case(
                LOW,
                {"cpu": 90, "pods": 90},
                [
                    P("p1"),
                    P("p2"),
                    *(P(f"p{i}", priority_class="koord-batch") for i in (3, 4, 5)),
                    *NOT_EVICTABLE,
                    P("p9", node="n2"),
                ],
                prod_low={"cpu": 20, "pods": 20},
                prod_high={"cpu": 40, "pods": 40},
            ),
            2,
            id="node-under-thresholds-but-prod-over",
        ),
        pytest.param(
            Case(
                LOW,
                {"cpu": 70, "pods": 80},
                [
                    P("p1"),
                    P("p2"),
                    P("p3"),
                    *(P(f"p{i}", priority_class="koord-batch") for i in (4, 5)),
                    *NOT_EVICTABLE,
                    P("p9", node="n2"),
                ],
                prod_low={"cpu": 20, "pods": 20},
                prod_high={"cpu": 40, "pods": 40},
            ),
            1,
            id="both-node-and-prod-over-only-node-evicts",
        ),
        pytest.param(
            Case(
                {"cpu": 0, "pods": 0},
                {"cpu": 100, "pods": 100},
                [*RS, *NOT_EVICTABLE, P("p9", node="n2")],
                prod_low={"cpu": 30, "pods": 30},
                prod_high={"cpu": 50, "pods": 50},
            ),
            4,
            id="reschedule-prod-pods-only",
        ),
    ],
)
def test_koordinator_low_node_load_cases(case: Case, want_evicted: int) -> None:
    assert len(_plan(case)) == want_evicted


def test_lower_priority_goes_first() -> None:
    # nodeFit books the first four pods on n2 (as Koordinator filters before it sorts); of those the
    # lowest priority goes first.
    pods = [
        P("p1", priority=100),
        P("p2", priority=100),
        P("p3", priority=100),
        P("p4", priority=1),
        P("p5", priority=1),
        *NOT_EVICTABLE,
        P("p9", node="n2"),
    ]
    assert _plan(Case(LOW, HIGH, pods)) == ["p4", "p1", "p2", "p3"]


def test_idle_reasons() -> None:
    thresholds = fill_thresholds(LOW, HIGH, {}, {}, use_deviation=False)
    options = PoolOptions(thresholds, number_of_nodes=1)
    assessment = assess_pool(_nodes([*RS, P("p9", node="n2")]), options)
    assert why_idle(assessment, options, abnormal=(), abnormal_prod=()) == (
        "no hot node has been abnormal for long enough (anomalyCondition)"
    )
    assert why_idle(assessment, options, abnormal=("n1",), abnormal_prod=()) == (
        "1 node(s) under the low thresholds, numberOfNodes is 1"
    )
    cool = assess_pool(_nodes([P("p9", node="n2")]), options)
    assert why_idle(cool, options, abnormal=(), abnormal_prod=()) == "no node is above the high thresholds"


def test_reason_names_the_overused_resources() -> None:
    thresholds = fill_thresholds(LOW, HIGH, {}, {}, use_deviation=False)
    options = PoolOptions(thresholds)
    assessment = assess_pool(_nodes([*RS, *NOT_EVICTABLE, P("p9", node="n2")]), options)
    planned = plan_evictions(assessment, options, abnormal=("n1",))
    assert planned[0].reason == (
        "node is overutilized, node cpu usage(80.00%)>threshold(50.00%), node pods usage(88.89%)>threshold(50.00%)"
    )
