"""The decisions of DefaultPreemption as pure functions (kube-scheduler v1.35
``plugins/defaultpreemption/default_preemption.go`` and ``framework/preemption/preemption.go``).

- :func:`num_candidates`: how many candidate nodes the dry run looks for.
- :func:`is_preemptible`: which pods on a node the incoming pod may preempt.
- :func:`split_by_pdb` and :func:`reprieve`: the victim search on one node. Every preemptible pod is
  removed; if the pod then fits, they are added back one at a time, most important first, PDB-violating
  ones before the others, and each one the pod still fits with is spared. What is left are the victims.
- :func:`pick_one_node`: the node choice among candidates.
- :func:`disruption_target_patch`: the ``DisruptionTarget`` condition set on a victim before its deletion.
- the messages, word for word.

Pod start time: upstream orders equal-priority pods by ``status.startTime``. pykoord's Pod does not carry
it, so :func:`start_time` uses ``metadata.creationTimestamp`` (and, like upstream for a pod that has not
started, "now" when that is missing too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from apis.core.selectors import label_selector_matches
from apis.core.types import LabelSelector, Pod
from apis.scheduling import ANNOTATION_RESERVE_POD
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins import victim_execution

MAX_INT32 = 2**31 - 1

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_CANDIDATE = "no candidate node for preemption"
MESSAGE_PREFIX = "preemption: "
PREEMPT_NEVER = "Never"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """What preemption reads of a ``policy/v1`` PodDisruptionBudget."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where preempting ``victims`` (most important first) makes room for the pod."""

    node_name: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int


def num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """``calculateNumCandidates``: ``nodes * percentage / 100`` (truncated), at least ``absolute``,
    at most ``num_nodes``."""
    n = num_nodes * percentage // 100
    n = max(n, absolute)
    return min(n, num_nodes)


def batch_size(wanted: int, *, examined: int, found: int) -> int:
    """How many nodes the dry run screens in its next batch: ``max(wanted, 16)`` at first; later, the nodes
    still needed at the rate found so far, plus a quarter and 8 more, between 16 and the first size. Only
    the amount of work changes with it, never which nodes are examined or in what order."""
    first = max(wanted, 16)
    if examined == 0:
        return first
    need = max(wanted - found, 1)
    estimate = -(-need * examined // max(found, 1))
    return max(16, min(first, estimate + estimate // 4 + 8))


def is_reserve_pod(pod: Pod) -> bool:
    """A Reservation's placeholder (Koordinator's ``reserve-pod`` annotation)."""
    return pod.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def is_preemptible(victim: Pod, preemptor: Pod) -> bool:
    """Lower priority than the preemptor, and not a reserve pod: Koordinator never preempts a reservation
    (its reserve pod defaults to MaxInt32 priority, and one given a lower priority is still spared)."""
    return victim.priority < preemptor.priority and not is_reserve_pod(victim)


def start_time(pod: Pod, now: float) -> float:
    return pod.meta.creation_timestamp if pod.meta.creation_timestamp is not None else now


def importance_key(pod: Pod, now: float) -> tuple[int, float]:
    """Sorting ascending by this puts the most important pod first (``util.MoreImportantPod``: higher
    priority, then earlier start)."""
    return (-pod.priority, start_time(pod, now))


def split_by_pdb(pods: Sequence[Pod], budgets: Sequence[DisruptionBudget]) -> tuple[list[Pod], list[Pod]]:
    """``filterPodsWithPDBViolation``: (violating, non-violating), each in input order.

    Each matching budget's ``disruptionsAllowed`` is decremented per pod (in order); a pod whose removal
    takes some matching budget below zero is violating. A pod listed in the budget's ``disruptedPods`` is
    already being disrupted and costs nothing. A nil or empty selector matches nothing here.
    """
    if not budgets:
        return [], list(pods)
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if budget.namespace != pod.namespace or not _selects(budget.selector, pod):
                    continue
                if pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def _selects(selector: LabelSelector | None, pod: Pod) -> bool:
    if selector is None or (not selector.match_labels and not selector.match_expressions):
        return False
    return label_selector_matches(selector, pod.labels)


def reprieve(violating: Sequence[T], non_violating: Sequence[T], fits_with: Callable[[T], bool]) -> tuple[list[T], int]:
    """Spare as many pods as possible: PDB-violating ones first, then the others, each list in the order
    given (most important first). ``fits_with(p)`` puts ``p`` back and says whether the pod still fits;
    when it does not, the caller takes ``p`` out again. Returns the victims in the order they were found
    and how many of them violate a PDB."""
    victims: list[T] = []
    violations = 0
    for p in violating:
        if not fits_with(p):
            victims.append(p)
            violations += 1
    for p in non_violating:
        if not fits_with(p):
            victims.append(p)
    return victims, violations


def order_victims(victims: list[Pod], *, both_groups: bool, now: float) -> list[Pod]:
    """Victims most important first: already so unless both PDB groups contributed."""
    return sorted(victims, key=lambda p: importance_key(p, now)) if both_groups else victims


def pick_one_node(candidates: Sequence[Candidate], now: float) -> Candidate | None:
    """``pickOneNodeForPreemption``. Each rule keeps the best-scoring candidates; the first rule that
    leaves one decides:

    1. fewest PDB violations;
    2. lowest priority of the most important victim;
    3. smallest sum of ``priority + MaxInt32 + 1`` over the victims (so negative priorities count);
    4. fewest victims;
    5. latest start time among the victims of the highest priority;
    6. the first remaining candidate (upstream iterates a map: effectively random).
    """
    if not candidates:
        return None
    rules: tuple[Callable[[Candidate], float], ...] = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + MAX_INT32 + 1 for v in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_start_of_highest(c.victims, now),
    )
    remaining = list(candidates)
    for rule in rules:
        scores = [rule(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            return remaining[0]
    return remaining[0]


def _earliest_start_of_highest(victims: Sequence[Pod], now: float) -> float:
    """``util.GetEarliestPodStartTime``: the earliest start among the victims of the highest priority."""
    top = max(v.priority for v in victims)
    return min(start_time(v, now) for v in victims if v.priority == top)


def disruption_target_patch(victim: Pod, preemptor: Pod, now: float) -> dict[str, Any] | None:
    """The pods/status patch that marks ``victim`` as preempted (``PreemptPod`` in upstream's
    ``preemption.go``): message ``"<preemptor's schedulerName>: preempting to accommodate a higher priority
    pod"``, ``observedGeneration`` the victim's generation (PodObservedGenerationTracking is GA in v1.35).
    None when the victim already carries a true DisruptionTarget."""
    message = f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod"
    return victim_execution.disruption_target_patch(victim, message, now)


def fit_error_message(num_all_nodes: int, statuses: Iterable[Status], absent_reason: str) -> str:
    """``FitError.Error()`` over the dry run's node statuses; nodes without one (never examined) count
    under ``absent_reason``. Same format as the Filter message: ``"0/3 nodes are available: 2 x, 1 y."``."""
    counts: Counter[str] = Counter()
    recorded = 0
    for status in statuses:
        recorded += 1
        for reason in status.reasons:
            counts[reason] += 1
    absent = num_all_nodes - recorded
    if absent > 0:
        counts[absent_reason] += absent
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{num_all_nodes} nodes are available: " + ", ".join(parts) + "."


def potential_nodes(node_statuses: Mapping[str, Status], node_order: Sequence[str]) -> list[str]:
    """Nodes whose Filter status was Unschedulable (not UnschedulableAndUnresolvable), in node order:
    removing pods may help only there."""
    return [n for n in node_order if (s := node_statuses.get(n)) is not None and s.code == Code.UNSCHEDULABLE]


__all__ = [
    "MAX_INT32",
    "MESSAGE_PREFIX",
    "NOT_ELIGIBLE_NEVER",
    "NOT_ELIGIBLE_TERMINATING",
    "NOT_HELPFUL",
    "NO_CANDIDATE",
    "NO_VICTIMS",
    "Candidate",
    "DisruptionBudget",
    "batch_size",
    "disruption_target_patch",
    "fit_error_message",
    "importance_key",
    "is_preemptible",
    "is_reserve_pod",
    "num_candidates",
    "order_victims",
    "pick_one_node",
    "potential_nodes",
    "reprieve",
    "split_by_pdb",
    "start_time",
]
