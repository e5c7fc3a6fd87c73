"""Prometheus metrics of the agent, on a registry owned by the agent (no global registry).

Names follow Koordinator's (``pkg/koordlet/metrics``): every metric is ``koordlet_`` prefixed and carries
``node``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric

from koordlet.metriccache import MetricCache, MetricKind
from koordlet.statesinformer import PodMeta


class UsageCollector:
    """Usage gauges computed at scrape time from the newest samples in the cache (no per-tick cost)."""

    def __init__(self, cache: MetricCache, pods: Callable[[], tuple[PodMeta, ...]], node: str, max_age: float) -> None:
        self.cache = cache
        self.pods = pods
        self.node = node
        self.max_age = max_age

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        last, node, max_age = self.cache.last, self.node, self.max_age
        node_cpu = GaugeMetricFamily("koordlet_node_used_cpu_cores", "Node CPU used, cores", labels=["node"])
        node_memory = GaugeMetricFamily(
            "koordlet_node_used_memory_bytes", "Node memory used (total - available)", labels=["node"]
        )
        for family, kind in ((node_cpu, MetricKind.NODE_CPU_USAGE), (node_memory, MetricKind.NODE_MEMORY_USAGE)):
            value = last(kind, "", max_age)
            if value is not None:
                family.add_metric([node], value)
        pod_cpu = GaugeMetricFamily("koordlet_pod_used_cpu_cores", "Pod CPU used, cores", labels=_POD_LABELS)
        pod_memory = GaugeMetricFamily(
            "koordlet_pod_used_memory_bytes", "Pod memory used without page cache", labels=_POD_LABELS
        )
        pod_throttled = GaugeMetricFamily(
            "koordlet_pod_cpu_throttled_ratio", "Pod CPU throttled ratio", labels=_POD_LABELS
        )
        container_throttled = GaugeMetricFamily(
            "koordlet_container_cpu_throttled_ratio",
            "Container CPU throttled ratio (nr_throttled/nr_periods)",
            labels=[*_POD_LABELS, "container_id", "container_name"],
        )
        for pod in self.pods():
            labels = [node, pod.uid, pod.namespace, pod.name]
            for family, kind in (
                (pod_cpu, MetricKind.POD_CPU_USAGE),
                (pod_memory, MetricKind.POD_MEMORY_USAGE),
                (pod_throttled, MetricKind.POD_CPU_THROTTLED),
            ):
                value = last(kind, pod.uid, max_age)
                if value is not None:
                    family.add_metric(labels, value)
            for container in pod.containers:
                if container.container_id is None:
                    continue
                value = last(MetricKind.CONTAINER_CPU_THROTTLED, container.container_id.id, max_age)
                if value is not None:
                    container_throttled.add_metric([*labels, container.container_id.id, container.name], value)
        yield from (node_cpu, node_memory, pod_cpu, pod_memory, pod_throttled, container_throttled)


_POD_LABELS = ["node", "pod_uid", "pod_namespace", "pod_name"]


class KoordletMetrics:
    def __init__(self, registry: CollectorRegistry, node: str) -> None:
        self.registry = registry
        self.node = node
        self.start_time = Gauge("koordlet_start_time", "koordlet start time", ["node"], registry=registry)
        self.collect_errors = Counter(
            "koordlet_collector_errors", "Collector exceptions (logged, not fatal)", ["node"], registry=registry
        )
        self.informer_rejections = Counter(
            "koordlet_informer_rejected_objects",
            "Objects the states informer refused (a pod that does not parse, a NodeSLO out of range, an object "
            "nested too deep to decode): each logged by name and skipped, the last good one kept",
            ["node"],
            registry=registry,
        )
        self.qos_object_errors = Counter(
            "koordlet_qos_object_errors",
            "Failures a QoS strategy contained to one pod or object (that object skipped, the others handled)",
            ["node", "strategy"],
            registry=registry,
        )
        self.plugin_failures = Gauge(
            "koordlet_qos_plugin_failures",
            "Failures of a QoS plugin (it is not restarted)",
            ["node", "plugin"],
            registry=registry,
        )

    def register_usage(self, cache: MetricCache, pods: Callable[[], tuple[PodMeta, ...]], max_age: float) -> None:
        """Serve the usage gauges (``koordlet_node_used_cpu_cores`` ...) from ``cache`` at scrape time."""
        self.registry.register(UsageCollector(cache, pods, self.node, max_age))
