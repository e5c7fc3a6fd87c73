"""RemovePodsViolatingTopologySpreadConstraint, the kubernetes-sigs/descheduler v0.35 Balance plugin
(``pkg/framework/plugins/removepodsviolatingtopologyspreadconstraint``).

Only the pods the eviction filter, the plugin's ``namespaces`` and its ``labelSelector`` accept are
counted. Per namespace, every distinct constraint of those pods whose ``whenUnsatisfiable`` is in
``constraints`` (default ``[DoNotSchedule]``; ``matchLabelKeys`` merged into its selector, as the
scheduler's PodTopologySpread does) is checked: the domains are the values of ``topologyKey`` on the nodes
that pass the constraint's node inclusion policies (``nodeAffinityPolicy`` Honor by default: the
declaring pod's node selector and required node affinity; ``nodeTaintsPolicy`` Ignore by default), each
counting the matching pods on its nodes. When the largest and smallest domains differ by more than
``maxSkew``, :func:`balance_domains` moves pods from the domains above the ideal average (pods / domains)
to those below it; with ``topologyBalanceNodeFit`` (default true) a chosen pod moves only if it fits a
node of a domain below the average (other than its own), else it is only counted as moved.

Within a domain the pods with a node selector or node affinity are kept longest, then the higher
priority ones; equal pods keep their node order, and equal domains their order of first appearance
(upstream's sorts are not stable).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.config.descheduler_upstream import TOPOLOGY_SPREAD, RemovePodsViolatingTopologySpreadConstraintArgs
from apis.core.selectors import label_selector_matches
from apis.core.tolerations import find_untolerated_taint
from apis.core.types import Node, Pod, TaintEffect
from koord_scheduler.descheduler.deschedule_plugins import Evictable, Eviction, Fits, PodFilter, matches_node
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.plugins.podtopologyspread.policy import HONOR, Constraint, filter_constraints

HARD_EFFECTS: Final = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One distinct constraint of a namespace, with the pod that declared it (whose node affinity and
    tolerations its inclusion policies read)."""

    constraint: Constraint
    owner: Pod

    def includes(self, node: Node) -> bool:
        """``matchNodeInclusionPolicies``."""
        c = self.constraint
        if c.node_affinity_policy == HONOR and not matches_node(self.owner, node):
            return False
        return not (
            c.node_taints_policy == HONOR
            and find_untolerated_taint(node.taints, self.owner.tolerations, HARD_EFFECTS) is not None
        )

    def selects(self, pod: Pod) -> bool:
        """A nil selector matches nothing, an empty one every pod (``LabelSelectorAsSelector``)."""
        selector = self.constraint.selector
        return selector is not None and label_selector_matches(selector, pod.labels)

    def identity(self) -> tuple[object, ...]:
        """What upstream's ``reflect.DeepEqual`` of two constraints compares."""
        c = self.constraint
        owner = self.owner
        affinity = owner.affinity.node_affinity if owner.affinity is not None else None
        return (
            c.max_skew,
            c.topology_key,
            repr(c.selector),
            c.node_affinity_policy,
            c.node_taints_policy,
            (repr(owner.node_selector), repr(affinity.required if affinity else None))
            if c.node_affinity_policy == HONOR
            else None,
            repr(owner.tolerations) if c.node_taints_policy == HONOR else None,
        )


@dataclass(slots=True)
class Domain:
    value: str
    pods: list[Pod] = field(default_factory=list)


def is_balanced(domains: Sequence[Domain], max_skew: int) -> bool:
    """``topologyIsBalanced``: no two domains differ by more than ``max_skew``."""
    sizes = [len(d.pods) for d in domains]
    return not sizes or max(sizes) - min(sizes) <= max_skew


def _keeps_placement(pod: Pod) -> bool:
    return pod.node_selector is not None or (pod.affinity is not None and pod.affinity.node_affinity is not None)


def sort_domain_pods(pods: Sequence[Pod]) -> list[Pod]:
    """``sortDomains``' pod order: the last pods move first. Pods with a node selector or node affinity
    first, then by priority, highest first."""
    return sorted(pods, key=lambda p: (not _keeps_placement(p), -p.priority))


def balance_domains(
    domains: Sequence[Domain],
    max_skew: int,
    *,
    fits_below: Callable[[Pod, Sequence[str]], bool],
    node_fit: bool,
    domain_nodes: Mapping[str, Sequence[str]],
) -> list[Pod]:
    """``balanceDomains``: the pods to move. ``domain_nodes``: domain value -> the eligible nodes in it;
    ``fits_below(pod, nodes)``: the pod fits one of ``nodes`` other than its own."""
    total = sum(len(d.pods) for d in domains)
    if not domains:
        return []
    ideal = total / len(domains)
    ordered = sorted((Domain(d.value, sort_domain_pods(d.pods)) for d in domains), key=lambda d: len(d.pods))
    below = [n for d in ordered if len(d.pods) < ideal for n in domain_nodes.get(d.value, ())]
    out: list[Pod] = []
    i, j = 0, len(ordered) - 1
    while i < j:
        if len(ordered[j].pods) <= ideal:
            j -= 1
        skew = len(ordered[j].pods) - len(ordered[i].pods)
        if skew <= max_skew:
            i += 1
            continue
        above_avg = math.ceil(len(ordered[j].pods) - ideal)
        below_avg = math.ceil(ideal - len(ordered[i].pods))
        move = min(above_avg, below_avg, math.ceil((skew - max_skew) / 2))
        if move <= 0:
            i += 1
            continue
        # The pods that fit a node below the average go last, so they are the ones moved.
        ordered[j].pods.sort(key=lambda p: fits_below(p, below))
        moving = ordered[j].pods[len(ordered[j].pods) - move :]
        out += [p for p in moving if not node_fit or fits_below(p, below)]
        del ordered[j].pods[len(ordered[j].pods) - move :]
        ordered[i].pods.extend(moving)
    return out


class RemovePodsViolatingTopologySpreadConstraint:
    name = TOPOLOGY_SPREAD

    def __init__(self, args: RemovePodsViolatingTopologySpreadConstraintArgs) -> None:
        self.args = args
        self.own = PodFilter.of(args.namespaces, args.label_selector)
        self.actions = args.actions()

    def deschedule(self, view: ClusterView, *, evictable: Evictable, fits: Fits) -> list[Eviction]:
        nodes = {n.name: n for n in view.nodes}
        by_namespace: dict[str, list[Pod]] = {}
        for node in view.nodes:
            for pod in view.pods_by_node.get(node.name, ()):
                if self.own(pod) and evictable(pod):
                    by_namespace.setdefault(pod.namespace, []).append(pod)
        chosen: dict[str, Eviction] = {}
        for pods in by_namespace.values():
            for spread in self._constraints(pods):
                for pod, reason in self._violations(spread, pods, nodes, fits):
                    chosen.setdefault(pod.key, Eviction(pod, pod.node_name, reason))
        return list(chosen.values())

    def _constraints(self, pods: Sequence[Pod]) -> list[SpreadConstraint]:
        seen: dict[tuple[object, ...], SpreadConstraint] = {}
        for pod in pods:
            for action in sorted(self.actions):
                for c in filter_constraints(pod.topology_spread_constraints, pod.labels, action):
                    spread = SpreadConstraint(c, pod)
                    seen.setdefault(spread.identity(), spread)
        return list(seen.values())

    def _violations(
        self, spread: SpreadConstraint, pods: Sequence[Pod], nodes: Mapping[str, Node], fits: Fits
    ) -> list[tuple[Pod, str]]:
        key = spread.constraint.topology_key
        domains: dict[str, Domain] = {}
        domain_nodes: dict[str, list[str]] = {}
        for node in nodes.values():
            value = node.meta.labels.get(key)
            if value is not None and spread.includes(node):
                domains.setdefault(value, Domain(value))
                domain_nodes.setdefault(value, []).append(node.name)
        for pod in pods:
            on = nodes.get(pod.node_name)
            if pod.meta.deletion_timestamp is not None or on is None or not spread.selects(pod):
                continue
            value = on.meta.labels.get(key)
            if value is not None:
                domains.setdefault(value, Domain(value)).pods.append(pod)
        max_skew = spread.constraint.max_skew
        if is_balanced(list(domains.values()), max_skew):
            return []

        def fits_below(pod: Pod, candidates: Sequence[str]) -> bool:
            return any(name != pod.node_name and fits(pod, name) for name in candidates)

        moved = balance_domains(
            list(domains.values()),
            max_skew,
            fits_below=fits_below,
            node_fit=self.args.node_fit(),
            domain_nodes=domain_nodes,
        )
        reason = f"violates its topology spread constraint on {key} (maxSkew {max_skew})"
        return [(p, reason) for p in moved]
