"""NodeMetric builders for the LoadAwareScheduling tests."""

from __future__ import annotations

from typing import Any

from koord_scheduler.plugins.loadaware.nodemetric import NodeMetricRecord, parse_node_metric

NOW = 1_767_225_600.0
"""2026-01-01T00:00:00Z, the fake clock."""


def rfc3339(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_metric_obj(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    age: float | None = 30.0,
    pods: list[tuple[str, str, str, str]] = (),  # type: ignore[assignment]
    aggregated: dict[str, dict[str, dict[str, str]]] | None = None,
    report_interval: int | None = 60,
    with_status_metric: bool = True,
) -> dict[str, Any]:
    """A NodeMetric reported ``age`` seconds before :data:`NOW` (None: no updateTime).

    ``pods`` are (namespace/name, cpu, memory, priority); ``aggregated`` maps a duration ("5m0s") to
    {type: {resource: quantity}}.
    """
    status: dict[str, Any] = {}
    if age is not None:
        status["updateTime"] = rfc3339(NOW - age)
    if with_status_metric:
        usage = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        info: dict[str, Any] = {"nodeUsage": {"resources": usage}}
        if aggregated:
            info["aggregatedNodeUsages"] = [
                {"duration": d, "usage": {t: {"resources": r} for t, r in by_type.items()}}
                for d, by_type in aggregated.items()
            ]
        status["nodeMetric"] = info
    if pods:
        status["podsMetric"] = [
            {
                "namespace": key.split("/")[0],
                "name": key.split("/")[1],
                "priority": priority,
                "podUsage": {"resources": {"cpu": pcpu, "memory": pmem}},
            }
            for key, pcpu, pmem, priority in pods
        ]
    spec: dict[str, Any] = {}
    if report_interval is not None:
        spec = {"metricCollectPolicy": {"reportIntervalSeconds": report_interval}}
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def node_metric(name: str, **kwargs: Any) -> NodeMetricRecord:
    return parse_node_metric(node_metric_obj(name, **kwargs))
