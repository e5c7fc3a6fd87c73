"""The colocation controllers against an in-memory API: what is written, when, and what is not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers.api import ConfigMapRecord, MemoryControllerApi
from koord_scheduler.scheduler.controllers.decide import NodeSLORecord
from koord_scheduler.scheduler.controllers.runner import ColocationControllers
from tests.builders import make_node, make_pod

GI = 1024**3
NOW = 1_000_000.0
CHART = {"colocation-config": '{"enable": true}', "resource-threshold-config": '{"clusterStrategy": {"enable": true}}'}


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def metric_obj(
    name: str, *, age: float, cpu: str = "500m", memory: str = "2Gi", with_spec: bool = True
) -> dict[str, Any]:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(NOW - age, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    policy = {
        "aggregateDurationSeconds": 300,
        "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
    spec = {"metricCollectPolicy": policy} if with_spec else {}
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "updateTime": stamp,
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": cpu, "memory": memory}},
                "systemUsage": {"resources": {"cpu": cpu, "memory": memory}},
            },
        },
    }


def setup(
    config: dict[str, str] | None = CHART, *, with_spec: bool = True
) -> tuple[ColocationControllers, MemoryControllerApi, Clock]:
    api, clock = MemoryControllerApi(), Clock()
    controllers = ColocationControllers(api, clock=clock)
    if config is not None:
        controllers.on_config_map(ConfigMapRecord("koordinator-system", "slo-controller-config", "u1", config))
    controllers.on_node(EventType.ADDED, None, make_node("n1").capacity(cpu="10", memory="40Gi").build())
    controllers.on_object(
        "NodeMetric", EventType.ADDED, None, parse_node_metric(metric_obj("n1", age=30, with_spec=with_spec))
    )
    return controllers, api, clock


async def test_first_pass_creates_everything() -> None:
    controllers, api, _ = setup(with_spec=False)
    assert await controllers.reconcile_pending() == 3
    by_controller = {w.controller: w for w in api.writes}
    assert by_controller["nodemetric"].verb == "PATCH"  # the koordlet's NodeMetric had no collect policy
    assert by_controller["nodemetric"].body["spec"]["metricCollectPolicy"] == {
        "aggregateDurationSeconds": 300,
        "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
    assert by_controller["nodeslo"].verb == "POST"
    assert by_controller["nodeslo"].body["spec"]["resourceUsedThresholdWithBE"]["enable"] is True
    status = by_controller["noderesource"].body["status"]
    # 10000 - 4000 - 500 = 5500 milli; 40Gi - 14Gi - 2Gi = 24Gi; no prodReclaimableMetric yet: mid 0
    assert status["allocatable"] == {
        "kubernetes.io/batch-cpu": "5500",
        "kubernetes.io/batch-memory": str(24 * GI),
        "kubernetes.io/mid-cpu": "0",
        "kubernetes.io/mid-memory": "0",
    }
    assert status["capacity"] == status["allocatable"]
    # nothing more to do: the local indexes carry the writes until the watch echoes them
    controllers.mark_all()
    assert await controllers.reconcile_pending() == 0


async def test_small_changes_are_gated_until_the_interval() -> None:
    controllers, api, clock = setup()
    await controllers.reconcile_pending()
    api.writes.clear()
    clock.now += 60
    controllers.on_object(
        "NodeMetric", EventType.MODIFIED, None, parse_node_metric(metric_obj("n1", age=0, cpu="900m"))
    )  # 5500 -> 5100, 7 %
    assert await controllers.reconcile_pending() == 0
    clock.now += 300
    controllers.on_object(
        "NodeMetric", EventType.MODIFIED, None, parse_node_metric(metric_obj("n1", age=-300, cpu="900m"))
    )
    assert await controllers.reconcile_pending() == 1
    assert api.writes[0].body["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "5100"


async def test_stale_metric_withdraws_batch_resources_by_timer() -> None:
    controllers, api, clock = setup()
    await controllers.reconcile_pending()
    api.writes.clear()
    clock.now += 15 * 60 - 30 + 2  # the metric is now 15 min + 2 s old; no event arrives
    controllers._fire_timers(clock.now)
    assert await controllers.reconcile_pending() == 1
    assert api.writes[0].body["status"]["allocatable"] == {
        "kubernetes.io/batch-cpu": None,
        "kubernetes.io/batch-memory": None,
        "kubernetes.io/mid-cpu": None,
        "kubernetes.io/mid-memory": None,
    }


async def test_a_bind_marks_its_node_only_when_the_node_has_a_node_metric() -> None:
    controllers, api, _ = setup()
    controllers.on_node(EventType.ADDED, None, make_node("bare").capacity(cpu="10", memory="40Gi").build())
    await controllers.reconcile_pending()
    api.writes.clear()
    for node in ("n1", "bare"):
        controllers.on_pod(EventType.MODIFIED, None, make_pod(f"on-{node}").req(cpu="2").node(node).build())
    # n1's batch resources follow its pods; "bare" got a NodeMetric from the nodemetric controller that no
    # koordlet has reported into, so its batch resources are withdrawn whatever its pods.
    assert "bare" in controllers.node_metrics
    assert controllers._dirty["noderesource"] == {"n1"}


async def test_kubelet_reset_is_reapplied() -> None:
    controllers, api, _ = setup()
    await controllers.reconcile_pending()
    api.writes.clear()
    controllers.on_node(
        EventType.MODIFIED, controllers.nodes["n1"], make_node("n1").capacity(cpu="10", memory="40Gi").build()
    )
    assert await controllers.reconcile_pending() == 1
    assert api.writes[0].controller == "noderesource"


async def test_without_config_map_hand_written_node_slo_is_left_alone() -> None:
    controllers, api, _ = setup(config=None)
    controllers.on_object("NodeSLO", EventType.ADDED, None, NodeSLORecord("n1", json.dumps({"custom": 1})))
    await controllers.reconcile_pending()
    assert [w.controller for w in api.writes] == []  # colocation off: no batch keys to remove either


async def test_invalid_key_warns_and_keeps_others() -> None:
    controllers, api, _ = setup()
    await controllers.reconcile_pending()
    api.writes.clear()
    bad = {
        **CHART,
        "resource-threshold-config": '{"clusterStrategy": {"cpuSuppressThresholdPercent": 150}}',
        "cpu-burst-config": '{"clusterStrategy": {"policy": "auto"}}',
    }
    controllers.on_config_map(ConfigMapRecord("koordinator-system", "slo-controller-config", "u1", bad))
    assert api.warnings == [
        (
            "SLOCfgUnmarshalFailed",
            "resource-threshold-config: clusterStrategy."
            "cpuSuppressThresholdPercent: 150 is out of range (must be at most 100)",
        )
    ]
    await controllers.reconcile_pending()
    [write] = api.writes
    spec = write.body[0]["value"]
    assert spec["cpuBurstStrategy"]["policy"] == "auto"
    assert spec["resourceUsedThresholdWithBE"]["enable"] is True
    assert spec["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65


async def test_deleted_node_removes_its_objects() -> None:
    controllers, api, _ = setup()
    await controllers.reconcile_pending()
    api.writes.clear()
    controllers.on_node(EventType.DELETED, controllers.nodes["n1"], None)
    await controllers.reconcile_pending()
    assert sorted((w.controller, w.verb) for w in api.writes) == [("nodemetric", "DELETE"), ("nodeslo", "DELETE")]


@pytest.mark.parametrize(
    ("since_last", "spread", "want_write"),
    [
        pytest.param(330.0, 0.0, True, id="past-300s"),
        pytest.param(330.0, 0.2, False, id="spread-stretches-to-360s"),
        pytest.param(361.0, 0.2, True, id="past-the-stretched-interval"),
        pytest.param(200.0, 0.0, False, id="within-interval-small-change"),
    ],
)
def test_time_gate(since_last: float, spread: float, want_write: bool) -> None:
    from apis.configuration import parse_slo_config
    from apis.slo.nodemetric_record import parse_node_metric as parse
    from koord_scheduler.scheduler.controllers.noderesource import decide_node_resources

    config, _ = parse_slo_config(CHART)
    node = (
        make_node("n1")
        .capacity(
            {
                "cpu": "10",
                "memory": "40Gi",
                "kubernetes.io/batch-cpu": "5300",
                "kubernetes.io/batch-memory": str(24 * GI),
                "kubernetes.io/mid-cpu": "0",
                "kubernetes.io/mid-memory": "0",
            }
        )
        .annotation("node.koordinator.sh/cpu-normalization-ratio", "1.00")
        .build()
    )
    decision = decide_node_resources(
        node, [], parse(metric_obj("n1", age=10)), config, now=NOW, last_sync=NOW - since_last, interval_spread=spread
    )
    assert (decision.write is not None) is want_write  # 5300 -> 5500 is a 3.8 % change
    assert decision.recheck_at == NOW - 10 + 15 * 60 + 1


async def test_a_missing_crd_is_one_warning_not_one_per_node(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from koord_scheduler.scheduler.controllers.decide import NODESLOS
    from kubeapi.http import ApiError

    controllers, api, clock = setup()
    for name in ("n2", "n3"):
        controllers.on_node(EventType.ADDED, None, make_node(name).capacity(cpu="10", memory="40Gi").build())
    missing = ApiError(
        404, "NotFound", "the server could not find the requested resource", method="POST", path=NODESLOS
    )
    api.fail[NODESLOS] = missing
    caplog.set_level(logging.DEBUG, logger="koord_scheduler")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "nodeslo" in r.getMessage()]

    await controllers.reconcile_pending()
    assert len(warnings()) == 1 and "is its CRD installed?" in warnings()[0]
    assert sum("POST" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records) == 2
    clock.now += 60
    controllers._fire_timers(clock.now)
    await controllers.reconcile_pending()
    assert len(warnings()) == 1  # still failing: quiet
    assert sum("POST" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records) == 5
    del api.fail[NODESLOS]
    clock.now += 60
    controllers._fire_timers(clock.now)
    await controllers.reconcile_pending()
    assert sum(w.controller == "nodeslo" for w in api.writes) == 3
    api.fail[NODESLOS] = missing
    controllers.on_node(EventType.ADDED, None, make_node("n4").capacity(cpu="10", memory="40Gi").build())
    await controllers.reconcile_pending()
    assert len(warnings()) == 2  # a success in between: the next failure is news again
