"""The LowNodeLoad Balance plugin: from Nodes, Pods and NodeMetrics to planned migrations
(Koordinator ``pkg/descheduler/framework/plugins/loadaware/low_node_load.go`` ``Balance``).

Per node pool, in order (a node already handled by an earlier pool is skipped): the nodes the pool's
selector picks whose NodeMetric is fresh (``nodeMetricExpirationSeconds``) become :class:`~.policy.NodeLoad`
(usage = the NodeMetric's system usage plus every reported pod's usage; prod usage = the prod pods' usage;
``pods`` = the pod count), :func:`.balance.assess_pool` classifies them, the pool's anomaly detectors let
hot nodes through, and :func:`.balance.plan_evictions` picks the pods. The eviction filter is the caller's
(:class:`~koord_scheduler.descheduler.evictor.EvictionFilter`) plus ``evictableNamespaces`` and
``podSelectors``; ``nodeFit`` uses :func:`~koord_scheduler.descheduler.evictor.fits_node`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apis.config.descheduler import LowNodeLoadArgs, LowNodeLoadNodePool
from apis.config.descheduler_selectors import LabelSelector as ConfigLabelSelector
from apis.core.parse import parse_label_selector
from apis.core.selectors import label_selector_matches
from apis.core.types import LabelSelector, Node, Pod
from apis.extension import priority_class_with_default
from apis.extension.qos import qos_class_with_default
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.descheduler.lownodeload.anomaly import Detectors
from koord_scheduler.descheduler.lownodeload.balance import (
    PlannedEviction,
    PoolOptions,
    assess_pool,
    plan_evictions,
    why_idle,
)
from koord_scheduler.descheduler.lownodeload.policy import PODS, NodeLoad, PodLoad, fill_thresholds

NAME = "LowNodeLoad"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What one round reads: the nodes (in a stable order), the pods on each, the NodeMetrics, the time."""

    nodes: Sequence[Node]
    pods_by_node: Mapping[str, Sequence[Pod]]
    node_metrics: Mapping[str, NodeMetricRecord]
    now: float


@dataclass(frozen=True, slots=True)
class PoolResult:
    pool: str
    planned: tuple[PlannedEviction, ...]
    idle_reason: str = ""
    """Why nothing was planned in this pool (empty when something was)."""


def _int_annotation(pod: Pod, key: str) -> int:
    text = pod.meta.annotations.get(key) if pod.meta.annotations else None
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0


def pod_load(pod: Pod, metric: NodeMetricRecord) -> PodLoad:
    """The pod as the pod order sees it; its usage from ``metric`` (None when not reported)."""
    qos = qos_class_with_default(pod.meta.labels, pod.qos_class)
    reported = metric.pods.get(pod.key)
    return PodLoad(
        pod.namespace,
        pod.name,
        reported.usage if reported is not None else None,
        priority_class=priority_class_with_default(pod.meta.labels, pod.priority, qos),
        priority=pod.priority,
        kube_qos=pod.qos_class,
        qos=qos,
        deletion_cost=_int_annotation(pod, ANNOTATION_DELETION_COST),
        eviction_cost=_int_annotation(pod, ANNOTATION_EVICTION_COST),
        creation_timestamp=pod.meta.creation_timestamp or 0.0,
    )


PodLoads = Callable[[Pod, NodeMetricRecord], PodLoad]


def node_load(
    node: Node,
    pods: Sequence[Pod],
    metric: NodeMetricRecord,
    resources: Sequence[str],
    *,
    loads_of: PodLoads = pod_load,
) -> NodeLoad:
    """Koordinator's ``getNodeUsage`` for one node."""
    loads = tuple(loads_of(p, metric) for p in pods)
    prod_keys = {p.key for p in loads if p.prod}
    usage: dict[str, int] = {}
    prod_usage: dict[str, int] = {}
    for name in resources:
        usage[name] = metric.system_usage.get(name, 0) + sum(u.usage.get(name, 0) for u in metric.pods.values())
        prod_usage[name] = sum(u.usage.get(name, 0) for key, u in metric.pods.items() if key in prod_keys)
    usage[PODS] = len(loads)
    prod_usage[PODS] = len(prod_keys)
    return NodeLoad(node.name, dict(node.allocatable), usage, prod_usage, loads, unschedulable=node.unschedulable)


def metric_fresh(metric: NodeMetricRecord | None, now: float, expiration_seconds: float) -> bool:
    return (
        metric is not None
        and metric.has_node_metric
        and metric.update_time is not None
        and now - metric.update_time < expiration_seconds
    )


class LowNodeLoad:
    """The plugin; it keeps the anomaly detectors between rounds (one pair per pool)."""

    def __init__(self, args: LowNodeLoadArgs, *, clock: Callable[[], float]) -> None:
        self.args = args
        self.pools = args.pools()
        self.detectors: dict[str, tuple[Detectors, Detectors]] = {}
        cache_timeout = args.detector_cache_timeout if args.detector_cache_timeout is not None else 300.0
        for i, pool in enumerate(self.pools):
            condition = pool.anomaly_condition
            assert condition is not None  # pools() fills it
            pair = tuple(
                Detectors(
                    abnormalities=condition.consecutive_abnormalities,
                    normalities=condition.consecutive_normalities,
                    timeout=condition.timeout or 60.0,
                    cache_timeout=cache_timeout,
                    clock=clock,
                )
                for _ in range(2)
            )
            self.detectors[_pool_name(pool, i)] = (pair[0], pair[1])
        self._loads: dict[str, tuple[Pod, object, PodLoad]] = {}
        """pod key -> (pod, its reported usage, its PodLoad) of the last round: reused while both are the
        same objects (the informers replace a record when it changes), so a steady cluster's round does not
        rebuild 50,000 of them."""
        self._seen: set[str] = set()

    def _pod_load(self, pod: Pod, metric: NodeMetricRecord) -> PodLoad:
        reported = metric.pods.get(pod.key)
        cached = self._loads.get(pod.key)
        self._seen.add(pod.key)
        if cached is not None and cached[0] is pod and cached[1] is reported:
            return cached[2]
        load = pod_load(pod, metric)
        self._loads[pod.key] = (pod, reported, load)
        self._seen.add(pod.key)
        return load

    def evictable_namespace(self, namespace: str) -> bool:
        ns = self.args.evictable_namespaces
        if ns is None:
            return True
        if ns.include:
            return namespace in ns.include
        return namespace not in (ns.exclude or [])

    def selected_pod(self, pod: Pod) -> bool:
        selectors = [s.selector for s in self.args.pod_selectors or [] if s.selector is not None]
        if not selectors:
            return True
        return any(label_selector_matches(_selector(s), pod.meta.labels) for s in selectors)

    def balance(
        self,
        view: ClusterView,
        *,
        evictable: Callable[[Pod], bool],
        fits: Callable[[Pod, str], bool],
    ) -> list[PoolResult]:
        """Plan one round. ``evictable``: the evictor's filter; ``fits``: node fit of pod on a node."""
        if self.args.paused:
            return [PoolResult("", (), "LowNodeLoad is paused")]
        processed: set[str] = set()
        results = []
        self._seen = set()
        for i, pool in enumerate(self.pools):
            results.append(self._pool(_pool_name(pool, i), pool, view, processed, evictable=evictable, fits=fits))
        if len(self._loads) > len(self._seen):  # pods gone since the last round
            self._loads = {k: v for k, v in self._loads.items() if k in self._seen}
        return results

    def _pool(
        self,
        name: str,
        pool: LowNodeLoadNodePool,
        view: ClusterView,
        processed: set[str],
        *,
        evictable: Callable[[Pod], bool],
        fits: Callable[[Pod, str], bool],
    ) -> PoolResult:
        selector = _selector(pool.node_selector) if pool.node_selector is not None else None
        nodes = [
            n
            for n in view.nodes
            if n.name not in processed and (selector is None or label_selector_matches(selector, n.meta.labels))
        ]
        thresholds = fill_thresholds(
            pool.low_thresholds or {},
            pool.high_thresholds or {},
            pool.prod_low_thresholds or {},
            pool.prod_high_thresholds or {},
            use_deviation=pool.use_deviation_thresholds,
        )
        loads = []
        pods_by_key: dict[str, Pod] = {}
        for node in nodes:
            metric = view.node_metrics.get(node.name)
            if metric is None or not metric_fresh(metric, view.now, self.args.node_metric_expiration_seconds):
                continue
            pods = view.pods_by_node.get(node.name, ())
            pods_by_key.update((p.key, p) for p in pods)
            loads.append(node_load(node, pods, metric, thresholds.resource_names, loads_of=self._pod_load))
        if not loads:
            return PoolResult(name, (), "no node with a fresh NodeMetric")
        options = PoolOptions(
            thresholds,
            use_deviation=pool.use_deviation_thresholds,
            weights=pool.resource_weights or {"cpu": 1, "memory": 1},
            number_of_nodes=self.args.number_of_nodes,
            node_fit=self.args.node_fit,
        )
        assessment = assess_pool(loads, options)
        c = assessment.classified
        node_detectors, prod_detectors = self.detectors[name]
        abnormal = node_detectors.abnormal(c.high) if c.high else []
        abnormal_prod = prod_detectors.abnormal(c.prod_high) if c.prod_high else []
        idle = why_idle(assessment, options, abnormal=abnormal, abnormal_prod=abnormal_prod)
        if idle:
            return PoolResult(name, (), idle)
        node_detectors.reset([*c.low, *c.both_low])
        prod_detectors.reset(c.prod_low)

        def allowed(load: PodLoad) -> bool:
            pod = pods_by_key.get(load.key)
            return (
                pod is not None
                and self.evictable_namespace(pod.namespace)
                and self.selected_pod(pod)
                and evictable(pod)
            )

        def fit(load: PodLoad, node: str) -> bool:
            pod = pods_by_key.get(load.key)
            return pod is not None and fits(pod, node)

        planned = plan_evictions(
            assessment, options, abnormal=abnormal, abnormal_prod=abnormal_prod, evictable=allowed, fits=fit
        )
        node_detectors.mark_normal(abnormal)
        prod_detectors.mark_normal(abnormal_prod)
        processed.update(c.high)
        return PoolResult(name, tuple(planned), "" if planned else "no evictable pod fits a cool node")


def _pool_name(pool: LowNodeLoadNodePool, index: int) -> str:
    return pool.name or f"pool-{index}"


def _selector(model: ConfigLabelSelector) -> LabelSelector:
    selector = parse_label_selector(model.model_dump(by_alias=True, exclude_none=True))
    return selector if selector is not None else LabelSelector()
