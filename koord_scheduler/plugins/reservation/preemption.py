"""Reservation preemption (``ReservationArgs.enablePreemption``), Koordinator
``pkg/scheduler/plugins/reservation`` ``PreemptionMgr``.

With the arg set, the Reservation PostFilter first runs a preemption for the failed pod before
aggregating the reservation reasons. The preemptor may be an ordinary pod or a **reserve pod** (a
Reservation being scheduled): a Reservation can evict lower-priority pods to make room for itself, and
then becomes Available on the node it was nominated to. The search is DefaultPreemption's (dry run over
the nodes Filter rejected as Unschedulable, ``minCandidateNodesPercentage`` / ``minCandidateNodesAbsolute``
from the Reservation args, PodDisruptionBudget-aware reprieve, node choice, execution), with
Koordinator's victim rule (:func:`is_victim`):

- only pods of strictly lower priority;
- never a pod labelled ``scheduling.koordinator.sh/disable-preemptible: "true"``;
- never a reserve pod (a reservation is not preempted);
- never a ``scheduling.koordinator.sh/reservation-ignored: "true"`` pod. This differs from Koordinator,
  which evicts them too: such pods schedule as if reservations were not there, so a reservation that
  evicted one would see it come straight back onto the same capacity (preempt, recreate, preempt again).

Messages carry DefaultPreemption's ``preemption: `` prefix.
"""

from __future__ import annotations

from collections.abc import Iterable

from apis.config.plugin_args import DefaultPreemptionArgs
from apis.config.reservation_args import ReservationArgs
from apis.core.types import Pod
from apis.scheduling import ANNOTATION_RESERVE_POD, LABEL_RESERVATION_IGNORED
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.snapshot import NodeInfo
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import PostFilterResult
from koord_scheduler.plugins.defaultpreemption.metrics import PreemptionMetrics
from koord_scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from koord_scheduler.plugins.defaultpreemption.victims import VictimSearch

LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
"""Koordinator ``apis/extension``: a pod that is never a victim of reservation preemption."""


def is_victim(candidate: Pod, preemptor: Pod) -> bool:
    """Whether reservation preemption may evict ``candidate`` for ``preemptor`` (module docstring)."""
    if candidate.priority >= preemptor.priority:
        return False
    if candidate.labels.get(LABEL_DISABLE_PREEMPTIBLE) == "true":
        return False
    if candidate.annotations.get(ANNOTATION_RESERVE_POD) == "true":
        return False
    return candidate.labels.get(LABEL_RESERVATION_IGNORED) != "true"


def victims_of(pods: Iterable[Pod], preemptor: Pod) -> list[Pod]:
    return [p for p in pods if is_victim(p, preemptor)]


class ReservationVictimSearch(VictimSearch):
    """DefaultPreemption's dry run with :func:`is_victim` as the victim rule. The batch shortcuts
    (screening, resource arithmetic) assume DefaultPreemption's own rule, so every node goes through the
    per-node search (``SelectVictimsOnNode``)."""

    def __init__(self, handle: Handle) -> None:
        super().__init__(handle)
        self.fast_reprieve = False

    def nodes_independent(self, state: CycleState) -> bool:
        return False

    def potential_victims(self, info: NodeInfo, pod: Pod) -> list[Pod]:
        return victims_of(info.pods.values(), pod)


class ReservationPreemption:
    """The preemption the Reservation PostFilter runs first when ``enablePreemption`` is set."""

    def __init__(self, args: ReservationArgs, handle: Handle) -> None:
        preemption_args = DefaultPreemptionArgs(
            min_candidate_nodes_percentage=args.min_candidate_nodes_percentage,
            min_candidate_nodes_absolute=args.min_candidate_nodes_absolute,
        )
        self.preemption = DefaultPreemption(
            preemption_args, handle, metrics=PreemptionMetrics.of(handle.metrics_registry)
        )
        self.preemption.search = ReservationVictimSearch(handle)

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        return self.preemption.post_filter(state, pod, diagnosis)

    async def drain(self) -> None:
        await self.preemption.drain()


def settles(status: Status) -> bool:
    """Koordinator returns the preemption's own answer, without the reservation reasons, when it succeeded,
    when it was UnschedulableAndUnresolvable, or when it was an error (not a rejection)."""
    return status.is_success or status.code in (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.ERROR)
