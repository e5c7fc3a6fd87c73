"""Job-level preemption (Koordinator ``coscheduling/core/preemption.go``), Coscheduling's PostFilter when
``enablePreemption`` is set.

The *preemptor* is the whole gang group while a round of it is being tried (its pending members, plus its
members waiting at Permit), and the single pod otherwise (a pod without a gang, or a member of a group
already satisfied once). Victims must be found for **every** pending member or none is preempted, so a
gang member never preempts for a gang that cannot complete.

1. **Eligibility**: the triggering pod's ``preemptionPolicy: Never`` -> ``not eligible due to
   preemptionPolicy=Never.``; a pending member whose nominated node still holds a lower-priority pod being
   deleted by preemption -> ``not eligible due to terminating pod on the nominated node.`` (except the
   triggering pod when Filter found its nominated node UnschedulableAndUnresolvable).
2. **Dry run** (:mod:`.job_dryrun`) on the nodes Filter found Unschedulable.
3. **Success**: every member waiting at Permit is rejected (it comes back nominated to the node it held),
   every pending member is nominated to its node (in memory at once, then ``status.nominatedNodeName``),
   lower-priority pods nominated to the chosen nodes lose their nomination, and each victim gets a
   ``DisruptionTarget`` condition and is deleted (a victim waiting at Permit is rejected instead), with a
   ``Preempted`` event. The triggering pod's PostFilter result is its node.
4. **Failure**: waiting members are rejected, every member's nomination is cleared, and the status is the
   dry run's FitError message.

Within a round the outcome is computed once: the round's later members get ``preemption already attempted
by <ns/pod> with message <message>``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.status import Code, Status, unschedulable
from koord_scheduler.framework.types import PostFilterResult
from koord_scheduler.plugins.coscheduling import preemption_policy as policy
from koord_scheduler.plugins.coscheduling.job_dryrun import DryRunError, JobDryRun, JobPlan, Placer
from koord_scheduler.plugins.victim_execution import VictimTracker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Preemptor:
    """Who preempts: ``key`` is the gang group id or the pod key."""

    key: str
    trigger: Pod
    pending: tuple[Pod, ...]
    waiting: tuple[Pod, ...]


@dataclass(frozen=True, slots=True)
class JobPreemptionRecord:
    """One successful job preemption, for ``simulate`` output."""

    preemptor: str
    trigger: str
    nominations: dict[str, str]
    victims: tuple[str, ...]


class JobPreemption:
    """See the module docstring. ``handle`` is the profile's framework: it runs the dry runs' Filter chain
    and holds the nominated pods."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._victims = VictimTracker(handle, what="job preemption")
        self.history: list[JobPreemptionRecord] = []

    def preempt(
        self, state: CycleState, preemptor: Preemptor, diagnosis: Diagnosis, *, placer: Placer | None = None
    ) -> tuple[PostFilterResult | None, Status]:
        """The decision and, on success, the start of its execution. Messages are unprefixed. ``placer``
        places all pending members at once (network-topology gangs); its failure is the message."""
        trigger = preemptor.trigger
        if not preemptor.pending:
            return None, unschedulable(policy.NO_PENDING_PODS)
        snapshot = self._handle.snapshot
        node_statuses = diagnosis.node_statuses(snapshot)
        self._victims.forget_gone()
        if trigger.preemption_policy == policy.PREEMPT_NEVER:
            return None, unschedulable(policy.NOT_ELIGIBLE_NEVER)
        if any(not self._eligible(p, trigger, node_statuses) for p in preemptor.pending):
            return None, unschedulable(policy.NOT_ELIGIBLE_TERMINATING)
        potential = sorted(n for n, s in node_statuses.items() if s.code == Code.UNSCHEDULABLE)
        statuses: dict[str, Status] = {
            n: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (policy.NOT_HELPFUL,))
            for n, s in node_statuses.items()
            if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        }
        job = {p.key for p in preemptor.pending} | {p.key for p in preemptor.waiting}
        dry_run = JobDryRun(
            self._handle, snapshot, state, trigger, nominated=self._handle.nominator, job=job, placer=placer
        )
        try:
            plan = dry_run.run(self._ordered(preemptor), potential)
        except DryRunError as exc:
            return None, exc.status
        if plan is None:
            statuses.update(dry_run.statuses)
            message = dry_run.failure or policy.fit_error_message(snapshot.num_nodes, statuses.values())
            self._cancel(preemptor, message)
            return PostFilterResult(""), unschedulable(message)
        waiting, everyone = len(preemptor.waiting), len(preemptor.pending) + len(preemptor.waiting)
        self._execute(preemptor, plan, policy.PREEMPT_SUCCESS.format(waiting, everyone))
        return PostFilterResult(plan.nominations[trigger.key]), Status()

    @staticmethod
    def _ordered(preemptor: Preemptor) -> list[Pod]:
        """The triggering pod first, then the other pending members by key."""
        trigger = preemptor.trigger.key
        others = sorted((p for p in preemptor.pending if p.key != trigger), key=lambda p: p.key)
        return [preemptor.trigger, *others] if any(p.key == trigger for p in preemptor.pending) else others

    def _eligible(self, pod: Pod, trigger: Pod, node_statuses: dict[str, Status]) -> bool:
        """``podEligibleToPreemptOthers`` for one pending member."""
        node = pod.nominated_node_name
        if not node:
            return True
        if pod.key == trigger.key:
            status = node_statuses.get(node)
            if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True
        info = self._handle.snapshot.node_info(node)
        if info is None:
            return True
        for other in info.pods.values():
            if not policy.is_possible_victim(other, pod):
                continue
            if self._victims.terminating(other):
                return False
        return True

    # ----- outcomes -----

    def _execute(self, preemptor: Preemptor, plan: JobPlan, message: str) -> None:
        victims = [v for node in sorted(plan.victims) for v in plan.victims[node]]
        for node, pods in plan.victims.items():
            for victim in pods:
                self._victims.track(victim, node)
        lower = self._lower_nominated(preemptor.trigger, plan.victims)
        record = JobPreemptionRecord(
            preemptor.key, preemptor.trigger.key, dict(plan.nominations), tuple(v.key for v in victims)
        )
        self.history.append(record)
        log.info(
            "job %s (trigger %s) preempts %s; nominations %s",
            preemptor.key,
            preemptor.trigger.key,
            ", ".join(v.key for v in victims),
            plan.nominations,
        )
        self._reject_waiting(preemptor, policy.JOB_PREEMPTION_SUCCESS_PLUGIN, message)
        nominations = dict(plan.nominations)
        nominations.update({p.key: p.node_name for p in preemptor.waiting})
        for pod in [*preemptor.pending, *preemptor.waiting]:
            self._nominate_in_memory(pod, nominations[pod.key])
        for pod in lower:
            self._nominate_in_memory(pod, "")
        self._victims.spawn(self._write(preemptor, nominations, lower, victims))

    def _cancel(self, preemptor: Preemptor, message: str) -> None:
        self._reject_waiting(preemptor, policy.JOB_PREEMPTION_FAILURE_PLUGIN, message)
        members = [*preemptor.pending, *preemptor.waiting]
        for pod in members:
            self._nominate_in_memory(pod, "")
        stale = [p for p in members if p.nominated_node_name]
        if stale:
            self._victims.spawn(self._write(preemptor, {}, stale, []))

    def _reject_waiting(self, preemptor: Preemptor, plugin: str, message: str) -> None:
        for pod in preemptor.waiting:
            waiting = self._handle.waiting_pod(pod.key)
            if waiting is not None:
                waiting.reject(plugin, message)

    def _nominate_in_memory(self, pod: Pod, node: str) -> None:
        nominator = self._handle.nominator
        if node:
            nominator.add(replace_pending(pod), node)
        else:
            nominator.delete(pod)

    def _lower_nominated(self, trigger: Pod, victims: dict[str, list[Pod]]) -> list[Pod]:
        nominated = self._handle.nominator
        return [
            p for n in sorted(victims) for p in nominated.nominated_pods_for_node(n) if p.priority < trigger.priority
        ]

    async def _write(
        self, preemptor: Preemptor, nominations: dict[str, str], cleared: Sequence[Pod], victims: Sequence[Pod]
    ) -> None:
        """The API calls of an outcome: nominations first (the watch then carries them before the
        victims' deletions), then the victims."""
        cluster = self._handle.cluster
        call = self._victims.call
        members = {p.key: p for p in [*preemptor.pending, *preemptor.waiting]}
        for key, node in sorted(nominations.items()):
            pod = members[key]
            if pod.nominated_node_name != node:
                await call(cluster, "set_nominated_node_name", pod, node, what=f"nominating {key} to {node}")
        for pod in cleared:
            await call(cluster, "set_nominated_node_name", pod, "", what=f"clearing the nomination of {pod.key}")
        trigger = preemptor.trigger
        for victim in victims:
            patch = policy.disruption_target_patch(
                victim,
                scheduler_name=trigger.scheduler_name,
                preemptor=preemptor.key,
                trigger=trigger.key,
                now=self._handle.clock(),
            )
            await self._victims.evict(
                victim,
                reject_plugin=policy.JOB_REJECT_PLUGIN,
                patch=patch,
                reason=f"Preempted by pod {trigger.uid or trigger.key} on node {victim.node_name}",
            )

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        rows = [
            {"preemptor": r.preemptor, "trigger": r.trigger, "nominations": r.nominations, "victims": list(r.victims)}
            for r in self.history
        ]
        return "JobPreemptions", rows

    async def drain(self) -> None:
        """Wait for the API calls of preemptions already decided (tests, simulate)."""
        await self._victims.drain()


def replace_pending(pod: Pod) -> Pod:
    """A member as the nominator keeps it: pending (a waiting member carries its assumed node)."""
    return replace(pod, node_name="") if pod.node_name else pod
