"""LoadAwareScheduling plugin: Filter, Score, expiry policy, Reserve/Unreserve/forget, pods bound by
others, node overrides, prod and aggregated paths. Case ids name the rule (Koordinator pkg/scheduler/plugins/loadaware).

Every Filter and Score expectation is checked on both forms: the batch form over all nodes and the
per-node form node by node must agree."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import EventType, ObjectKind
from koord_scheduler.plugins.loadaware import plugin as loadaware
from koord_scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot
from tests.fwtest import scores as batch_scores
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import NOW, node_metric

GI = 1024**3
PASS = "pass"


@dataclass
class Handle:
    snapshot: ClusterSnapshot
    now: float = NOW
    watches: list[tuple[ObjectKind, Callable[..., None]]] = field(default_factory=list)
    forget_handlers: list[Callable[[Pod], None]] = field(default_factory=list)
    reports: list[Callable[[], Any]] = field(default_factory=list)
    pod_watches: list[Callable[..., None]] = field(default_factory=list)

    @property
    def clock(self) -> Callable[[], float]:
        return lambda: self.now

    def watch(self, kind: ObjectKind, handler: Callable[..., None]) -> None:
        self.watches.append((kind, handler))

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None:
        self.forget_handlers.append(handler)

    def watch_pods(self, handler: Callable[..., None]) -> None:
        self.pod_watches.append(handler)

    def add_simulation_report(self, reporter: Callable[[], Any]) -> None:
        self.reports.append(reporter)


def node(name: str, **annotations: str) -> Node:
    b = make_node(name).capacity(cpu="8", memory="32Gi", pods="110")
    for k, v in annotations.items():
        b = b.annotation(k, v)
    return b.build()


def setup(
    nodes: list[Node], metrics: list[Any], pods: Sequence[Pod] = (), *, args: dict[str, Any] | None = None
) -> tuple[LoadAwareScheduling, Handle]:
    handle = Handle(make_snapshot(nodes, pods))
    plugin = loadaware.new(LoadAwareSchedulingArgs.model_validate(args or {}), handle)
    for m in metrics:
        plugin.on_node_metric(EventType.ADDED, None, m)
    return plugin, handle


def outcome(plugin: LoadAwareScheduling, pod: Pod, snap: ClusterSnapshot) -> dict[str, str]:
    """Filter's answer per node name (the batch form), after checking that the per-node form agrees."""
    plugin.prepare_cycle(snap)
    got = {
        name: PASS if status.is_success else status.reasons[0]
        for name, status in filter_statuses(plugin, pod, snap).items()
    }
    per_node = {}
    for pos in snap.node_order().tolist():
        info = snap.info(pos)
        status = plugin.filter(CycleState(), pod, info)
        per_node[info.name] = PASS if status.is_success else status.reasons[0]
    assert per_node == got, "per-node Filter differs from the batch form"
    return got


def scores(plugin: LoadAwareScheduling, pod: Pod, snap: ClusterSnapshot) -> dict[str, int]:
    """Score's answer per node name (the batch form), after checking that the per-node form agrees."""
    plugin.prepare_cycle(snap)
    got = batch_scores(plugin, pod, snap, normalize=False)
    per_node = {snap.info(p).name: plugin.score(CycleState(), pod, snap.info(p)) for p in snap.node_order().tolist()}
    assert per_node == got, "per-node Score differs from the batch form"
    return got


POD = make_pod("in").req(cpu="1", memory="1Gi").build()  # estimate 850m, 0.7Gi


def test_factory_registers_watch_forget_and_report() -> None:
    plugin, handle = setup([node("n1")], [])
    assert [k.kind for k, _ in handle.watches] == ["NodeMetric"]
    assert handle.forget_handlers == [plugin.on_forget_pod]
    assert len(handle.reports) == 1


@pytest.mark.parametrize(
    ("metric", "args", "want"),
    [
        pytest.param(None, {}, PASS, id="no-nodemetric-passes"),
        pytest.param(dict(cpu="4"), {}, PASS, id="below-threshold-passes"),
        # (4350 + 850) / 8000 = 65% -> not above 65.
        pytest.param(dict(cpu="4350m"), {}, PASS, id="usage-plus-incoming-at-threshold-passes"),
        pytest.param(dict(cpu="4400m"), {}, "node(s) cpu usage exceed threshold", id="usage-plus-incoming-over-cpu"),
        pytest.param(dict(cpu="1", memory="31Gi"), {}, "node(s) memory usage exceed threshold", id="memory-over-95"),
        pytest.param(dict(cpu="7"), {"usageThresholds": {"cpu": 0, "memory": 95}}, PASS, id="zero-threshold-off"),
        pytest.param(dict(cpu="7", with_status_metric=False), {}, PASS, id="status-nodemetric-unset-passes"),
        pytest.param(dict(cpu="1", age=180), {}, "node(s) nodeMetric expired", id="expired-at-180s-rejected"),
        pytest.param(dict(cpu="1", age=179), {}, PASS, id="fresh-at-179s"),
        pytest.param(dict(cpu="1", age=None), {}, "node(s) nodeMetric expired", id="no-updatetime-expired"),
        pytest.param(
            dict(cpu="7", age=600),
            {"enableScheduleWhenNodeMetricsExpired": True},
            PASS,
            id="expired-schedulable-passes-without-thresholds-on-stale-data",
        ),
        pytest.param(
            dict(cpu="7", age=600),
            {"filterExpiredNodeMetrics": False},
            "node(s) cpu usage exceed threshold",
            id="filter-expired-off-thresholds-last-report-koordinator",
        ),
    ],
)
def test_filter(metric: dict[str, Any] | None, args: dict[str, Any], want: str) -> None:
    metrics = [node_metric("n1", **metric)] if metric is not None else []
    plugin, handle = setup([node("n1")], metrics, args=args)
    assert outcome(plugin, POD, handle.snapshot) == {"n1": want}


def test_daemonset_pods_bypass() -> None:
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="8")])
    pod = make_pod("ds").req(cpu="1").owner("DaemonSet", "agent").build()
    assert outcome(plugin, pod, handle.snapshot) == {"n1": PASS}


@pytest.mark.parametrize(
    ("annotation", "want"),
    [
        pytest.param({"usageThresholds": {"cpu": 82}}, PASS, id="node-annotation-raises-threshold"),
        pytest.param({"usageThresholds": {"cpu": 80}}, "node(s) cpu usage exceed threshold", id="80.6-rounds-to-81"),
        pytest.param({"usageThresholds": {"cpu": 50}}, "node(s) cpu usage exceed threshold", id="lowers"),
        pytest.param("not json", "node(s) cpu usage exceed threshold", id="malformed-annotation-ignored"),
        pytest.param(
            {"aggregatedUsage": {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95"}},
            "node(s) cpu aggregated usage exceed threshold",
            id="node-aggregated-profile-p95",
        ),
    ],
)
def test_node_usage_thresholds_annotation(annotation: Any, want: str) -> None:
    text = annotation if isinstance(annotation, str) else json.dumps(annotation)
    n1 = node("n1", **{"scheduling.koordinator.sh/usage-thresholds": text})
    # usage 5.6 + 0.85 = 80.6% -> 81; p95 over 30 min: 6 + 0.85 = 85.6%
    metric = node_metric("n1", cpu="5600m", aggregated={"30m0s": {"p95": {"cpu": "6"}}})
    plugin, handle = setup([n1], [metric])
    assert outcome(plugin, POD, handle.snapshot) == {"n1": want}


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        # Prod usage is the prod pod's reported 1 cpu (node usage 3): (1000 + 850) / 8000 = 23% > 20.
        pytest.param(
            make_pod("p").req(cpu="1").priority(9500).build(),
            "node(s) cpu usage exceed threshold",
            id="prod-pod-prod-usage",
        ),
        pytest.param(make_pod("b").req(cpu="1").priority(5500).build(), PASS, id="batch-pod-node-usage"),
    ],
)
def test_prod_usage_thresholds(pod: Pod, want: str) -> None:
    running = make_pod("db", "ns").req(cpu="1").priority(9500).node("n1").created("2020-01-01T00:00:00Z").build()
    metric = node_metric("n1", cpu="3", pods=[("ns/db", "1", "1Gi", "koord-prod")])
    plugin, handle = setup([node("n1")], [metric], [running], args={"prodUsageThresholds": {"cpu": 20}})
    assert outcome(plugin, pod, handle.snapshot) == {"n1": want}


def test_score_hand_computed() -> None:
    # cpu: 2000 + 850 = 2850 of 8000 -> (5150 * 100) // 8000 = 64
    # memory: 8Gi + round(0.7Gi) = 9341553460 of 32Gi -> (25018864332 * 100) // 34359738368 = 72
    metrics = [
        node_metric("fresh", cpu="2", memory="8Gi"),
        node_metric("expired", cpu="0", memory="0", age=400),
        node_metric("no-status", with_status_metric=False),
    ]
    nodes = [node(n) for n in ("fresh", "expired", "no-status", "no-metric")]
    plugin, handle = setup(nodes, metrics)
    assert scores(plugin, POD, handle.snapshot) == {"fresh": 68, "expired": 0, "no-status": 0, "no-metric": 0}


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(
            {"dominantResourceWeight": 1, "resourceWeights": {"cpu": 1, "memory": 1}},
            (64 + 72 + 64) // 3,
            id="weights-plus-dominant-min",
        ),
        pytest.param({"dominantResourceWeight": 1}, 64, id="dominant-only-when-no-weights-given"),
    ],
)
def test_score_dominant_resource(args: dict[str, Any], want: int) -> None:
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="2", memory="8Gi")], args=args)
    assert scores(plugin, POD, handle.snapshot) == {"n1": want}


def test_score_target_utilization() -> None:
    # cpu 2000 + 850 = 35.625% of 8: (60 * 35.625 / 40) + 40 = 93.4 -> 93; memory 27.19%: 80.8 -> 81
    args = {"scoringStrategy": {"type": "TargetUtilization", "targetUtilization": {"cpu": 40, "memory": 40}}}
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="2", memory="8Gi")], args=args)
    assert scores(plugin, POD, handle.snapshot) == {"n1": (93 + 81) // 2}


def test_score_aggregated_p95() -> None:
    args = {"aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "5m"}}
    metric = node_metric("n1", cpu="0", memory="8Gi", aggregated={"5m0s": {"p95": {"cpu": "2", "memory": "8Gi"}}})
    plugin, handle = setup([node("n1")], [metric], args=args)
    assert scores(plugin, POD, handle.snapshot) == {"n1": 68}


def test_score_aggregated_window_missing_uses_full_estimates() -> None:
    # Cold start (PR #2239): no 10m window -> base is the sum of full estimates of the pods on the node.
    args = {"aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "10m"}}
    running = make_pod("r", "ns").req(cpu="2").node("n1").build()  # estimate 1700m, 200Mi
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="6", memory="8Gi")], [running], args=args)
    # cpu 1700 + 850 = 2550 -> 68; memory 200Mi + 0.7Gi -> 97
    assert scores(plugin, POD, handle.snapshot) == {"n1": (68 + 97) // 2}


def test_reserve_unreserve_and_forget() -> None:
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="3600m")])
    snap = handle.snapshot
    state = CycleState()
    assert outcome(plugin, POD, snap) == {"n1": PASS}  # 3600 + 850 = 55.6%
    placed = make_pod("a").req(cpu="1", memory="1Gi").node("n1").build()
    snap.add_pod(placed)  # the scheduler assumes, then runs Reserve
    assert plugin.reserve(state, placed, "n1").is_success
    # 3600 + 850 (placed, not yet reported) + 850 (incoming) = 66.25% -> rejected
    assert outcome(plugin, POD, snap) == {"n1": "node(s) cpu usage exceed threshold"}
    plugin.unreserve(state, placed, "n1")
    snap.remove_pod(placed)
    assert outcome(plugin, POD, snap) == {"n1": PASS}
    snap.add_pod(placed)
    plugin.reserve(CycleState(), placed, "n1")
    snap.remove_pod(placed)
    handle.forget_handlers[0](placed)
    assert outcome(plugin, POD, snap) == {"n1": PASS}
    plugin.prepare_cycle(snap)
    assert plugin.cache.get("n1").pods == {}  # type: ignore[union-attr]


def test_pods_bound_by_others_and_deleted_are_picked_up() -> None:
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="3600m")])
    snap = handle.snapshot
    assert outcome(plugin, POD, snap) == {"n1": PASS}
    other = make_pod("other").req(cpu="1").node("n1").build()  # bound by another scheduler, not reported
    snap.add_pod(other)
    assert outcome(plugin, POD, snap) == {"n1": "node(s) cpu usage exceed threshold"}
    snap.remove_pod(other)
    assert outcome(plugin, POD, snap) == {"n1": PASS}


def test_metric_update_and_delete() -> None:
    plugin, handle = setup([node("n1")], [node_metric("n1", cpu="7")])
    assert outcome(plugin, POD, handle.snapshot) == {"n1": "node(s) cpu usage exceed threshold"}
    plugin.on_node_metric(EventType.MODIFIED, None, node_metric("n1", cpu="1"))
    assert outcome(plugin, POD, handle.snapshot) == {"n1": PASS}
    plugin.on_node_metric(EventType.MODIFIED, None, node_metric("n1", cpu="7"))
    plugin.on_node_metric(EventType.DELETED, node_metric("n1", cpu="7"), None)
    assert outcome(plugin, POD, handle.snapshot) == {"n1": PASS}
    assert scores(plugin, POD, handle.snapshot) == {"n1": 0}


def test_metric_before_node_and_node_removal() -> None:
    handle = Handle(ClusterSnapshot(initial_capacity=1))
    plugin = loadaware.new(LoadAwareSchedulingArgs(), handle)
    plugin.on_node_metric(EventType.ADDED, None, node_metric("late", cpu="7"))
    for i in range(5):  # grow the snapshot past its capacity
        handle.snapshot.upsert_node(node(f"n{i}"))
    handle.snapshot.upsert_node(node("late"))
    assert outcome(plugin, POD, handle.snapshot)["late"] == "node(s) cpu usage exceed threshold"
    handle.snapshot.remove_node("late")
    handle.snapshot.upsert_node(node("reuses-position"))
    assert outcome(plugin, POD, handle.snapshot)["reuses-position"] == PASS


def test_reasons_across_many_nodes() -> None:
    nodes = [node(f"n{i}") for i in range(6)]
    metrics = [
        node_metric("n0", cpu="1"),
        node_metric("n1", cpu="7"),
        node_metric("n2", cpu="1", memory="31Gi"),
        node_metric("n3", cpu="1", age=999),
        node_metric("n4", cpu="7", age=999),
    ]
    plugin, handle = setup(nodes, metrics)
    assert outcome(plugin, POD, handle.snapshot) == {
        "n0": PASS,
        "n1": "node(s) cpu usage exceed threshold",
        "n2": "node(s) memory usage exceed threshold",
        "n3": "node(s) nodeMetric expired",
        "n4": "node(s) nodeMetric expired",
        "n5": PASS,
    }


def test_simulation_report() -> None:
    _plugin, handle = setup([node("n1"), node("n2")], [node_metric("n1", cpu="2", memory="8Gi")])
    title, rows = handle.reports[0]()
    assert "LoadAwareScheduling" in title
    assert rows[0] == {
        "node": "n1",
        "nodeMetric": "fresh (30s old)",
        "cpu requested": "0 (0%)",
        "cpu usage": "2 (25%)",
        "cpu estimated": "2 (25%)",
        "memory requested": "0 (0%)",
        "memory usage": "8Gi (25%)",
        "memory estimated": "8Gi (25%)",
        "pods estimated": 0,
    }
    assert rows[1]["nodeMetric"] == "missing"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({}, id="defaults"),
        pytest.param({"filterExpiredNodeMetrics": False, "dominantResourceWeight": 2}, id="stale-used-dominant"),
        pytest.param({"enableScheduleWhenNodeMetricsExpired": True}, id="expired-schedulable"),
        pytest.param(
            {"scoringStrategy": {"type": "TargetUtilization", "targetUtilization": {"cpu": 50, "memory": 100}}},
            id="target-utilization",
        ),
        pytest.param(
            {
                "prodUsageThresholds": {"cpu": 30},
                "scoreAccordingProdUsage": True,
                "aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95"},
            },
            id="prod-and-aggregated",
        ),
    ],
)
def test_per_node_forms_match_batch_forms(args: dict[str, Any]) -> None:
    """Filter/Score node by node (the runtime's form for the few nodes that changed) give the batch
    forms' answers, on random rows: fresh, expired, without nodeMetric, prod and non-prod pods."""
    rng = random.Random(7)
    nodes = [node(f"n{i}") for i in range(60)]
    metrics = [
        node_metric(
            f"n{i}",
            cpu=f"{rng.randint(0, 9000)}m",
            memory=f"{rng.randint(0, 34000)}Mi",
            age=rng.choice([10, 10, 10, 200, None]),
            aggregated={"30m0s": {"p95": {"cpu": f"{rng.randint(0, 8000)}m"}}},
            pods=[("ns/r", "500m", "1Gi", rng.choice(["koord-prod", "koord-batch"]))],
        )
        for i in range(55)
    ]
    running = [make_pod("r", "ns").req(cpu="1").priority(9500).node(f"n{i}").build() for i in range(0, 60, 3)]
    plugin, handle = setup(nodes, metrics, running[:1], args=args)
    snap = handle.snapshot
    order = snap.node_order()
    for pod in (POD, make_pod("p").req(cpu="700m", memory="3Gi").priority(9500).build()):
        whole = plugin.filter_nodes(CycleState(), pod, snap, order)
        whole_scores = plugin.score_nodes(CycleState(), pod, snap, order)
        state = CycleState()
        for i, pos in enumerate(order.tolist()):
            status = plugin.filter(state, pod, snap.info(pos))
            assert status.is_success == bool(whole.passed[i]), i
            if not status.is_success:
                assert status == whole.status_of(i)
            assert plugin.score(state, pod, snap.info(pos)) == int(whole_scores[i]), i
        assert not whole.passed.all() and whole.passed.any()


def test_memoised_estimates_match_estimate_pod_and_signs_are_stable() -> None:
    """Estimates are memoised per pod template: pods differing only in what the estimator reads
    (priority-class label, priority, QoS label, limits, the customisation annotation) still get their
    own estimate, identical pods sign alike, and DaemonSet ownership is per pod."""
    from koord_scheduler.plugins.loadaware.estimator import (
        ANNOTATION_ESTIMATED_SCALING_FACTORS,
        estimate_pod,
        is_daemonset_pod,
    )

    plugin, handle = setup(
        [node("n0")], [node_metric("n0", cpu="1", memory="1Gi")], args={"allowCustomizeEstimation": True}
    )
    base = make_pod("a").req(cpu="1", memory="1Gi")
    pods = [
        base.copy().build(),
        make_pod("b").req(cpu="1", memory="1Gi").build(),
        base.copy().label("koordinator.sh/priority-class", "koord-batch").build(),
        base.copy().priority(5500).build(),
        base.copy().priority(9500).build(),
        base.copy().label("koordinator.sh/qosClass", "BE").build(),
        base.copy().limit(cpu="2", memory="2Gi").build(),
        base.copy().annotation(ANNOTATION_ESTIMATED_SCALING_FACTORS, '{"cpu": 50}').build(),
        base.copy().owner("DaemonSet", "ds").build(),
    ]
    for _ in range(2):  # second round: from the memo
        for pod in pods:
            state = CycleState()
            plugin.filter_nodes(state, pod, handle.snapshot, handle.snapshot.node_order())
            incoming = state.get(loadaware.INCOMING_KEY)
            assert incoming is not None
            want = estimate_pod(pod, plugin.resources, plugin.args.estimated_scaling_factors, allow_customize=True)
            assert incoming.estimate == want
            assert incoming.vector.tolist() == list(want)
            assert incoming.daemonset == is_daemonset_pod(pod)
    assert plugin.sign_pod(pods[0]) == plugin.sign_pod(pods[1])
    first = plugin.sign_pod(pods[0])
    for i in (2, 6, 7, 8):  # batch resources, limits, custom factors, DaemonSet: each signs differently
        assert plugin.sign_pod(pods[i]) != first, i


def test_batch_form_sees_rows_rewritten_by_reserve() -> None:
    """Reserve rewrites rows lazily (records now, arrays at the next batch pass): the batch form, the
    per-node form and a plugin built from scratch with the same pods agree after a burst of Reserves."""
    rng = random.Random(11)
    nodes = [node(f"n{i}") for i in range(40)]
    metrics = [
        node_metric(f"n{i}", cpu=f"{rng.randint(0, 5000)}m", memory=f"{rng.randint(0, 30000)}Mi") for i in range(40)
    ]
    plugin, handle = setup(nodes, metrics)
    snap = handle.snapshot
    order = snap.node_order()
    pod = make_pod("p").req(cpu="700m", memory="3Gi").build()
    plugin.filter_nodes(CycleState(), pod, snap, order)  # arrays written once
    placed = []
    for i in range(30):
        burst = make_pod(f"b{i}").req(cpu="900m", memory="2Gi").build()
        target = f"n{rng.randrange(40)}"
        assert plugin.reserve(CycleState(), burst, target).is_success
        placed.append(make_pod(f"b{i}").req(cpu="900m", memory="2Gi").node(target).build())
    whole = plugin.filter_nodes(CycleState(), pod, snap, order)
    whole_scores = plugin.score_nodes(CycleState(), pod, snap, order)
    for i, pos in enumerate(order.tolist()):
        assert plugin.filter(CycleState(), pod, snap.info(pos)).is_success == bool(whole.passed[i])
        assert plugin.score(CycleState(), pod, snap.info(pos)) == int(whole_scores[i])
    fresh, fresh_handle = setup(nodes, metrics)
    fresh.score_nodes(CycleState(), pod, fresh_handle.snapshot, order)  # synced before Reserve, as above
    for p in placed:
        fresh.reserve(CycleState(), p, p.node_name)
    assert fresh.score_nodes(CycleState(), pod, fresh_handle.snapshot, order).tolist() == whole_scores.tolist()
    assert fresh.filter_nodes(CycleState(), pod, fresh_handle.snapshot, order).passed.tolist() == whole.passed.tolist()
    assert not whole.passed.all() and len(set(whole_scores.tolist())) > 5
