"""Where a network-topology gang's pods go (Koordinator ``coscheduling/core/network_topology_solver.go``
and ``network_topology_types.go``): pure functions over a :class:`~.topology_tree.TopologyTree` and the
per-node *offer slots* (how many of the job's pods each node takes, measured with the Filter plugins).

1. Each node's offer slot, selector pod count and score are summed up its chain of ancestors.
2. With ``podCountMultiple`` rules, each member's offer slot is cut down to a multiple, bottom-up.
3. The job must gather within the deepest layer whose rule is ``MustGather`` (none: the whole cluster):
   the members of that layer are the *must-gather* nodes.
4. Below them, breadth first, the deepest level that still has members offering at least the job's pod
   count gives the candidates: the smallest subtrees that fit.
5. Candidates are ordered by :func:`topology_less` (more pods of the same selector first, comparing
   each ancestor in turn; then the smaller offer slot, so the tightest fit; then score, then name), and
   the first candidate whose nodes can take every pod wins. Inside it, children are filled in the same
   order but largest offer slot first, and pods, sorted by name, fill the nodes in that order.

PreferGather rules are accepted but add nothing beyond step 4, as in Koordinator.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apis.scheduling.network_topology import LAYER_NODE, STRATEGY_MUST_GATHER, GangTopologySpec
from koord_scheduler.plugins.coscheduling.topology_tree import TopologyTree, TreeNode

NO_CLUSTER_NETWORK_TOPOLOGY = "no cluster network topology"
NO_PLANNED_PODS = "no planned pods"
NO_PENDING_PODS = "no pending pods"
INVALID_PLAN = "plan become invalid, wait for the next round"
NO_CANDIDATE = "no candidate topology nodes can accommodate job, desiredOfferSlot: {}, {}, {}"
NO_NODE_AVAILABLE = "0/{} nodes are available:"


@dataclass(frozen=True, slots=True)
class JobRequirements:
    must_gather_layer: str
    """"" when the job may spread over the whole cluster."""
    desired_offer_slot: int
    pod_count_multiple: Mapping[str, int]
    """Layer -> the pods placed under any one member of the layer must be a multiple of this."""


def requirements(spec: GangTopologySpec, tree: TopologyTree, desired: int) -> JobRequirements:
    """Koordinator's ``GetMustGatherLayer`` (the deepest layer with a MustGather rule) and
    ``GetLayerPodCountMultiple`` (rules with a multiple above 1; a later rule for a layer wins)."""
    deepest_first = sorted(spec.rules, key=lambda r: -tree.layer_index.get(r.layer, 0))
    must = next((r.layer for r in deepest_first if r.strategy == STRATEGY_MUST_GATHER), "")
    multiples = {r.layer: r.pod_count_multiple for r in spec.rules if r.pod_count_multiple > 1}
    return JobRequirements(must, desired, multiples)


@dataclass(frozen=True, slots=True)
class PlanFailure:
    message: str


def place_pods(
    tree: TopologyTree,
    pod_names: Sequence[tuple[str, str]],
    offer_slots: Mapping[str, int],
    req: JobRequirements,
    *,
    node_failures: Mapping[str, Sequence[str]] | None = None,
    existing_pods: Mapping[str, int] | None = None,
    scores: Mapping[str, int] | None = None,
) -> dict[str, str] | PlanFailure:
    """Pod key -> node for every pod of ``pod_names`` ((key, name) pairs), or why there is no placement.

    ``tree`` is evaluated in place: pass a fresh :meth:`~.TopologyTree.copy`. ``offer_slots``: node ->
    how many of the pods it takes (nodes absent take none); ``node_failures``: node -> the reasons of the
    Filter failure that ended its count (for the message); ``existing_pods``: node -> pods with the job's
    network-topology selector; ``scores``: node -> score (higher first).
    """
    evaluate(tree, offer_slots, scores or {}, existing_pods or {})
    constrain_by_multiple(tree.root, req.pod_count_multiple)
    must_gather = must_gather_nodes(tree.root, req.must_gather_layer)
    candidates = offer_slot_candidates(must_gather, req.desired_offer_slot)
    candidates.sort(key=functools.cmp_to_key(_comparator(lower_offer_slot=True)))
    for candidate in candidates:
        distribution: dict[str, int] = {}
        ordered, slot = distribute_offer_slot(req.desired_offer_slot, candidate, distribution, req.pod_count_multiple)
        if slot >= req.desired_offer_slot:
            return distribute_pods(pod_names, ordered, distribution)
    reasons = sorted(f"topology topologyNode {n.layer}/{n.name}: {n.offer_slot}" for n in must_gather)
    message = NO_CANDIDATE.format(
        req.desired_offer_slot, ";".join(reasons), fit_error(len(offer_slots), node_failures or {})
    )
    if req.pod_count_multiple:
        constraints = sorted(f"{layer}={m}" for layer, m in req.pod_count_multiple.items())
        message += "; podCountMultiple constraints: " + ", ".join(constraints)
    return PlanFailure(message)


def fit_error(num_nodes: int, node_failures: Mapping[str, Sequence[str]]) -> str:
    """kube-scheduler's ``FitError.Error()`` over the nodes that failed: ``0/N nodes are available:`` and
    the sorted reason histogram (nothing after the colon when no node failed)."""
    counts: Counter[str] = Counter()
    for reasons in node_failures.values():
        counts.update(reasons)
    text = NO_NODE_AVAILABLE.format(num_nodes)
    if counts:
        text += " " + ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items())) + "."
    return text


def evaluate(
    tree: TopologyTree, offer_slots: Mapping[str, int], scores: Mapping[str, int], existing_pods: Mapping[str, int]
) -> None:
    """Add each node's offer slot, score and selector pod count to it and every ancestor."""
    for name, slot in offer_slots.items():
        node = tree.leaves.get(name)
        score = scores.get(name, 0)
        while node is not None:
            node.offer_slot += slot
            node.score += score
            node = node.parent
    for name, count in existing_pods.items():
        node = tree.leaves.get(name)
        while node is not None:
            node.existing_pod_num += count
            node = node.parent


def constrain_by_multiple(node: TreeNode, multiples: Mapping[str, int]) -> None:
    """Bottom-up: each member offers the sum of its children's (constrained) offers, rounded down to its
    layer's multiple. Nothing to do without multiples."""
    if not multiples:
        return
    if node.layer != LAYER_NODE:
        total = 0
        for child in node.children.values():
            constrain_by_multiple(child, multiples)
            total += child.offer_slot
        node.offer_slot = total
    multiple = multiples.get(node.layer, 0)
    if multiple > 1:
        node.offer_slot = node.offer_slot // multiple * multiple


def must_gather_nodes(root: TreeNode, layer: str) -> list[TreeNode]:
    """The members of ``layer`` (breadth first), or the root alone when ``layer`` is ""."""
    if not layer:
        return [root]
    level = [root]
    while level:
        found = [n for n in level if n.layer == layer]
        if found:
            return found
        level = [c for n in level for c in n.children.values()]
    return []


def offer_slot_candidates(must_gather: Sequence[TreeNode], desired: int) -> list[TreeNode]:
    """Breadth first below ``must_gather``: the deepest level with members offering at least ``desired``
    (only subtrees of such members are searched)."""
    candidates: list[TreeNode] = []
    level = list(must_gather)
    while level:
        fitting = [n for n in level if n.offer_slot >= desired]
        if fitting:
            candidates = fitting
        level = [c for n in fitting for c in n.children.values()]
    return candidates


def topology_less(a: TreeNode, b: TreeNode, *, lower_offer_slot: bool) -> bool:
    """Koordinator's ``topologyNodeLessFunc``: more selector pods first (each ancestor in turn), then the
    smaller (``lower_offer_slot``) or larger offer slot (each ancestor in turn), then the higher score,
    then the name."""
    x: TreeNode | None = a
    y: TreeNode | None = b
    while x is not None and y is not None:
        if x.existing_pod_num != y.existing_pod_num:
            return x.existing_pod_num > y.existing_pod_num
        x, y = x.parent, y.parent
    x, y = a, b
    while x is not None and y is not None:
        if x.offer_slot != y.offer_slot:
            return (x.offer_slot < y.offer_slot) == lower_offer_slot
        x, y = x.parent, y.parent
    if a.score != b.score:
        return a.score > b.score
    return a.name < b.name


def _comparator(*, lower_offer_slot: bool) -> Callable[[TreeNode, TreeNode], int]:
    def compare(a: TreeNode, b: TreeNode) -> int:
        if topology_less(a, b, lower_offer_slot=lower_offer_slot):
            return -1
        if topology_less(b, a, lower_offer_slot=lower_offer_slot):
            return 1
        return 0

    return compare


def distribute_offer_slot(
    desired: int, node: TreeNode, distribution: dict[str, int], multiples: Mapping[str, int]
) -> tuple[list[str], int]:
    """Take up to ``desired`` pods below ``node``, children in :func:`topology_less` order (larger offer
    first). Fills ``distribution`` (node -> pods) and returns the nodes in fill order and the total."""
    most = min(node.offer_slot, desired)
    multiple = multiples.get(node.layer, 0)
    if multiple > 1:
        most = most // multiple * multiple
    if node.layer == LAYER_NODE:
        distribution[node.name] = most
        return [node.name], most
    children = sorted(node.children.values(), key=functools.cmp_to_key(_comparator(lower_offer_slot=False)))
    ordered: list[str] = []
    taken = 0
    for child in children:
        child_nodes, child_slot = distribute_offer_slot(most - taken, child, distribution, multiples)
        ordered.extend(child_nodes)
        taken += child_slot
    return ordered, taken


def distribute_pods(
    pod_names: Sequence[tuple[str, str]], ordered: Sequence[str], distribution: Mapping[str, int]
) -> dict[str, str]:
    """Pods sorted by name (not key, as Koordinator) fill the nodes in ``ordered``, each up to its share."""
    left = dict(distribution)
    plan: dict[str, str] = {}
    i = 0
    for key, _ in sorted(pod_names, key=lambda p: p[1]):
        while left.get(ordered[i], 0) <= 0:
            i += 1
        plan[key] = ordered[i]
        left[ordered[i]] -= 1
    return plan


def sort_nodes_by_topology(
    tree: TopologyTree, candidates: Sequence[str], existing_pods: Mapping[str, int]
) -> list[str]:
    """PreScore's order (Koordinator ``sortNodesByTopology``): each candidate offers one slot; nodes under
    members with more selector pods first, then under the smaller offer, then by name. ``tree`` is
    evaluated in place: pass a fresh copy. Candidates outside the tree come last, by name."""
    evaluate(tree, dict.fromkeys(candidates, 1), {}, existing_pods)
    inside = [n for n in candidates if n in tree.leaves]
    outside = sorted(n for n in candidates if n not in tree.leaves)

    compare = _comparator(lower_offer_slot=True)  # scores are all 0 here: Koordinator's order exactly

    def by_leaf(a: str, b: str) -> int:
        return compare(tree.leaves[a], tree.leaves[b])

    return sorted(inside, key=functools.cmp_to_key(by_leaf)) + outside
