"""LowNodeLoad's arithmetic, as pure functions: Koordinator's
``pkg/descheduler/framework/plugins/loadaware/utilization_util.go`` and ``low_node_load.go`` (thresholds,
node classification, the eviction budget) and ``pkg/descheduler/utils/sorter`` (node and pod order).

Units: CPU in millicores, every other resource in its base unit (bytes, pods); percentages are 0-100.
Nothing here reads a clock or the cluster: :mod:`.plan` feeds it from the informers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from apis.extension import PriorityClass
from apis.extension.qos import QoSClass

MIN_PERCENTAGE: Final = 0.0
MAX_PERCENTAGE: Final = 100.0
CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"

Resources = Mapping[str, int]

_PRIORITY_CLASS_ORDER: Final = {
    PriorityClass.NONE: 5,
    PriorityClass.PROD: 4,
    PriorityClass.MID: 3,
    PriorityClass.BATCH: 2,
    PriorityClass.FREE: 1,
}
_QOS_ORDER: Final = {
    QoSClass.NONE: 5,
    QoSClass.SYSTEM: 4,
    QoSClass.LSE: 4,
    QoSClass.LSR: 3,
    QoSClass.LS: 2,
    QoSClass.BE: 1,
}
_KUBE_QOS_ORDER: Final = {"Guaranteed": 3, "Burstable": 2, "BestEffort": 1}


@dataclass(frozen=True, slots=True)
class PodLoad:
    """A pod on a node, with what the pod order reads."""

    namespace: str
    name: str
    usage: Resources | None
    """From the node's NodeMetric (``podsMetric``); None when the NodeMetric does not report the pod."""
    priority_class: PriorityClass = PriorityClass.NONE
    priority: int = 0
    kube_qos: str = "BestEffort"
    qos: QoSClass = QoSClass.NONE
    deletion_cost: int = 0
    eviction_cost: int = 0
    creation_timestamp: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def prod(self) -> bool:
        return self.priority_class is PriorityClass.PROD


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """A node with a fresh NodeMetric: ``usage`` is system plus pod usage (``pods`` is the pod count),
    ``prod_usage`` the prod pods' usage."""

    name: str
    allocatable: Resources
    usage: Resources
    prod_usage: Resources
    pods: tuple[PodLoad, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Percentages per resource: ``low``/``high`` for the node, ``prod_low``/``prod_high`` for its prod pods."""

    low: Mapping[str, float]
    high: Mapping[str, float]
    prod_low: Mapping[str, float]
    prod_high: Mapping[str, float]

    @property
    def resource_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.low))


@dataclass(frozen=True, slots=True)
class NodeThresholds:
    """Absolute amounts per resource, for one node."""

    low: Mapping[str, int]
    high: Mapping[str, int]
    prod_low: Mapping[str, int]
    prod_high: Mapping[str, int]


def fill_thresholds(
    low: Mapping[str, float],
    high: Mapping[str, float],
    prod_low: Mapping[str, float],
    prod_high: Mapping[str, float],
    *,
    use_deviation: bool,
) -> Thresholds:
    """Koordinator's ``newThresholds``: every resource named anywhere (and memory) gets a low/high pair and
    a prod pair; a missing pair is 0% (deviation: no constraint) or 100% (absolute: never over)."""
    names = {*low, *high, *prod_low, *prod_high, MEMORY}
    fill = MIN_PERCENTAGE if use_deviation else MAX_PERCENTAGE
    lo, hi, plo, phi = dict(low), dict(high), dict(prod_low), dict(prod_high)
    for name in names:
        if name not in lo:
            lo[name] = fill
            hi[name] = fill
        if name not in plo:
            plo[name] = fill
            phi[name] = fill
    return Thresholds(lo, hi, plo, phi)


def normalize_percentage(percent: float) -> float:
    return min(MAX_PERCENTAGE, max(MIN_PERCENTAGE, percent))


def resource_threshold(allocatable: Resources, name: str, percent: float) -> int:
    """``percent`` of the node's allocatable ``name`` (Koordinator's ``resourceThreshold``, truncated)."""
    return int(percent * 0.01 * allocatable.get(name, 0))


def average_usage_percent(nodes: Iterable[NodeLoad]) -> tuple[dict[str, float], dict[str, float]]:
    """The mean usage percentage per resource over ``nodes``, for all pods and for prod pods
    (Koordinator's ``calcAverageResourceUsagePercent``: a node without the resource counts as 0%)."""
    node_list = list(nodes)
    total: dict[str, float] = {}
    prod_total: dict[str, float] = {}
    for node in node_list:
        for usage, into in ((node.usage, total), (node.prod_usage, prod_total)):
            for name, used in usage.items():
                capacity = node.allocatable.get(name, 0)
                if capacity:
                    into[name] = into.get(name, 0.0) + used / capacity * 100.0
    n = len(node_list) or 1
    return {k: v / n for k, v in total.items()}, {k: v / n for k, v in prod_total.items()}


def node_thresholds(
    node: NodeLoad,
    thresholds: Thresholds,
    *,
    use_deviation: bool,
    average: tuple[Mapping[str, float], Mapping[str, float]] = ({}, {}),
) -> NodeThresholds:
    """The absolute thresholds of ``node`` (Koordinator's ``getNodeThresholds``). With deviation
    thresholds, low and high are the pool's average usage minus/plus the configured percentages; a
    resource configured at 0% is unconstrained (its thresholds are the whole allocatable)."""
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    plo: dict[str, int] = {}
    phi: dict[str, int] = {}
    avg, prod_avg = average
    alloc = node.allocatable
    for name in thresholds.resource_names:
        if use_deviation:
            capacity = alloc.get(name, 0)
            if thresholds.low.get(name, 0.0) == MIN_PERCENTAGE:
                lo[name] = hi[name] = capacity
            else:
                lo[name] = resource_threshold(
                    alloc, name, normalize_percentage(avg.get(name, 0.0) - thresholds.low.get(name, 0.0))
                )
                hi[name] = resource_threshold(
                    alloc, name, normalize_percentage(avg.get(name, 0.0) + thresholds.high.get(name, 0.0))
                )
            if thresholds.prod_low.get(name, 0.0) == MIN_PERCENTAGE:
                plo[name] = phi[name] = capacity
            else:
                plo[name] = resource_threshold(
                    alloc, name, normalize_percentage(prod_avg.get(name, 0.0) - thresholds.prod_low.get(name, 0.0))
                )
                phi[name] = resource_threshold(
                    alloc, name, normalize_percentage(prod_avg.get(name, 0.0) + thresholds.prod_high.get(name, 0.0))
                )
        else:
            lo[name] = resource_threshold(alloc, name, thresholds.low.get(name, 0.0))
            hi[name] = resource_threshold(alloc, name, thresholds.high.get(name, 0.0))
            plo[name] = resource_threshold(alloc, name, thresholds.prod_low.get(name, 0.0))
            phi[name] = resource_threshold(alloc, name, thresholds.prod_high.get(name, 0.0))
    return NodeThresholds(lo, hi, plo, phi)


def overutilized(usage: Resources, thresholds: Mapping[str, int]) -> dict[str, int]:
    """The resources whose usage is above their threshold (``isNodeOverutilized``); empty: not over."""
    return {name: usage[name] for name, limit in thresholds.items() if name in usage and usage[name] > limit}


def underutilized(usage: Resources, thresholds: Mapping[str, int]) -> bool:
    """Every resource at or below its threshold (``isNodeUnderutilized``)."""
    return all(usage[name] <= limit for name, limit in thresholds.items() if name in usage)


@dataclass(frozen=True, slots=True)
class Classified:
    """Koordinator's ``classifyNodes``: ``low`` under the node low thresholds (and fine for prod), ``high``
    over the node high thresholds, ``prod_low`` / ``prod_high`` by the prod thresholds alone (node usage
    in between), ``both_low`` under both low thresholds. A node in none of them is left alone."""

    low: tuple[str, ...] = ()
    high: tuple[str, ...] = ()
    prod_low: tuple[str, ...] = ()
    prod_high: tuple[str, ...] = ()
    both_low: tuple[str, ...] = ()


def classify(nodes: Sequence[NodeLoad], thresholds: Mapping[str, NodeThresholds]) -> Classified:
    """Classify ``nodes`` (in their order) against their ``thresholds``; an unschedulable node is never low."""
    low: list[str] = []
    high: list[str] = []
    prod_low: list[str] = []
    prod_high: list[str] = []
    both_low: list[str] = []
    for node in nodes:
        t = thresholds[node.name]
        is_low = not node.unschedulable and underutilized(node.usage, t.low)
        is_prod_low = not node.unschedulable and underutilized(node.prod_usage, t.prod_low)
        is_prod_high = bool(overutilized(node.prod_usage, t.prod_high))
        if is_low:
            if is_prod_high:
                prod_high.append(node.name)
            elif is_prod_low:
                both_low.append(node.name)
            else:
                low.append(node.name)
        elif overutilized(node.usage, t.high):
            high.append(node.name)
        elif is_prod_high:
            prod_high.append(node.name)
        elif is_prod_low:
            prod_low.append(node.name)
    return Classified(tuple(low), tuple(high), tuple(prod_low), tuple(prod_high), tuple(both_low))


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * 1000 // capacity


def most_requested_score_pod(requested: int, capacity: int) -> float:
    """Closer to ``capacity`` scores higher; above it, less the further above (Koordinator's scorer)."""
    if capacity == 0:
        return 0.0
    ratio = requested / capacity
    return 1 / ratio + 1 if ratio >= 1 else ratio


def node_usage_score(usage: Resources, allocatable: Resources, weights: Mapping[str, int]) -> int:
    """Koordinator's ``ResourceUsageScorer``: the weighted mean of usage per mille of allocatable."""
    score = weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        score += most_requested_score(used, allocatable.get(name, 0)) * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def pod_usage_score(usage: Resources, excess: Resources, weights: Mapping[str, int]) -> float:
    """Koordinator's ``ResourceUsageScorerPod``: how close the pod's usage is to what the node exceeds."""
    score = 0.0
    weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        score += most_requested_score_pod(used, excess.get(name, 0)) * weight
        weight_sum += weight
    return score / weight_sum if weight_sum else 0.0


def sort_nodes_by_usage(
    nodes: Iterable[NodeLoad], weights: Mapping[str, int], *, ascending: bool, prod: bool
) -> list[NodeLoad]:
    """Koordinator's ``sortNodesByUsage`` (stable here, by name for equal scores)."""

    def score(node: NodeLoad) -> int:
        return node_usage_score(node.prod_usage if prod else node.usage, node.allocatable, weights)

    ordered = sorted(nodes, key=lambda n: n.name)
    return sorted(ordered, key=score, reverse=not ascending)


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def pod_order(excess: Resources, weights: Mapping[str, int]) -> Callable[[PodLoad, PodLoad], int]:
    """Koordinator's ``PodSorter`` with ``Reverse(PodUsage)``: negative when the first pod is evicted
    first. Koordinator priority class (free first), priority, Kubernetes QoS (BestEffort first),
    Koordinator QoS (BE first), ``pod-deletion-cost``, ``eviction-cost``, usage nearest the node's excess
    (pods without a metric last), then the youngest first."""

    def compare(p1: PodLoad, p2: PodLoad) -> int:
        for a, b in (
            (_PRIORITY_CLASS_ORDER[p1.priority_class], _PRIORITY_CLASS_ORDER[p2.priority_class]),
            (p1.priority, p2.priority),
            (_KUBE_QOS_ORDER.get(p1.kube_qos, 0), _KUBE_QOS_ORDER.get(p2.kube_qos, 0)),
            (_QOS_ORDER[p1.qos], _QOS_ORDER[p2.qos]),
            (p1.deletion_cost, p2.deletion_cost),
            (p1.eviction_cost, p2.eviction_cost),
        ):
            if a != b:
                return _cmp(a, b)
        if p1.usage is None or p2.usage is None:
            if (p1.usage is None) != (p2.usage is None):
                return 1 if p1.usage is None else -1
        else:
            result = _cmp(pod_usage_score(p2.usage, excess, weights), pod_usage_score(p1.usage, excess, weights))
            if result:
                return result
        return _cmp(p2.creation_timestamp, p1.creation_timestamp)

    return compare


def sort_pods_for_eviction(
    pods: Iterable[PodLoad], node: NodeLoad, thresholds: NodeThresholds, weights: Mapping[str, int], *, prod: bool
) -> list[PodLoad]:
    """Koordinator's ``sortPodsOnOneOverloadedNode``: only the overused resources weigh, and a pod's usage
    is scored against how far the node is above its high threshold for each."""
    usage = node.prod_usage if prod else node.usage
    high = thresholds.prod_high if prod else thresholds.high
    over = overutilized(usage, high)
    excess = {name: used - high[name] for name, used in over.items()}
    over_weights = {name: weights.get(name, 0) for name in over}
    return sorted(pods, key=functools.cmp_to_key(pod_order(excess, over_weights)))
