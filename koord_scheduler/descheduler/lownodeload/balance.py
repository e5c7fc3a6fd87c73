"""One node pool's LowNodeLoad pass, as Koordinator's ``processOneNodePool`` and
``evictPodsFromSourceNodes`` / ``balancePods`` / ``evictPods`` run it, decided without side effects.

:func:`assess_pool` computes each node's thresholds and classification; the caller then asks its anomaly
detectors which hot nodes count (:mod:`.anomaly`); :func:`plan_evictions` picks the pods to move:

1. nothing when no node is hot, when no node is cool, when the cool nodes are ``numberOfNodes`` or fewer,
   or when every node is cool;
2. the budget is what the cool nodes can take before reaching their high thresholds (``low`` and
   ``both_low`` nodes for the node pass; ``prod_low`` plus what is left of ``both_low`` for the prod pass);
3. hot nodes, most used first: their evictable pods (the filter; with ``nodeFit``, only pods with a metric
   that fit some cool node without taking it over its high thresholds, which books that usage there) in
   Koordinator's pod order, until the node is no longer over its high thresholds or the budget is spent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from koord_scheduler.descheduler.lownodeload.policy import (
    PODS,
    Classified,
    NodeLoad,
    NodeThresholds,
    PodLoad,
    Thresholds,
    average_usage_percent,
    classify,
    node_thresholds,
    overutilized,
    pod_order,
    sort_nodes_by_usage,
)
from koord_scheduler.descheduler.lownodeload.room_index import INF, RoomIndex


@dataclass(frozen=True, slots=True)
class PoolOptions:
    thresholds: Thresholds
    """Filled (:func:`.policy.fill_thresholds`)."""
    use_deviation: bool = False
    weights: Mapping[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    number_of_nodes: int = 0
    node_fit: bool = True
    room_index: bool = True
    """Find the cool node for ``nodeFit`` with :class:`.room_index.RoomIndex` (same answer, fewer checks)."""


@dataclass(frozen=True, slots=True)
class PoolAssessment:
    nodes: Mapping[str, NodeLoad]
    thresholds: Mapping[str, NodeThresholds]
    classified: Classified


@dataclass(frozen=True, slots=True)
class PlannedEviction:
    pod: PodLoad
    node: str
    prod: bool
    reason: str
    """Koordinator's eviction reason (``node is overutilized, node cpu usage(85.00%)>threshold(70.00%)``)."""
    target: str = ""
    """The cool node whose room the pod was counted against (``nodeFit``); empty without nodeFit."""


def assess_pool(nodes: Sequence[NodeLoad], options: PoolOptions) -> PoolAssessment:
    average = average_usage_percent(nodes) if options.use_deviation else ({}, {})
    thresholds = {
        n.name: node_thresholds(n, options.thresholds, use_deviation=options.use_deviation, average=average)
        for n in nodes
    }
    return PoolAssessment({n.name: n for n in nodes}, thresholds, classify(nodes, thresholds))


def why_idle(
    assessment: PoolAssessment, options: PoolOptions, *, abnormal: Collection[str], abnormal_prod: Collection[str]
) -> str:
    """Why :func:`plan_evictions` will evict nothing in this pool; empty when it may."""
    c = assessment.classified
    if not c.high and not c.prod_high:
        return "no node is above the high thresholds"
    if not abnormal and not abnormal_prod:
        return "no hot node has been abnormal for long enough (anomalyCondition)"
    cool = len(c.low) + len(c.prod_low) + len(c.both_low)
    if cool == 0:
        return "no node is under the low thresholds"
    if cool <= options.number_of_nodes:
        return f"{cool} node(s) under the low thresholds, numberOfNodes is {options.number_of_nodes}"
    if cool == len(assessment.nodes):
        return "every node is under the low thresholds"
    return ""


def plan_evictions(
    assessment: PoolAssessment,
    options: PoolOptions,
    *,
    abnormal: Collection[str],
    abnormal_prod: Collection[str] = (),
    evictable: Callable[[PodLoad], bool] = lambda pod: True,
    fits: Callable[[PodLoad, str], bool] = lambda pod, node: True,
) -> list[PlannedEviction]:
    """The pods to move, in order (see the module docstring). ``abnormal``/``abnormal_prod``: the hot
    nodes the anomaly detectors let through; ``evictable``: the eviction filter (namespaces, pod selectors,
    the evictor's filter); ``fits``: the scheduler's predicates for pod on a cool node (``nodeFit``)."""
    if why_idle(assessment, options, abnormal=abnormal, abnormal_prod=abnormal_prod):
        return []
    state = _State(assessment, options, evictable, fits)
    c = assessment.classified
    names = options.thresholds.resource_names
    high = [assessment.nodes[n] for n in c.high if n in abnormal]
    prod_high = [assessment.nodes[n] for n in c.prod_high if n in abnormal_prod]
    sources = sort_nodes_by_usage(high, options.weights, ascending=False, prod=False)
    prod_sources = sort_nodes_by_usage(prod_high, options.weights, ascending=False, prod=True)

    low_available = state.available(c.low, prod=False)
    prod_available = state.available(c.prod_low, prod=True)
    both_available = state.available(c.both_low, prod=False)
    prod_both_available = state.available(c.both_low, prod=True)
    node_total = {r: low_available[r] + both_available[r] for r in names}
    state.balance(sources, [*c.low, *c.both_low], node_total, prod=False)
    for r in names:  # what the node pass left of the both-low nodes
        both_available[r] = min(both_available[r], node_total[r])
    prod_total = {r: prod_available[r] + min(prod_both_available[r], both_available[r]) for r in names}
    state.balance(prod_sources, [*c.prod_low, *c.both_low], prod_total, prod=True)
    return state.planned


@dataclass(slots=True)
class _State:
    assessment: PoolAssessment
    options: PoolOptions
    evictable: Callable[[PodLoad], bool]
    fits: Callable[[PodLoad, str], bool]
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    prod_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    planned: list[PlannedEviction] = field(default_factory=list)
    booked: dict[str, str] = field(default_factory=dict)
    """pod key -> the cool node its usage was booked on."""
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.names = self.options.thresholds.resource_names
        for name, node in self.assessment.nodes.items():
            self.usage[name] = dict(node.usage)
            self.prod_usage[name] = dict(node.prod_usage)

    def _usage(self, node: str, *, prod: bool) -> dict[str, int]:
        return self.prod_usage[node] if prod else self.usage[node]

    def _high(self, node: str, *, prod: bool) -> Mapping[str, int]:
        t = self.assessment.thresholds[node]
        return t.prod_high if prod else t.high

    def available(self, nodes: Sequence[str], *, prod: bool) -> dict[str, int]:
        """``targetAvailableUsage``: the sum over ``nodes`` of high threshold minus usage."""
        out = dict.fromkeys(self.options.thresholds.resource_names, 0)
        for node in nodes:
            high = self._high(node, prod=prod)
            usage = self._usage(node, prod=prod)
            for r in out:
                out[r] += high.get(r, 0) - usage.get(r, 0)
        return out

    def balance(
        self, sources: Sequence[NodeLoad], targets: Sequence[str], available: dict[str, int], *, prod: bool
    ) -> None:
        if not targets:
            return
        # Bookings persist across the pass's sources (as Koordinator's usage pointers do): one index per pass.
        index = self._index(targets, prod=prod) if self.options.node_fit and self.options.room_index else None
        for source in sources:
            pods = [p for p in source.pods if p.prod] if prod else list(source.pods)
            removable = [
                p
                for p in pods
                if self.evictable(p) and (not self.options.node_fit or self._fits_any(p, targets, index, prod=prod))
            ]
            if not removable:
                continue
            self._evict(source, self._sorted(source, removable, prod=prod), available, prod=prod)

    def _room(self, node: str, *, prod: bool) -> list[float]:
        usage = self._usage(node, prod=prod)
        high = self._high(node, prod=prod)
        return [high[r] - usage[r] if r in high and r in usage else INF for r in self.names]

    def _index(self, targets: Sequence[str], *, prod: bool) -> RoomIndex:
        return RoomIndex([self._room(node, prod=prod) for node in targets])

    def _fits_any(self, pod: PodLoad, targets: Sequence[str], index: RoomIndex | None, *, prod: bool) -> bool:
        """``podFitsAnyNodeWithThreshold``: the first cool node the pod fits without taking it over its
        high thresholds; the pod's usage is booked there."""
        if pod.usage is None:
            return False
        if index is not None:
            usage_of = pod.usage
            need = [usage_of.get(r, 0) for r in self.names]
            found = index.first_fit(need, lambda i: self.fits(pod, targets[i]))
            if found is None:
                return False
            node = targets[found]
            usage = self._usage(node, prod=prod)
            for r in self._high(node, prod=prod):
                if r in usage:
                    usage[r] += usage_of.get(r, 0)
            index.update(found, self._room(node, prod=prod))
            self.booked[pod.key] = node
            return True
        for node in targets:
            if not self.fits(pod, node):
                continue
            usage = self._usage(node, prod=prod)
            high = self._high(node, prod=prod)
            after = {r: usage[r] + pod.usage.get(r, 0) for r in high if r in usage}
            if any(after[r] > high[r] for r in after):
                continue
            usage.update(after)
            self.booked[pod.key] = node
            return True
        return False

    def _sorted(self, source: NodeLoad, pods: list[PodLoad], *, prod: bool) -> list[PodLoad]:
        usage = self._usage(source.name, prod=prod)
        high = self._high(source.name, prod=prod)
        over = overutilized(usage, high)
        excess = {r: used - high[r] for r, used in over.items()}
        weights = {r: self.options.weights.get(r, 0) for r in over}
        return sorted(pods, key=functools.cmp_to_key(pod_order(excess, weights)))

    def _continue(self, source: NodeLoad, available: Mapping[str, int], *, prod: bool) -> bool:
        if not overutilized(self._usage(source.name, prod=prod), self._high(source.name, prod=prod)):
            return False
        return all(available.get(r, 1) > 0 for r in self.options.thresholds.resource_names)

    def _evict(self, source: NodeLoad, pods: list[PodLoad], available: dict[str, int], *, prod: bool) -> None:
        for pod in pods:
            if not self._continue(source, available, prod=prod):
                return
            self.planned.append(
                PlannedEviction(pod, source.name, prod, self._reason(source, prod=prod), self.booked.get(pod.key, ""))
            )
            if pod.usage is None:
                continue
            for r in available:
                amount = 1 if r == PODS else pod.usage.get(r, 0)
                available[r] -= amount
                if r in self.usage[source.name]:
                    self.usage[source.name][r] -= amount
                if prod and r in self.prod_usage[source.name]:
                    self.prod_usage[source.name][r] -= amount

    def _reason(self, source: NodeLoad, *, prod: bool) -> str:
        """Koordinator's ``overUtilizedEvictionReason``."""
        usage = self._usage(source.name, prod=prod)
        over = overutilized(usage, self._high(source.name, prod=prod))
        percents = self.options.thresholds.prod_high if prod else self.options.thresholds.high
        who = "prod" if prod else "node"
        infos = []
        for r in sorted(percents):
            if r in over:
                capacity = source.allocatable.get(r, 0)
                used = 100.0 * usage[r] / capacity if capacity else 0.0
                infos.append(f"{who} {r} usage({used:.2f}%)>threshold({percents[r]:.2f}%)")
        return "node is overutilized, " + ", ".join(infos)
