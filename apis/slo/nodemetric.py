"""``NodeMetric`` (``slo.koordinator.sh/v1alpha1``): what the koordlet reports about its node.

koord-manager creates it and fills ``spec``; the koordlet writes ``status`` through the status subresource;
the scheduler's LoadAwareScheduling plugin and koord-manager read it. Field names and types follow
``apis/slo/v1alpha1/nodemetric_types.go``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from apis.slo.common import API_VERSION, ObjectMeta, ResourceMap, WireModel, parse_go_duration

DEFAULT_AGGREGATE_DURATION_SECONDS = 300
DEFAULT_REPORT_INTERVAL_SECONDS = 60
MIN_AGGREGATE_DURATION_SECONDS = 60
MIN_REPORT_INTERVAL_SECONDS = 30
DEFAULT_AGGREGATE_DURATIONS = ("5m0s", "10m0s", "30m0s")

AggregationType = Literal["avg", "p50", "p90", "p95", "p99", "last", "count"]
AGGREGATION_TYPES: tuple[AggregationType, ...] = ("avg", "p50", "p90", "p95", "p99")
"""The quantiles written in ``aggregatedNodeUsages[].usage`` (Koordinator leaves out last and count)."""


class AggregatePolicy(WireModel):
    durations: list[str] | None = None


class NodeMetricCollectPolicy(WireModel):
    aggregate_duration_seconds: int | None = None
    report_interval_seconds: int | None = None
    node_aggregate_policy: AggregatePolicy | None = None
    node_memory_collect_policy: str | None = None


class NodeMetricSpec(WireModel):
    metric_collect_policy: NodeMetricCollectPolicy | None = None


class ResolvedCollectPolicy(WireModel):
    """``spec.metricCollectPolicy`` with the koordlet's defaults and clamps applied (plain numbers)."""

    aggregate_duration_seconds: int = DEFAULT_AGGREGATE_DURATION_SECONDS
    report_interval_seconds: int = DEFAULT_REPORT_INTERVAL_SECONDS
    aggregate_durations_seconds: tuple[int, ...] = (300, 600, 1800)
    node_memory_collect_policy: str = "usageWithoutPageCache"


def resolve_collect_policy(spec: NodeMetricSpec | None) -> ResolvedCollectPolicy:
    """Defaults 300 s / 60 s / [5m, 10m, 30m]; aggregate ≥ 60 s, report ≥ 30 s, as the koordlet clamps."""
    policy = spec.metric_collect_policy if spec else None
    if policy is None:
        return ResolvedCollectPolicy()
    aggregate = policy.aggregate_duration_seconds or DEFAULT_AGGREGATE_DURATION_SECONDS
    report = policy.report_interval_seconds or DEFAULT_REPORT_INTERVAL_SECONDS
    durations = (policy.node_aggregate_policy.durations if policy.node_aggregate_policy else None) or list(
        DEFAULT_AGGREGATE_DURATIONS
    )
    return ResolvedCollectPolicy(
        aggregate_duration_seconds=max(aggregate, MIN_AGGREGATE_DURATION_SECONDS),
        report_interval_seconds=max(report, MIN_REPORT_INTERVAL_SECONDS),
        aggregate_durations_seconds=tuple(int(parse_go_duration(d)) for d in durations),
        node_memory_collect_policy=policy.node_memory_collect_policy or "usageWithoutPageCache",
    )


class AggregatedUsage(WireModel):
    """Quantiles of node (or system) usage over one duration. ``usage`` keys are avg/p50/p90/p95/p99."""

    usage: dict[str, ResourceMap] | None = None
    duration: str | None = None


class NUMAMetricInfo(WireModel):
    numa_node_id: int | None = Field(default=None, alias="numaNodeID", json_schema_extra={"format": "int32"})
    node_usage: ResourceMap | None = None
    system_usage: ResourceMap | None = None


class NodeMetricInfo(WireModel):
    node_usage: ResourceMap | None = None
    aggregated_node_usages: list[AggregatedUsage] | None = None
    system_usage: ResourceMap | None = None
    aggregated_system_usages: list[AggregatedUsage] | None = None
    numa_usages: list[NUMAMetricInfo] | None = None


class PodMetricInfo(WireModel):
    namespace: str | None = None
    name: str | None = None
    pod_usage: ResourceMap | None = None
    priority: str | None = None
    qos: str | None = None
    extensions: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )


class HostApplicationMetricInfo(WireModel):
    name: str | None = None
    usage: ResourceMap | None = None
    priority: str | None = None
    qos: str | None = None


class ReclaimableMetric(WireModel):
    resource: ResourceMap | None = None


class NodeMetricStatus(WireModel):
    update_time: datetime | None = None
    node_metric: NodeMetricInfo | None = None
    pods_metric: list[PodMetricInfo] | None = None
    host_application_metric: list[HostApplicationMetricInfo] | None = None
    prod_reclaimable_metric: ReclaimableMetric | None = None
    prod_peak_metric: ReclaimableMetric | None = None

    def aggregated_node_usage(self, duration: str, aggregation: str) -> ResourceMap | None:
        """``aggregatedNodeUsages[duration].usage[aggregation]``, or ``None`` (absent or cold start)."""
        info = self.node_metric
        if info is None or info.aggregated_node_usages is None:
            return None
        for item in info.aggregated_node_usages:
            if item.duration is not None and parse_go_duration(item.duration) == parse_go_duration(duration):
                return (item.usage or {}).get(aggregation)
        return None


class NodeMetric(WireModel):
    """A NodeMetric object; cluster scoped, named after its node."""

    api_version: str = API_VERSION
    kind: str = "NodeMetric"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeMetricSpec | None = None
    status: NodeMetricStatus | None = None
