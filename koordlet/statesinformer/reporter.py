"""NodeMetric status, decided as a pure function of usage windows and the pod list.

Matches ``states_nodemetric.go``: nodeUsage and podsMetric are averages over ``aggregateDurationSeconds``;
aggregatedNodeUsages hold avg/p50/p90/p95/p99 for each duration, and a duration whose samples span less
than half of it (cold start) is left out; CPU is written in millicores, memory in bytes (BinarySI).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from apis.slo import (
    AggregatedUsage,
    NodeMetricInfo,
    NodeMetricStatus,
    PodMetricInfo,
    ReclaimableMetric,
    ResolvedCollectPolicy,
    ResourceMap,
    format_binary,
    format_go_duration,
    format_milli,
)
from apis.slo.nodemetric import AGGREGATION_TYPES, HostApplicationMetricInfo
from apis.slo.nodeslo import HostApplicationSpec
from koordlet.statesinformer.pods import PodMeta

CPU, MEMORY = "cpu", "memory"
MEMORY_WITH_PAGE_CACHE = "memoryWithPageCache"
"""The usage-source key of memory including page cache (reported under ``memory``)."""
USAGE_WITH_PAGE_CACHE = "usageWithPageCache"
MEMORY_WITH_HOT_PAGE = "memoryWithHotPage"
"""The usage-source key of memory with hot page cache only (ColdPageCollector; reported under ``memory``)."""
USAGE_WITH_HOT_PAGE_CACHE = "usageWithHotPageCache"
COLD_START_FRACTION = 0.5


class UsageWindow(Protocol):
    """Aggregates of one series over one window (cpu in cores, memory in bytes)."""

    @property
    def count(self) -> int: ...
    @property
    def span(self) -> float: ...
    def get(self, aggregation: str) -> float: ...


class UsageSource(Protocol):
    """What the reporter reads; the metrics advisor implements it over the metric cache."""

    def node_usage(self, resource: str, start: float, end: float) -> UsageWindow | None: ...
    def system_usage(self, resource: str, start: float, end: float) -> UsageWindow | None: ...
    def pod_usage(self, pod_uid: str, resource: str, start: float, end: float) -> UsageWindow | None: ...


def _format(resource: str, value: float) -> str:
    if resource == CPU:
        return format_milli(round(value * 1000))
    return format_binary(round(value))


def _resource_map(values: dict[str, float]) -> ResourceMap:
    return ResourceMap(resources={r: _format(r, v) for r, v in values.items()})


def _avg_map(windows: dict[str, UsageWindow | None]) -> ResourceMap | None:
    values = {r: w.get("avg") for r, w in windows.items() if w is not None}
    return _resource_map(values) if values else None


class _Query(Protocol):
    def __call__(self, resource: str, start: float, end: float) -> UsageWindow | None: ...


def _aggregated(query: _Query, durations: Iterable[int], now: float) -> list[AggregatedUsage] | None:
    out: list[AggregatedUsage] = []
    for duration in durations:
        windows = {r: query(r, now - duration, now) for r in (CPU, MEMORY)}
        warm = {r: w for r, w in windows.items() if w is not None and w.span >= duration * COLD_START_FRACTION}
        if not warm:
            continue
        usage = {agg: _resource_map({r: w.get(agg) for r, w in warm.items()}) for agg in AGGREGATION_TYPES}
        out.append(AggregatedUsage(duration=format_go_duration(duration), usage=usage))
    return out or None


@runtime_checkable
class HostAppUsageSource(Protocol):
    """Usage of a host application (by its NodeSLO name) over a window."""

    def host_app_usage(self, name: str, resource: str, start: float, end: float) -> UsageWindow | None: ...


class ProdPrediction(Protocol):
    """The peak predictor as the reporter sees it: for the pods that have metrics, the prod reclaimable
    and the node peak (cpu in millicores, memory in bytes), or None when it cannot predict yet."""

    def __call__(self, pods: Sequence[PodMeta], now: float) -> tuple[Mapping[str, int], Mapping[str, int]] | None: ...


def _reclaimable(amounts: Mapping[str, int]) -> ReclaimableMetric:
    resources = {CPU: format_milli(amounts.get(CPU, 0)), MEMORY: format_binary(amounts.get(MEMORY, 0))}
    return ReclaimableMetric(resource=ResourceMap(resources=resources))


def build_node_metric_status(
    source: UsageSource,
    pods: Iterable[PodMeta],
    policy: ResolvedCollectPolicy,
    now: float,
    *,
    prediction: ProdPrediction | None = None,
    host_apps: Sequence[HostApplicationSpec] = (),
    host_usage: HostAppUsageSource | None = None,
) -> NodeMetricStatus:
    """The status the koordlet reports at ``now`` (seconds since the epoch). With ``prediction``,
    ``prodReclaimableMetric`` (empty when it cannot predict yet, which the controller reads as 0) and
    ``prodPeakMetric`` are filled for the pods that have metrics, as Koordinator's reporter does.
    ``hostApplicationMetric`` holds the average usage of each of ``host_apps`` (the NodeSLO's) that has
    samples, sorted by name, with its priority and QoS."""
    start = now - policy.aggregate_duration_seconds
    # nodeMemoryCollectPolicy: usageWithPageCache reports node and pod memory with page cache;
    # usageWithHotPageCache needs kidled, which pykoord does not drive: it degrades to the default, as
    # Koordinator does without cold-memory support
    memory = {USAGE_WITH_PAGE_CACHE: MEMORY_WITH_PAGE_CACHE, USAGE_WITH_HOT_PAGE_CACHE: MEMORY_WITH_HOT_PAGE}.get(
        policy.node_memory_collect_policy or "", MEMORY
    )
    node_usage = _avg_map({CPU: source.node_usage(CPU, start, now), MEMORY: source.node_usage(memory, start, now)})
    system_usage = _avg_map({r: source.system_usage(r, start, now) for r in (CPU, MEMORY)})
    pods_metric: list[PodMetricInfo] = []
    measured: list[PodMeta] = []
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        windows = {
            CPU: source.pod_usage(pod.uid, CPU, start, now),
            MEMORY: source.pod_usage(pod.uid, memory, start, now),
        }
        if any(w is None for w in windows.values()):
            continue  # Koordinator skips a pod whose query failed
        measured.append(pod)
        pods_metric.append(
            PodMetricInfo(
                namespace=pod.namespace,
                name=pod.name,
                priority=pod.priority_class.value,
                qos=pod.qos.value,
                pod_usage=_avg_map(windows),
            )
        )
    host_metrics: list[HostApplicationMetricInfo] = []
    if host_usage is not None:
        for app in sorted(host_apps, key=lambda a: a.name or ""):
            if not app.name:
                continue
            windows = {r: host_usage.host_app_usage(app.name, r, start, now) for r in (CPU, MEMORY)}
            if any(w is None for w in windows.values()):
                continue
            host_metrics.append(
                HostApplicationMetricInfo(name=app.name, usage=_avg_map(windows), priority=app.priority, qos=app.qos)
            )
    reclaimable = peak = None
    if prediction is not None:
        predicted = prediction(measured, now)
        reclaimable = ReclaimableMetric() if predicted is None else _reclaimable(predicted[0])
        peak = None if predicted is None else _reclaimable(predicted[1])
    return NodeMetricStatus(
        update_time=datetime.fromtimestamp(int(now), tz=UTC),
        host_application_metric=host_metrics or None,
        prod_reclaimable_metric=reclaimable,
        prod_peak_metric=peak,
        node_metric=NodeMetricInfo(
            node_usage=node_usage or ResourceMap(resources={}),
            aggregated_node_usages=_aggregated(
                lambda r, a, b: source.node_usage(memory if r == MEMORY else r, a, b),
                policy.aggregate_durations_seconds,
                now,
            ),
            system_usage=system_usage,
            aggregated_system_usages=_aggregated(source.system_usage, policy.aggregate_durations_seconds, now),
        ),
        pods_metric=pods_metric,
    )
