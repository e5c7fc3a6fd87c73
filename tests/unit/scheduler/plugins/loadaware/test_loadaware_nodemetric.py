"""NodeMetric lean parser: the fields LoadAwareScheduling reads (Koordinator
pkg/scheduler/plugins/loadaware) and errors."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core.errors import ParseError
from apis.slo import NodeMetric
from koord_scheduler.plugins.loadaware.nodemetric import PodUsage, parse_node_metric
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import NOW, node_metric_obj

GI = 1024**3


def test_parse_full() -> None:
    obj = node_metric_obj(
        "n1",
        cpu="1500m",
        memory="4Gi",
        pods=[("ns/a", "500m", "1Gi", "koord-prod"), ("ns/b", "100m", "0", "koord-batch")],
        aggregated={"5m0s": {"p95": {"cpu": "2"}}, "30m0s": {"p95": {"cpu": "3"}, "avg": {}}},
        report_interval=30,
    )
    NodeMetric.model_validate(obj)  # the same object is valid on the wire model
    got = parse_node_metric(obj)
    assert got.name == "n1"
    assert got.update_time == NOW - 30
    assert got.report_interval == 30.0
    assert got.has_node_metric
    assert dict(got.node_usage) == {"cpu": 1500, "memory": 4 * GI}
    assert dict(got.aggregated) == {
        ("p95", 300.0): {"cpu": 2000},
        ("p95", 1800.0): {"cpu": 3000},
        ("p95", 0.0): {"cpu": 3000},
    }
    assert dict(got.pods) == {
        "ns/a": PodUsage({"cpu": 500, "memory": GI}, prod=True),
        "ns/b": PodUsage({"cpu": 100, "memory": 0}, prod=False),
    }


def test_defaults_when_absent() -> None:
    got = parse_node_metric(node_metric_obj("n1", age=None, report_interval=None, with_status_metric=False))
    assert (got.update_time, got.report_interval, got.has_node_metric, dict(got.node_usage)) == (None, 60.0, False, {})


@pytest.mark.parametrize(
    ("patch", "want_field"),
    [
        pytest.param({"status": {"updateTime": "yesterday"}}, "status.updateTime", id="bad-time"),
        pytest.param(
            {"status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1x"}}}}},
            "status.nodeMetric.nodeUsage.resources.cpu",
            id="bad-quantity",
        ),
        pytest.param(
            {"status": {"nodeMetric": {"aggregatedNodeUsages": [{"duration": "five", "usage": {}}]}}},
            "status.nodeMetric.aggregatedNodeUsages[0].duration",
            id="bad-duration",
        ),
        pytest.param({"metadata": {}}, "metadata.name", id="no-name"),
        pytest.param(
            {"spec": {"metricCollectPolicy": {"reportIntervalSeconds": "60"}}},
            "spec.metricCollectPolicy.reportIntervalSeconds",
            id="bad-interval",
        ),
    ],
)
def test_errors_name_the_field(patch: dict[str, Any], want_field: str) -> None:
    obj = {"kind": "NodeMetric", "metadata": {"name": "n1"}, **patch}
    with pytest.raises(ParseError) as err:
        parse_node_metric(obj)
    assert err.value.field == want_field
