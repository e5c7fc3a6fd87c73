"""Per-node load: the last NodeMetric plus the pods on the node, with Koordinator's podAssignCache sums.

Koordinator ``pkg/scheduler/plugins/loadaware/pod_assign_cache.go``. Each node keeps the pods assigned to it
(placed by this scheduler at Reserve, or found on the node) and pre-aggregated vectors over the vectorised
resources, so reads are O(resources):

- ``node_delta`` = Σ max(0, estimate - reported usage) over the pods *still to be estimated*: a pod is
  still to be estimated when its usage is not in ``podsMetric``, when it was assigned after
  ``updateTime - reportInterval`` (the last report cannot fully show it), or while its forced-estimation
  deadline is after ``updateTime``;
- ``prod_usage`` = Σ reported usage of pods that are prod by their own priority class *and* reported as
  prod (+ ``systemUsage`` with ``prodUsageIncludeSys``); ``prod_delta`` as ``node_delta`` over prod pods
  (a prod pod reported as non-prod counts with its full estimate);
- ``node_estimated`` = Σ full estimates (the base when a configured aggregation window is missing;
  summed when asked, which only that cold-start fallback does).

A pod add/remove is O(resources); a NodeMetric update recomputes the node, O(pods on the node). Nothing
here depends on the current time: the rule compares pod timestamps with the metric's ``updateTime``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from koord_scheduler.plugins.loadaware.nodemetric import NodeMetricRecord, Usage

Vector = list[int]


class AssignedPod(NamedTuple):
    """One pod on a node. A named tuple, not a frozen dataclass: Reserve builds one per pod, and a frozen
    dataclass's ``__init__`` costs several times more."""

    key: str
    """``namespace/name`` (how ``podsMetric`` names pods)."""
    estimate: tuple[int, ...]
    prod: bool
    """koord-prod by the pod's own priority class."""
    timestamp: float | None
    """When the pod was assigned (seconds since the epoch). ``None`` means long ago / unknown: the pod
    is then estimated only while its usage is missing from ``podsMetric``."""
    deadline: float | None = None
    """Forced estimation until this time (``estimatedSecondsAfterPodScheduled``)."""


class _Contribution(NamedTuple):
    delta: tuple[int, ...] | None
    prod_delta: tuple[int, ...] | None
    prod_usage: tuple[int, ...] | None


@dataclass(slots=True)
class NodeLoad:
    """One node's metric, pods and sums. Vectors are aligned with the cache's ``resources``."""

    name: str
    width: int
    metric: NodeMetricRecord | None = None
    pods: dict[str, AssignedPod] = field(default_factory=dict)
    node_usage: Vector = field(default_factory=list)
    node_delta: Vector = field(default_factory=list)
    prod_usage: Vector = field(default_factory=list)
    prod_delta: Vector = field(default_factory=list)
    _contributions: dict[str, _Contribution] = field(default_factory=dict)
    """What each pod whose usage ``podsMetric`` reports adds to the sums. A pod missing from it (every pod
    this scheduler has just placed) adds its full estimate and has no entry here: Reserve then builds
    no record (see :func:`_add_unreported`)."""

    def __post_init__(self) -> None:
        self._zero()

    def _zero(self) -> None:
        w = self.width
        self.node_usage, self.node_delta = [0] * w, [0] * w
        self.prod_usage, self.prod_delta = [0] * w, [0] * w
        self._contributions = {}

    @property
    def node_estimated(self) -> Vector:
        """Σ full estimates of the node's pods while it has a metric (zeros without one)."""
        total = [0] * self.width
        if self.metric is not None:
            for pod in self.pods.values():
                _add(total, pod.estimate, 1)
        return total

    @property
    def delta_pods(self) -> set[str]:
        """Pods contributing to ``node_delta`` (for the debug/simulate view)."""
        if self.metric is None:
            return set()
        contributions = self._contributions
        return {key for key in self.pods if key not in contributions or contributions[key].delta is not None}


class AssignCache:
    """``NodeLoad`` by node name. ``resources`` fixes the vector layout (the plugin's vectorizer)."""

    def __init__(self, resources: Sequence[str], *, prod_usage_include_sys: bool = False) -> None:
        self.resources = tuple(resources)
        self.prod_usage_include_sys = prod_usage_include_sys
        self._nodes: dict[str, NodeLoad] = {}

    def get(self, name: str) -> NodeLoad | None:
        return self._nodes.get(name)

    def __iter__(self) -> Iterator[NodeLoad]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def vector(self, usage: Usage) -> tuple[int, ...]:
        return tuple(usage.get(r, 0) for r in self.resources)

    # ----- NodeMetric -----

    def set_metric(self, record: NodeMetricRecord) -> NodeLoad:
        node = self._node(record.name)
        node.metric = record
        self._recompute(node)
        return node

    def delete_metric(self, name: str) -> NodeLoad | None:
        node = self._nodes.get(name)
        if node is None:
            return None
        node.metric = None
        node._zero()
        self._cleanup(node)
        return node

    # ----- pods -----

    def assign(self, node_name: str, pod: AssignedPod) -> NodeLoad:
        """Add (or replace) ``pod`` on ``node_name``."""
        node = self._node(node_name)
        old = node.pods.get(pod.key)
        if old is not None and node.metric is not None:
            _remove_contribution(node, old)
        node.pods[pod.key] = pod
        if node.metric is not None:
            self._add_contribution(node, pod)
        return node

    def assign_unreported(self, node: NodeLoad, pod: AssignedPod) -> None:
        """:meth:`assign` for a pod new to ``node`` (which has a metric) and missing from its ``podsMetric``:
        the full estimate counts (Reserve's path, once per pod; the caller has checked both conditions)."""
        node.pods[pod.key] = pod
        _add_unreported(node, pod.estimate, pod.prod, 1)

    def unassign(self, node_name: str, key: str) -> bool:
        """Remove the pod; False when it was not assigned there."""
        node = self._nodes.get(node_name)
        if node is None:
            return False
        pod = node.pods.pop(key, None)
        if pod is None:
            return False
        if node.metric is not None:
            _remove_contribution(node, pod)
        self._cleanup(node)
        return True

    # ----- internals -----

    def _node(self, name: str) -> NodeLoad:
        node = self._nodes.get(name)
        if node is None:
            node = NodeLoad(name, len(self.resources))
            self._nodes[name] = node
        return node

    def _cleanup(self, node: NodeLoad) -> None:
        if node.metric is None and not node.pods:
            self._nodes.pop(node.name, None)

    def _recompute(self, node: NodeLoad) -> None:
        node._zero()
        metric = node.metric
        assert metric is not None
        node.node_usage = list(self.vector(metric.node_usage))
        if self.prod_usage_include_sys:
            node.prod_usage = list(self.vector(metric.system_usage))
        for pod in node.pods.values():
            self._add_contribution(node, pod)

    def _add_contribution(self, node: NodeLoad, pod: AssignedPod) -> None:
        metric = node.metric
        assert metric is not None
        estimate = pod.estimate
        reported = metric.pods.get(pod.key)
        if reported is None:
            _add_unreported(node, estimate, pod.prod, 1)  # (no record: see NodeLoad._contributions)
            return
        usage = self.vector(reported.usage)
        active_prod = pod.prod and reported.prod
        update_time = metric.update_time if metric.update_time is not None else float("-inf")
        should = (pod.timestamp is not None and pod.timestamp > update_time - metric.report_interval) or (
            pod.deadline is not None and pod.deadline > update_time
        )
        delta = _delta(estimate, usage) if should else None
        prod_delta = None
        if pod.prod:
            # A prod pod reported as non-prod counts with its full estimate.
            prod_delta = delta if active_prod else estimate
        contribution = _Contribution(delta, prod_delta, usage if active_prod else None)
        node._contributions[pod.key] = contribution
        _apply(node, contribution, 1)


def _delta(estimate: tuple[int, ...], usage: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(e - u if e > u else 0 for e, u in zip(estimate, usage, strict=True))


def _remove_contribution(node: NodeLoad, pod: AssignedPod) -> None:
    """Take back what ``pod`` (on ``node``, which has a metric) added to the sums."""
    contribution = node._contributions.pop(pod.key, None)
    if contribution is None:
        _add_unreported(node, pod.estimate, pod.prod, -1)
    else:
        _apply(node, contribution, -1)


def _add_unreported(node: NodeLoad, estimate: tuple[int, ...], prod: bool, sign: int) -> None:
    """A pod missing from ``podsMetric`` adds its full estimate to ``node_delta``, and to ``prod_delta``
    when it is prod (one loop: Reserve runs this once per pod)."""
    delta, prod_delta = node.node_delta, node.prod_delta
    for i, v in enumerate(estimate if sign > 0 else [-e for e in estimate]):
        delta[i] += v
        if prod:
            prod_delta[i] += v


def _apply(node: NodeLoad, c: _Contribution, sign: int) -> None:
    if c.delta is not None:
        _add(node.node_delta, c.delta, sign)
    if c.prod_delta is not None:
        _add(node.prod_delta, c.prod_delta, sign)
    if c.prod_usage is not None:
        _add(node.prod_usage, c.prod_usage, sign)


def _add(into: Vector, values: tuple[int, ...], sign: int) -> None:
    # The plainest loop is the fastest for a handful of resources (no comprehension frame, no multiply).
    if sign > 0:
        for i, v in enumerate(values):
            into[i] += v
    else:
        for i, v in enumerate(values):
            into[i] -= v
