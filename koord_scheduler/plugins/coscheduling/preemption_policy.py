"""Job-level preemption's decisions as pure functions (Koordinator ``coscheduling/core/preemption.go``).

- :func:`is_possible_victim`: which pods on a node the job may preempt (strictly lower priority than the
  pod that triggered the preemption, not protected by a label, not a reserve pod, not of the job itself).
- :func:`preemption_costs`: Koordinator's per-node estimate: the sum, over the distinct jobs among the
  node's possible victims, of the rank of that job's priority among every victim priority in the dry run.
- :func:`pick_node`: the cheapest feasible node, the first by name on a tie.
- :func:`victim_order_key`: the order victims are given back in (priority descending, then job key, then
  name): the first ones the job still fits with are spared.
- :func:`disruption_target_patch` and the messages, word for word.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from apis.core.types import Pod
from apis.scheduling import ANNOTATION_RESERVE_POD
from apis.scheduling.elasticquota import LABEL_PREEMPTIBLE
from koord_scheduler.framework.status import Status
from koord_scheduler.plugins import victim_execution

LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
"""``"true"`` on a pod: never a victim (Koordinator ``apis/extension/preemption.go``)."""
LABEL_QUESTIONED_OBJECT_KEY = "scheduling.koordinator.sh/questioned-object-key"
"""The job key of a pod, for the cost estimate and the victim order (Koordinator ``GetExplanationKey``)."""

MESSAGE_PREFIX = "preemption: "
ALREADY_ATTEMPTED = "preemption already attempted by {} with message {}"
NO_PENDING_PODS = "no pending pods"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to terminating pod on the nominated node."
NO_POTENTIAL_VICTIMS = "no potential victims"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPT_SUCCESS = "preempt success, alreadyWaitingForBound: {}/{}"
PREEMPT_NEVER = "Never"
JOB_REJECT_PLUGIN = "JobRejectPlugin"
JOB_PREEMPTION_SUCCESS_PLUGIN = "JobPreemptionSuccessPlugin"
JOB_PREEMPTION_FAILURE_PLUGIN = "JobPreemptionFailurePlugin"


def is_possible_victim(victim: Pod, trigger: Pod, job: Collection[str] = ()) -> bool:
    """Strictly lower priority than ``trigger``; not labelled ``disable-preemptible: "true"`` nor quota
    ``preemptible: "false"``; not a Reservation's reserve pod (pykoord never preempts a reservation); not
    one of the job's own pods (keys in ``job``)."""
    if victim.priority >= trigger.priority or victim.key in job:
        return False
    labels = victim.labels
    if labels.get(LABEL_DISABLE_PREEMPTIBLE) == "true" or labels.get(LABEL_PREEMPTIBLE) == "false":
        return False
    return victim.annotations.get(ANNOTATION_RESERVE_POD) != "true"


def job_key(pod: Pod) -> str:
    return pod.labels.get(LABEL_QUESTIONED_OBJECT_KEY, "")


def preemption_costs(victims_by_node: Mapping[str, Sequence[Pod]]) -> dict[str, int]:
    """``estimatePreemptionCost``: node -> cost (see the module docstring)."""
    priorities = sorted({v.priority for victims in victims_by_node.values() for v in victims})
    rank = {p: i for i, p in enumerate(priorities)}
    out: dict[str, int] = {}
    for node, victims in victims_by_node.items():
        seen: set[str] = set()
        cost = 0
        for victim in victims:
            key = job_key(victim)
            if key not in seen:
                seen.add(key)
                cost += rank[victim.priority]
        out[node] = cost
    return out


def pick_node(feasible: Iterable[str], costs: Mapping[str, int]) -> str:
    """The feasible node with the lowest cost, the first by name among equals. ``feasible`` must not be
    empty."""
    ordered = sorted(feasible)
    return min(ordered, key=lambda n: costs.get(n, 0))


def victim_order_key(pod: Pod) -> tuple[int, str, str]:
    """``sortVictims``: priority descending, then job key, then name."""
    return (-pod.priority, job_key(pod), pod.name)


def fit_error_message(num_all_nodes: int, statuses: Iterable[Status]) -> str:
    """``FitError.Error()`` over the dry run's node statuses; nodes without one count as not helpful."""
    counts: dict[str, int] = {}
    recorded = 0
    for status in statuses:
        recorded += 1
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if num_all_nodes > recorded:
        counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + num_all_nodes - recorded
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{num_all_nodes} nodes are available: " + ", ".join(parts) + "."


def disruption_target_patch(
    victim: Pod, *, scheduler_name: str, preemptor: str, trigger: str, now: float
) -> dict[str, Any] | None:
    """The pods/status patch marking ``victim`` as preempted by a job: message ``"<schedulerName>:
    preempting to accommodate higher priority pods, preemptor: <job>, triggerPod: <ns/pod>"``. None when it
    already carries one."""
    message = (
        f"{scheduler_name}: preempting to accommodate higher priority pods, preemptor: {preemptor}, "
        f"triggerPod: {trigger}"
    )
    return victim_execution.disruption_target_patch(victim, message, now, observed_generation=False)
