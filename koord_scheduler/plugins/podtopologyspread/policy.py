"""PodTopologySpread constraints and Filter maths (``podtopologyspread/{common,filtering}.go``). Pure.

- :func:`pod_constraints`: the pod's own constraints for one ``whenUnsatisfiable`` action, else the
  default constraints with the selector :func:`default_selector` derives for the pod.
- :func:`domain_match_counts`: ``TpValueToMatchNum`` as arrays over topology value ids.
- :func:`min_match_num` / :func:`domain_reasons`: the Filter criterion
  ``matchNum + selfMatch - globalMin > maxSkew``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from apis.config.plugin_args import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from apis.core.frozendict import FrozenDict
from apis.core.types import LabelSelector, Pod, TopologySpreadConstraint
from koord_scheduler.framework.snapshot import BoolArray, IntArray
from koord_scheduler.plugins.topology_index import merge_label_keys, selector_is_empty

HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
HONOR = "Honor"
IGNORE = "Ignore"
MAX_INT32 = 2**31 - 1
"""``criticalPaths`` start at MaxInt32: with no eligible domain the global minimum is MaxInt32."""

SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(max_skew=3, topology_key=HOSTNAME_KEY, when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=ZONE_KEY, when_unsatisfiable=SCHEDULE_ANYWAY),
)
"""``systemDefaultConstraints`` (``podtopologyspread/plugin.go``)."""

DefaultSelector = Callable[[Pod], LabelSelector | None]

# (apiVersion, kind) of the controllers whose selectors ``helper.DefaultSelector`` reads.
_CONTROLLER_KINDS = frozenset({("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")})
PER_POD_LABELS = frozenset(
    {"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index", "controller-revision-hash"}
)
"""Labels controllers put on single pods or revisions, never in a controller's selector."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """kube-scheduler's internal ``topologySpreadConstraint`` (selector with matchLabelKeys merged)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    @property
    def counts_nothing(self) -> bool:
        """``countPodsMatchSelector`` returns 0 for an empty selector, and a nil one matches nothing."""
        return self.selector is None or selector_is_empty(self.selector)


_FILTERED: dict[tuple[tuple[TopologySpreadConstraint, ...], str], tuple[Constraint, ...]] = {}
""":func:`filter_constraints` of constraint lists without matchLabelKeys (the answer then does not depend
on the pod's labels), by value: pods of one template share it instead of rebuilding it every cycle."""
_FILTERED_BY_ID: dict[tuple[int, str], tuple[tuple[TopologySpreadConstraint, ...], tuple[Constraint, ...]]] = {}
"""The same by the list's identity (the list is kept, so its id is not reused while listed): the
plugin's default constraints, asked for every pod without its own, skip even the hashing."""
_MAX_FILTERED = 1024


def filter_constraints(
    constraints: Sequence[TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
) -> tuple[Constraint, ...]:
    """``filterTopologySpreadConstraints``: the constraints with ``whenUnsatisfiable == action``,
    matchLabelKeys merged into the selector (only keys the pod carries), minDomains defaulting to 1."""
    seen = _FILTERED_BY_ID.get((id(constraints), action))
    if seen is not None and seen[0] is constraints:
        return seen[1]
    if not isinstance(constraints, tuple) or any(c.match_label_keys for c in constraints):
        return _filter_constraints(constraints, pod_labels, action)
    key = (constraints, action)
    try:
        found = _FILTERED.get(key)
    except TypeError:  # a plugin-built constraint holding a plain dict: not cached
        return _filter_constraints(constraints, pod_labels, action)
    if found is None:
        if len(_FILTERED) >= _MAX_FILTERED:
            _FILTERED.clear()
        found = _FILTERED[key] = _filter_constraints(constraints, pod_labels, action)
    if len(_FILTERED_BY_ID) >= _MAX_FILTERED:
        _FILTERED_BY_ID.clear()
    _FILTERED_BY_ID[(id(constraints), action)] = (constraints, found)
    return found


def _filter_constraints(
    constraints: Sequence[TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
) -> tuple[Constraint, ...]:
    return tuple(
        Constraint(
            max_skew=c.max_skew,
            topology_key=c.topology_key,
            selector=merge_label_keys(c.label_selector, pod_labels, c.match_label_keys),
            min_domains=c.min_domains if c.min_domains is not None else 1,
            node_affinity_policy=c.node_affinity_policy or HONOR,
            node_taints_policy=c.node_taints_policy or IGNORE,
        )
        for c in constraints
        if c.when_unsatisfiable == action
    )


def owner_default_selector(pod: Pod) -> LabelSelector | None:
    """``helper.DefaultSelector`` without listers, for handles that cannot watch Services and controllers
    (with a watching handle the plugin uses :mod:`.workloads`, which is exact).

    When the pod's controller is a ReplicationController, ReplicaSet or StatefulSet (by its owner
    reference), the controller's selector is approximated by the pod's own labels minus the per-pod
    ones (:data:`PER_POD_LABELS`): pods of one controller share their template labels, which include
    every label the selector requires. Services are not seen, so a bare pod selected only by a Service
    gets no default spreading (upstream would spread it). None means "no default constraints".
    """
    owner = next((ref for ref in pod.meta.owner_references if ref.controller), None)
    if owner is None or (owner.api_version, owner.kind) not in _CONTROLLER_KINDS:
        return None
    labels = {k: v for k, v in pod.meta.labels.items() if k not in PER_POD_LABELS}
    if not labels:
        return None
    return LabelSelector(match_labels=FrozenDict(labels))


def pod_constraints(
    pod: Pod,
    defaults: Sequence[TopologySpreadConstraint],
    action: str,
    default_selector: DefaultSelector,
) -> tuple[Constraint, ...]:
    """``getConstraints`` / ``initPreScoreState``: the pod's constraints if it has any, else
    ``buildDefaultConstraints`` (none when the derived selector is empty)."""
    labels = pod.meta.labels
    if pod.topology_spread_constraints:
        return filter_constraints(pod.topology_spread_constraints, labels, action)
    constraints = filter_constraints(defaults, labels, action)
    if not constraints:
        return ()
    selector = default_selector(pod)
    if selector is None or selector_is_empty(selector):
        return ()
    return tuple(
        Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy, c.node_taints_policy)
        for c in constraints
    )


def hard_constraints(
    pod: Pod, defaults: Sequence[TopologySpreadConstraint], default_selector: DefaultSelector
) -> tuple[Constraint, ...]:
    return pod_constraints(pod, defaults, DO_NOT_SCHEDULE, default_selector)


def soft_constraints(
    pod: Pod, defaults: Sequence[TopologySpreadConstraint], default_selector: DefaultSelector
) -> tuple[Constraint, ...]:
    return pod_constraints(pod, defaults, SCHEDULE_ANYWAY, default_selector)


# ----- Filter maths -----


def domain_match_counts(
    value_ids: IntArray, node_counts: IntArray, eligible: BoolArray, n_values: int
) -> tuple[IntArray, BoolArray]:
    """``TpValueToMatchNum`` for one constraint: matching pods per topology value summed over the
    eligible nodes, and which values are domains (carried by at least one eligible node).

    ``value_ids`` / ``node_counts`` / ``eligible`` are per node position; eligible nodes carry the key.
    """
    ids = value_ids[eligible]
    match_num = np.bincount(ids, weights=node_counts[eligible], minlength=n_values).astype(np.int64)
    present = np.bincount(ids, minlength=n_values) > 0
    return match_num, present


def eligible_buckets(value_ids: IntArray, eligible: BoolArray, n_values: int) -> tuple[IntArray, BoolArray]:
    """Per node position, the bucket :func:`bucket_sums` adds its pods to (its value id when eligible,
    else the spare bucket ``n_values``), and which values are domains (carried by an eligible node)."""
    buckets = np.where(eligible, value_ids, n_values)
    buckets.flags.writeable = False
    present = np.bincount(buckets, minlength=n_values + 1)[:n_values] > 0
    present.flags.writeable = False
    return buckets, present


def bucket_sums(buckets: IntArray, node_counts: IntArray, n_values: int) -> IntArray:
    """``TpValueToMatchNum`` from :func:`eligible_buckets`: matching pods per topology value over the
    eligible nodes (the same numbers as :func:`domain_match_counts`)."""
    sums = np.bincount(buckets, weights=node_counts, minlength=n_values + 1)[:n_values]
    return sums.astype(np.int64)


def min_match_num(match_num: IntArray, present: BoolArray, min_domains: int) -> int:
    """``preFilterState.minMatchNum``: the smallest count over the domains (MaxInt32 with no domain), or 0
    when there are fewer domains than ``minDomains``. Exact minimum: upstream's two-entry critical paths
    can drift after several AddPod/RemovePod calls in a preemption dry run; at PreFilter time they agree."""
    domains = int(present.sum())
    if domains < min_domains:
        return 0
    if domains == 0:
        return MAX_INT32
    return int(match_num[present].min())


def domain_reasons(match_num: IntArray, self_match: int, global_min: int, max_skew: int) -> np.ndarray:
    """Filter reason per topology value, shifted by one: slot 0 is 1 (a node without the key), slot
    ``v + 1`` is 2 where ``matchNum[v] + selfMatch - globalMin > maxSkew``, else 0."""
    table = np.zeros(len(match_num) + 1, dtype=np.int8)
    table[0] = 1
    table[1:][match_num + self_match - global_min > max_skew] = 2
    return table
