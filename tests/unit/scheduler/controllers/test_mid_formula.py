"""The mid-tier formula: Koordinator's midresource plugin test table, transcribed as facts.

Koordinator ``pkg/slo-controller/noderesource/plugins/midresource/plugin_test.go`` (``TestPluginCalculate``,
``TestPlugin_isDegradeNeeded``): node capacity 100 cores / 210G, allocatable 100 cores / 200G (kubelet
reserves 10G); a koord-prod LS pod requesting 20 cores / 40G and a koord-batch BE pod requesting 15 / 30G,
both Running. Outputs are equal to the millicore and the byte.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from apis.configuration import ColocationStrategy, parse_slo_config, resolve_colocation
from apis.slo.nodemetric_record import NodeMetricRecord, parse_node_metric
from koord_scheduler.scheduler.controllers.midresource import mid_allocatable, mid_inputs
from koord_scheduler.scheduler.controllers.noderesource import wanted_resources
from koord_scheduler.scheduler.controllers.selection import MID_RESOURCE
from tests.builders import make_node, make_pod

G = 10**9
NOW = 1_000_000.0
MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"

NODE = (
    make_node("test-node")
    .capacity(cpu="100", memory="210G")
    .allocatable(cpu="100", memory="200G")
    .capacity({"kubernetes.io/mid-cpu": "20000", "kubernetes.io/mid-memory": "40G"})
    .build()
)
PROD_POD = (
    make_pod("podA", "test")
    .label("koordinator.sh/qosClass", "LS")
    .priority(9000, "koord-prod")
    .req(cpu="20", memory="40G")
    .limit(cpu="20", memory="40G")
    .node("test-node")
    .phase("Running")
    .build()
)
BATCH_POD = (
    make_pod("podB", "test")
    .label("koordinator.sh/qosClass", "BE")
    .priority(5999, "koord-batch")
    .req(cpu="15", memory="30G")
    .limit(cpu="15", memory="30G")
    .node("test-node")
    .phase("Running")
    .build()
)
PODS = [PROD_POD, BATCH_POD]


def metric(
    *,
    usage: tuple[str, str] | None,
    prod: tuple[str, str] = ("10", "20G"),
    reclaimable: tuple[str, str] | str | None = None,
    host_app: tuple[str, str, str] | None = None,
    age: float = 20,
) -> NodeMetricRecord:
    """A NodeMetric status as the Koordinator test writes it (``reclaimable="empty"``: ``{}``)."""
    stamp = datetime.fromtimestamp(NOW - age, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    info: dict[str, Any] = {} if usage is None else {"nodeUsage": {"resources": {"cpu": usage[0], "memory": usage[1]}}}
    status: dict[str, Any] = {
        "updateTime": stamp,
        "nodeMetric": info,
        "podsMetric": [
            {"namespace": "test", "name": "podA", "podUsage": {"resources": {"cpu": prod[0], "memory": prod[1]}}},
            {"namespace": "test", "name": "podB", "podUsage": {"resources": {"cpu": "15", "memory": "20G"}}},
        ],
    }
    if reclaimable == "empty":
        status["prodReclaimableMetric"] = {}
    elif isinstance(reclaimable, tuple):
        status["prodReclaimableMetric"] = {"resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}}
    if host_app is not None:
        status["hostApplicationMetric"] = [
            {
                "name": "app",
                "priority": host_app[2],
                "usage": {"resources": {"cpu": host_app[0], "memory": host_app[1]}},
            }
        ]
    return parse_node_metric({"metadata": {"name": "test-node"}, "status": status})


def strategy(**kwargs: Any) -> ColocationStrategy:
    base = ColocationStrategy(
        enable=True, degrade_time_minutes=10, mid_static_cpu_reserved_percent=10, mid_static_memory_reserved_percent=10
    )
    return dataclasses.replace(base, **kwargs)


@pytest.mark.parametrize(
    ("given", "config", "want", "want_unallocated"),
    [
        pytest.param(
            metric(usage=("20", "45G"), reclaimable=("10", "15G")),
            strategy(),
            (10_000, 15 * G),
            (80_000, 160 * G),
            id="calculate-correctly-when-node-metric-is-valid",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable=("15", "30G")),
            strategy(mid_cpu_threshold_percent=10, mid_memory_threshold_percent=20, mid_unallocated_percent=10),
            (10_000, 42 * G),
            (80_000, 160 * G),
            id="prod-reclaimable-exceeds-the-mid-threshold",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable="empty"),
            strategy(),
            (0, 0),
            (80_000, 160 * G),
            id="prod-reclaimable-is-nil",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable=("15", "30G")),
            strategy(
                mid_reclaim_mode="static",
                mid_cpu_threshold_percent=10,
                mid_memory_threshold_percent=20,
                mid_unallocated_percent=10,
            ),
            (10_000, 21 * G),
            None,
            id="static-mode-not-exceeding",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable=("15", "30G")),
            strategy(
                mid_reclaim_mode="static",
                mid_cpu_threshold_percent=10,
                mid_memory_threshold_percent=20,
                mid_unallocated_percent=10,
                mid_static_cpu_reserved_percent=100,
                mid_static_memory_reserved_percent=100,
            ),
            (10_000, 42 * G),
            None,
            id="static-mode-exceeding",
        ),
        pytest.param(
            metric(usage=None, reclaimable=("20", "20G")),
            strategy(),
            (0, 0),
            (80_000, 160 * G),
            id="node-metric-without-usage-gives-nothing",
        ),
        pytest.param(
            metric(usage=("90", "200G"), reclaimable=("20", "20G")),
            strategy(),
            (10_000, 10 * G),
            (80_000, 160 * G),
            id="prod-reclaimable-exceeds-the-node-free-resource",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable="empty", host_app=("5", "15G", "koord-prod")),
            strategy(),
            (0, 0),
            (75_000, 155 * G),
            id="including-prod-host-application-usage",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable="empty", host_app=("5", "15G", "koord-mid")),
            strategy(),
            (0, 0),
            (80_000, 160 * G),
            id="mid-host-application-usage-is-not-counted",
        ),
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable="empty", host_app=("2", "10G", "koord-batch")),
            strategy(),
            (0, 0),
            (80_000, 160 * G),
            id="batch-host-application-usage-is-not-counted",
        ),
        # Not in Koordinator's table: the unallocated share, so that the unallocated amounts above matter.
        pytest.param(
            metric(usage=("30", "50G"), prod=("5", "10G"), reclaimable="empty", host_app=("5", "15G", "koord-prod")),
            strategy(mid_unallocated_percent=50),
            (37_500, 77_500_000_000),
            (75_000, 155 * G),
            id="unallocated-share-after-prod-host-app",
        ),
    ],
)
def test_mid_allocatable(
    given: NodeMetricRecord, config: ColocationStrategy, want: tuple[int, int], want_unallocated: tuple[int, int] | None
) -> None:
    got = mid_allocatable(mid_inputs(NODE, PODS, given), config)
    assert (got.cpu, got.memory) == want
    assert f"mid-cpu {want[0]} " in got.explanation and f"mid-memory {want[1]} " in got.explanation
    if want_unallocated is not None:
        assert f"unallocated {want_unallocated[0]} *" in got.explanation
        assert f"unallocated {want_unallocated[1]} *" in got.explanation


def _config(colocation: dict[str, Any]) -> Any:
    import json

    config, problems = parse_slo_config({"colocation-config": json.dumps(colocation)})
    assert problems == []
    return config


@pytest.mark.parametrize(
    ("given", "want"),
    [
        pytest.param(
            metric(usage=("20", "45G"), reclaimable=("10", "15G"), age=30 * 60),
            {MID_CPU: None, MID_MEMORY: None},
            id="degrade-when-node-metric-is-expired",
        ),
        pytest.param(
            NodeMetricRecord("test-node"), {MID_CPU: None, MID_MEMORY: None}, id="empty-node-metric-status-degrades"
        ),
        pytest.param(
            metric(usage=("20", "40Gi")),
            {MID_CPU: 0, MID_MEMORY: 0},
            id="node-metric-without-prod-reclaimable-does-not-degrade",
        ),
        pytest.param(
            metric(usage=("20", "40Gi"), reclaimable=("10", "20Gi")),
            {MID_CPU: 10_000, MID_MEMORY: 20 * 2**30},
            id="valid-node-metric-does-not-degrade",
        ),
    ],
)
def test_degrade(given: NodeMetricRecord, want: dict[str, int | None]) -> None:
    config = _config({"enable": True, "degradeTimeMinutes": 10})
    got, _, _ = wanted_resources(NODE, PODS, given, config, now=NOW, plugins=frozenset({MID_RESOURCE}))
    assert got == want


def test_mid_config_and_node_labels_resolve() -> None:
    config = _config(
        {
            "enable": True,
            "midReclaimMode": "static",
            "midCPUThresholdPercent": 30,
            "midMemoryThresholdPercent": 40,
            "midUnallocatedPercent": 5,
            "midStaticCPUReservedPercent": 10,
            "midStaticMemoryReservedPercent": 20,
        }
    )
    node = make_node("n").label("node.koordinator.sh/mid-static-cpu-reserved-ratio", "0.57").build()
    got = resolve_colocation(config, node.labels, node.annotations)
    assert (
        got.mid_reclaim_mode,
        got.mid_cpu_threshold_percent,
        got.mid_memory_threshold_percent,
        got.mid_unallocated_percent,
        got.mid_static_cpu_reserved_percent,
        got.mid_static_memory_reserved_percent,
    ) == ("static", 30, 40, 5, 56, 20)


def test_mid_threshold_out_of_range_is_refused() -> None:
    _, problems = parse_slo_config({"colocation-config": '{"enable": true, "midCPUThresholdPercent": 101}'})
    assert [p.key for p in problems] == ["colocation-config"]
    assert "midCPUThresholdPercent" in problems[0].message
