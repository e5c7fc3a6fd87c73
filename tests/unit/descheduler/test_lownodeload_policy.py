"""LowNodeLoad's formulas: Koordinator's pod order (pkg/descheduler/utils/sorter/pod_test.go ``TestSortPods``)
and the threshold, classification and scoring rules of utilization_util.go."""

from __future__ import annotations

import functools

import pytest

from apis.extension import LABEL_POD_QOS, priority_class_with_default
from apis.extension.qos import QoSClass, qos_class_with_default
from koord_scheduler.descheduler.lownodeload.policy import (
    NodeLoad,
    NodeThresholds,
    PodLoad,
    classify,
    fill_thresholds,
    most_requested_score_pod,
    node_thresholds,
    node_usage_score,
    pod_order,
)

GI = 1 << 30
PROD_MAX, PROD_MIN, BATCH_MIN, BATCH_MAX = 9999, 9000, 5000, 5999


def _pod(
    name: str,
    priority: int,
    qos: QoSClass,
    kube_qos: str,
    created: float = 0.0,
    *,
    usage: tuple[int, int] | None = None,
    deletion_cost: int = 0,
    eviction_cost: int = 0,
) -> PodLoad:
    # As Koordinator's GetPod{QoS,Priority}ClassWithDefault: the QoS label, else from the Kubernetes QoS class;
    # the priority class from the priority's range, else from that QoS.
    resolved = qos_class_with_default({LABEL_POD_QOS: qos.value} if qos is not QoSClass.NONE else {}, kube_qos)
    return PodLoad(
        "default",
        name,
        {"cpu": usage[0], "memory": usage[1]} if usage else None,
        priority_class=priority_class_with_default({}, priority, resolved),
        priority=priority,
        kube_qos=kube_qos,
        qos=resolved,
        deletion_cost=deletion_cost,
        eviction_cost=eviction_cost,
        creation_timestamp=created,
    )


def test_koordinator_sort_pods() -> None:
    t0, t1 = 0.0, 60.0
    none, lse, ls, lsr, be = QoSClass.NONE, QoSClass.LSE, QoSClass.LS, QoSClass.LSR, QoSClass.BE
    pods = [
        _pod("test-1", 0, none, "BestEffort"),
        _pod("test-10", 0, none, "Guaranteed"),
        _pod("test-11", 0, none, "Burstable"),
        _pod("test-12", 8, none, "BestEffort"),
        _pod("test-13", 9, none, "Guaranteed"),
        _pod("test-14", 10, none, "Burstable"),
        _pod("test-5", PROD_MAX, lse, "Guaranteed"),
        _pod("test-6", PROD_MAX - 1, lse, "Guaranteed"),
        _pod("test-3", PROD_MAX - 100, ls, "Burstable"),
        _pod("test-9", BATCH_MIN, be, "Burstable"),
        _pod("test-2", PROD_MIN, ls, "Burstable"),
        _pod("test-8", BATCH_MAX, be, "Burstable"),
        _pod("test-15", BATCH_MIN, be, "BestEffort"),
        _pod("test-16", BATCH_MIN, be, "BestEffort", t1, usage=(2000, 4 * GI)),
        _pod("test-17", BATCH_MIN, be, "BestEffort", t0, usage=(3000, 4 * GI)),
        _pod("test-18", BATCH_MIN, be, "BestEffort", t1, usage=(3000, 5 * GI)),
        _pod("test-19", BATCH_MIN, be, "BestEffort", t0, usage=(3000, 5 * GI)),
        _pod("test-20", BATCH_MIN, be, "BestEffort", deletion_cost=200),
        _pod("test-21", BATCH_MIN, be, "BestEffort", deletion_cost=100),
        _pod("test-22", BATCH_MIN, be, "BestEffort", deletion_cost=200, eviction_cost=200),
        _pod("test-23", BATCH_MIN, be, "BestEffort", deletion_cost=200, eviction_cost=100),
        _pod("test-4", PROD_MAX - 80, lsr, "Guaranteed"),
        _pod("test-7", PROD_MAX - 100, ls, "Guaranteed"),
    ]
    got = [p.name for p in sorted(pods, key=functools.cmp_to_key(pod_order({}, {"cpu": 1, "memory": 1})))]
    want = [
        "test-1",
        "test-12",
        "test-18",
        "test-16",
        "test-19",
        "test-17",
        "test-15",
        "test-21",
        "test-20",
        "test-23",
        "test-22",
        "test-9",
        "test-8",
        "test-11",
        "test-10",
        "test-13",
        "test-14",
        "test-2",
        "test-3",
        "test-7",
        "test-4",
        "test-6",
        "test-5",
    ]
    # Koordinator's sort is not stable: pods equal on every key (16/18 and 17/19) may come in either order.
    tie = {"test-16": "test-18", "test-17": "test-19"}
    assert [tie.get(n, n) for n in got] == [tie.get(n, n) for n in want]


def test_usage_nearest_the_excess_goes_first() -> None:
    # Koordinator's TestSortPods2 idea: the node exceeds its threshold by 3 CPUs; the pod using 3 goes first.
    pods = [_pod(f"p{cpu}", BATCH_MIN, QoSClass.BE, "BestEffort", usage=(cpu * 1000, GI)) for cpu in (2, 3, 4, 5)]
    order = pod_order({"cpu": 3000}, {"cpu": 1})
    assert [p.name for p in sorted(pods, key=functools.cmp_to_key(order))] == ["p3", "p4", "p5", "p2"]


@pytest.mark.parametrize(
    ("requested", "capacity", "want"),
    [
        pytest.param(0, 0, 0.0, id="no-capacity"),
        pytest.param(1, 4, 0.25, id="under"),
        pytest.param(4, 4, 2.0, id="equal-is-best"),
        pytest.param(8, 4, 1.5, id="over-scores-less"),
    ],
)
def test_most_requested_score_pod(requested: int, capacity: int, want: float) -> None:
    assert most_requested_score_pod(requested, capacity) == want


def test_fill_thresholds() -> None:
    absolute = fill_thresholds({"cpu": 30}, {"cpu": 50}, {}, {}, use_deviation=False)
    assert (absolute.low, absolute.high) == ({"cpu": 30, "memory": 100.0}, {"cpu": 50, "memory": 100.0})
    assert absolute.prod_low == {"cpu": 100.0, "memory": 100.0}
    deviation = fill_thresholds({"cpu": 5}, {"cpu": 5}, {}, {}, use_deviation=True)
    assert deviation.low == {"cpu": 5, "memory": 0.0} and deviation.prod_high == {"cpu": 0.0, "memory": 0.0}


def _node(name: str, cpu: int, prod_cpu: int = 0, *, unschedulable: bool = False) -> NodeLoad:
    return NodeLoad(
        name,
        {"cpu": 1000, "memory": 100},
        {"cpu": cpu, "memory": 0},
        {"cpu": prod_cpu, "memory": 0},
        unschedulable=unschedulable,
    )


@pytest.mark.parametrize(
    ("node", "want"),
    [
        pytest.param(_node("cool", 100), "both_low", id="under-both-low"),
        pytest.param(_node("cool-but-prod-hot", 100, 600), "prod_high", id="low-node-prod-over"),
        pytest.param(_node("cool-prod-between", 250, 250), "low", id="low-node-prod-between"),
        pytest.param(_node("hot", 900), "high", id="over-high"),
        pytest.param(_node("middle", 500, 300), "", id="between-both"),
        pytest.param(_node("middle-prod-low", 500), "prod_low", id="between-node-prod-low"),
        pytest.param(_node("middle-prod-hot", 500, 600), "prod_high", id="between-node-prod-over"),
        pytest.param(_node("cordoned", 100, unschedulable=True), "", id="unschedulable-never-low"),
    ],
)
def test_classify(node: NodeLoad, want: str) -> None:
    thresholds = fill_thresholds({"cpu": 30}, {"cpu": 70}, {"cpu": 20}, {"cpu": 50}, use_deviation=False)
    t = node_thresholds(node, thresholds, use_deviation=False)
    assert t == NodeThresholds(
        {"cpu": 300, "memory": 100},
        {"cpu": 700, "memory": 100},
        {"cpu": 200, "memory": 100},
        {"cpu": 500, "memory": 100},
    )
    got = classify([node], {node.name: t})
    found = [k for k in ("low", "high", "prod_low", "prod_high", "both_low") if node.name in getattr(got, k)]
    assert found == ([want] if want else [])


def test_deviation_thresholds_follow_the_average() -> None:
    nodes = [_node("a", 800), _node("b", 200)]
    thresholds = fill_thresholds({"cpu": 10}, {"cpu": 10}, {}, {}, use_deviation=True)
    t = node_thresholds(nodes[0], thresholds, use_deviation=True, average=({"cpu": 50.0}, {}))
    assert (t.low["cpu"], t.high["cpu"]) == (400, 600)
    assert (t.low["memory"], t.high["memory"]) == (100, 100), "0% means unconstrained"


def test_node_usage_score_weights() -> None:
    assert node_usage_score({"cpu": 500, "memory": 100}, {"cpu": 1000, "memory": 100}, {"cpu": 1, "memory": 1}) == 750
    assert node_usage_score({"cpu": 500, "memory": 100}, {"cpu": 1000, "memory": 100}, {"cpu": 1}) == 500
