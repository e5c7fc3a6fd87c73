from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from apis.slo import (
    NodeMetric,
    NodeMetricSpec,
    NodeSLO,
    NodeSLOSpec,
    ResolvedCollectPolicy,
    default_node_slo_spec,
    format_binary,
    format_go_duration,
    format_milli,
    merge_node_slo_spec,
    milli_value,
    parse_go_duration,
    parse_quantity,
    resolve_collect_policy,
)

REPO = Path(__file__).resolve().parents[3]

NODE_METRIC_WIRE = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeMetric",
    "metadata": {"name": "node-1", "resourceVersion": "42"},
    "spec": {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        }
    },
    "status": {
        "updateTime": "2026-01-02T03:04:05Z",
        "nodeMetric": {
            "nodeUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}},
            "aggregatedNodeUsages": [
                {"duration": "5m0s", "usage": {"p95": {"resources": {"cpu": "2", "memory": "3Gi"}}}},
            ],
            "systemUsage": {"resources": {"cpu": "100m", "memory": "100Mi"}},
            "numaUsages": [{"numaNodeID": 0, "nodeUsage": {"resources": {"cpu": "1"}}}],
        },
        "podsMetric": [
            {
                "namespace": "default",
                "name": "p",
                "priority": "koord-prod",
                "qos": "LS",
                "podUsage": {"resources": {"cpu": "500m", "memory": "200Mi"}},
            },
        ],
    },
}


def test_node_metric_round_trip() -> None:
    nm = NodeMetric.model_validate(NODE_METRIC_WIRE)
    assert nm.to_wire() == NODE_METRIC_WIRE


def test_node_metric_typed_surface() -> None:
    nm = NodeMetric.model_validate(NODE_METRIC_WIRE)
    assert nm.status is not None and nm.status.node_metric is not None
    usage = nm.status.node_metric.node_usage
    assert usage is not None
    assert (usage.cpu_milli, usage.memory_bytes) == (1500, 2 * 1024**3)
    p95 = nm.status.aggregated_node_usage("5m", "p95")
    assert p95 is not None and p95.cpu_milli == 2000
    assert nm.status.aggregated_node_usage("30m", "p95") is None
    assert nm.status.update_time == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    pod = nm.status.pods_metric[0]  # type: ignore[index]
    assert (pod.namespace, pod.name, pod.priority, pod.qos) == ("default", "p", "koord-prod", "LS")


def test_populate_by_name() -> None:
    spec = NodeSLOSpec(resource_used_threshold_with_be={"enable": True})  # type: ignore[arg-type]
    assert spec.to_wire() == {"resourceUsedThresholdWithBE": {"enable": True}}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("1500m", Decimal("1.5"), id="milli"),
        pytest.param("2Gi", Decimal(2 * 1024**3), id="binary"),
        pytest.param("1k", Decimal(1000), id="decimal-k"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("0.5", Decimal("0.5"), id="fraction"),
    ],
)
def test_parse_quantity(text: str, want: Decimal) -> None:
    assert parse_quantity(text) == want


def test_quantity_formats() -> None:
    assert [format_milli(v) for v in (0, 1500, 2000, 1)] == ["0", "1500m", "2", "1m"]
    assert [format_binary(v) for v in (0, 1024, 200 * 1024**2, 1000)] == ["0", "1Ki", "200Mi", "1000"]
    assert milli_value("0.0015") == 2  # rounds up like Go


def test_bad_quantity_rejected() -> None:
    with pytest.raises(ValueError, match="quantity"):
        NodeMetric.model_validate({"status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "abc"}}}}})


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(300, "5m0s", id="5m"),
        pytest.param(3600, "1h0m0s", id="1h"),
        pytest.param(45, "45s", id="45s"),
    ],
)
def test_go_duration(seconds: int, text: str) -> None:
    assert format_go_duration(seconds) == text
    assert parse_go_duration(text) == seconds


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param(None, ResolvedCollectPolicy(), id="defaults"),
        pytest.param(
            {"metricCollectPolicy": {"aggregateDurationSeconds": 10, "reportIntervalSeconds": 5}},
            ResolvedCollectPolicy(aggregate_duration_seconds=60, report_interval_seconds=30),
            id="clamped",
        ),
        pytest.param(
            {"metricCollectPolicy": {"nodeAggregatePolicy": {"durations": ["1m", "1h"]}}},
            ResolvedCollectPolicy(aggregate_durations_seconds=(60, 3600)),
            id="durations",
        ),
    ],
)
def test_resolve_collect_policy(spec: dict[str, object] | None, want: ResolvedCollectPolicy) -> None:
    parsed = NodeMetricSpec.model_validate(spec) if spec is not None else None
    assert resolve_collect_policy(parsed) == want


def test_node_slo_defaults() -> None:
    spec = default_node_slo_spec().to_wire()
    assert spec["resourceUsedThresholdWithBE"] == {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }
    be = spec["resourceQOSStrategy"]["beClass"]
    assert be["cpuQOS"]["groupIdentity"] == -1
    assert (be["resctrlQOS"]["catRangeStartPercent"], be["resctrlQOS"]["catRangeEndPercent"]) == (0, 30)
    assert spec["cpuBurstStrategy"]["policy"] == "none"


def test_node_slo_merge_overlays_received() -> None:
    received = NodeSLOSpec.model_validate(
        {
            "resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 50},
            "resourceQOSStrategy": {"beClass": {"memoryQOS": {"enable": True}}},
        }
    )
    merged = merge_node_slo_spec(received).to_wire()
    threshold = merged["resourceUsedThresholdWithBE"]
    assert (
        threshold["enable"],
        threshold["cpuSuppressThresholdPercent"],
        threshold["memoryEvictThresholdPercent"],
    ) == (True, 50, 70)
    be_memory = merged["resourceQOSStrategy"]["beClass"]["memoryQOS"]
    assert (be_memory["enable"], be_memory["wmarkMinAdj"]) == (True, 50)


def test_sample_node_slo_round_trips() -> None:
    for path in sorted((REPO / "config" / "koordlet").glob("*nodeslo*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert NodeSLO.model_validate(data).to_wire() == data, path
