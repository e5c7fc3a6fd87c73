"""Prometheus metrics of the agent, on a registry owned by the agent (no global registry).

Names follow Koordinator's (``pkg/koordlet/metrics``): every metric is ``koordlet_`` prefixed and carries
``node``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from koordlet.metriccache import MetricCache, MetricKind
from koordlet.statesinformer import PodMeta


class KoordletMetrics:
    def __init__(self, registry: CollectorRegistry, node: str) -> None:
        self.registry = registry
        self.node = node
        pod_labels = ["node", "pod_uid", "pod_namespace", "pod_name"]
        container_labels = [*pod_labels, "container_id", "container_name"]
        self.start_time = Gauge("koordlet_start_time", "koordlet start time", ["node"], registry=registry)
        self.node_cpu = Gauge(
            "koordlet_node_used_cpu_cores", "Node CPU used, cores", ["node"], registry=registry
        )
        self.node_memory = Gauge(
            "koordlet_node_used_memory_bytes",
            "Node memory used (total - available)",
            ["node"],
            registry=registry,
        )
        self.pod_cpu = Gauge(
            "koordlet_pod_used_cpu_cores", "Pod CPU used, cores", pod_labels, registry=registry
        )
        self.pod_memory = Gauge(
            "koordlet_pod_used_memory_bytes",
            "Pod memory used without page cache",
            pod_labels,
            registry=registry,
        )
        self.container_throttled = Gauge(
            "koordlet_container_cpu_throttled_ratio",
            "Container CPU throttled ratio (nr_throttled/nr_periods)",
            container_labels,
            registry=registry,
        )
        self.pod_throttled = Gauge(
            "koordlet_pod_cpu_throttled_ratio", "Pod CPU throttled ratio", pod_labels, registry=registry
        )
        self.collect_errors = Counter(
            "koordlet_collector_errors",
            "Collector exceptions (logged, not fatal)",
            ["node"],
            registry=registry,
        )
        self.plugin_failures = Gauge(
            "koordlet_qos_plugin_failures",
            "Failures of a QoS plugin (it is not restarted)",
            ["node", "plugin"],
            registry=registry,
        )
        self.node_metric_reports = Counter(
            "koordlet_node_metric_reports", "NodeMetric status writes", ["node", "status"], registry=registry
        )

    def update_usage(self, cache: MetricCache, pods: tuple[PodMeta, ...], max_age: float) -> None:
        """Set the usage gauges from the newest samples (at most ``max_age`` seconds old)."""
        node = self.node
        for gauge, kind in (
            (self.node_cpu, MetricKind.NODE_CPU_USAGE),
            (self.node_memory, MetricKind.NODE_MEMORY_USAGE),
        ):
            value = cache.last(kind, "", max_age)
            if value is not None:
                gauge.labels(node=node).set(value)
        for gauge in (self.pod_cpu, self.pod_memory, self.pod_throttled, self.container_throttled):
            gauge.clear()
        for pod in pods:
            labels = {"node": node, "pod_uid": pod.uid, "pod_namespace": pod.namespace, "pod_name": pod.name}
            for gauge, kind in (
                (self.pod_cpu, MetricKind.POD_CPU_USAGE),
                (self.pod_memory, MetricKind.POD_MEMORY_USAGE),
                (self.pod_throttled, MetricKind.POD_CPU_THROTTLED),
            ):
                value = cache.last(kind, pod.uid, max_age)
                if value is not None:
                    gauge.labels(**labels).set(value)
            for container in pod.containers:
                if container.container_id is None:
                    continue
                value = cache.last(MetricKind.CONTAINER_CPU_THROTTLED, container.container_id.id, max_age)
                if value is not None:
                    self.container_throttled.labels(
                        **labels, container_id=container.container_id.id, container_name=container.name
                    ).set(value)
