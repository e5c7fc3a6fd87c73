"""Carrying out a preemption DefaultPreemption decided (kube-scheduler ``prepareCandidate``).

After the cycle (the PostFilter result nominates the node at once): lower-priority pods nominated to
that node lose their nomination, the preemptor's ``status.nominatedNodeName`` is written, and each victim
first gets a ``DisruptionTarget`` condition (status True, reason ``PreemptionByScheduler``, message
``"<schedulerName>: preempting to accommodate a higher priority pod"``,
:func:`.policy.disruption_target_patch`) through a pods/status patch, then is deleted through the API (a
victim waiting at Permit is rejected instead), with a ``Preempted`` event ``"Preempted by pod <uid> on
node <node>"``. Unlike upstream, a failed condition patch is logged and the deletion goes ahead: the
in-memory cluster cannot patch pods.

The API calls run as tasks beside the scheduling cycle (:mod:`koord_scheduler.plugins.victim_execution`,
shared with Coscheduling's job preemption). Until a victim is gone from the snapshot it counts as
terminating by preemption (:meth:`PreemptionExecutor.terminating_by_preemption`), which keeps its
preemptor from preempting again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from apis.core.types import Pod
from koord_scheduler.framework.handle import Handle
from koord_scheduler.plugins import names
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.metrics import PreemptionMetrics
from koord_scheduler.plugins.defaultpreemption.policy import Candidate
from koord_scheduler.plugins.victim_execution import VictimTracker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """One successful preemption, for ``simulate`` output."""

    preemptor: str
    node: str
    victims: tuple[str, ...]


class PreemptionExecutor:
    """See the module docstring."""

    def __init__(self, handle: Handle, *, metrics: PreemptionMetrics) -> None:
        self._handle = handle
        self._metrics = metrics
        self._victims = VictimTracker(handle, what="preemption")
        self.history: list[PreemptionRecord] = []

    def execute(self, pod: Pod, candidate: Candidate, lower_nominated: list[Pod]) -> None:
        """Start carrying out ``candidate`` for ``pod``; ``lower_nominated`` are the lower-priority pods
        nominated to the candidate's node (they lose their nomination)."""
        self._metrics.victims.observe(len(candidate.victims))
        for victim in candidate.victims:
            self._victims.track(victim, candidate.node_name)
        self.history.append(PreemptionRecord(pod.key, candidate.node_name, tuple(v.key for v in candidate.victims)))
        log.info(
            "pod %s preempts %s on node %s", pod.key, ", ".join(v.key for v in candidate.victims), candidate.node_name
        )
        self._victims.spawn(self._prepare_candidate(pod, candidate, lower_nominated))

    async def _prepare_candidate(self, pod: Pod, candidate: Candidate, lower: list[Pod]) -> None:
        cluster = self._handle.cluster
        node = candidate.node_name
        call = self._victims.call
        for other in lower:
            await call(cluster, "set_nominated_node_name", other, "", what=f"clearing the nomination of {other.key}")
        await call(cluster, "set_nominated_node_name", pod, node, what=f"nominating {pod.key} to {node}")
        for victim in candidate.victims:
            await self._victims.evict(
                victim,
                reject_plugin=names.DEFAULT_PREEMPTION,
                patch=policy.disruption_target_patch(victim, pod, self._handle.clock()),
                reason=f"Preempted by pod {pod.uid or pod.key} on node {node}",
            )

    def terminating_by_preemption(self, pod: Pod) -> bool:
        """``pod`` is a victim being deleted (by this scheduler, or marked DisruptionTarget and deleting)."""
        return self._victims.terminating(pod)

    def forget_gone_victims(self) -> None:
        """Stop tracking victims the snapshot no longer holds."""
        self._victims.forget_gone()

    async def drain(self) -> None:
        """Wait for the API calls of preemptions already decided."""
        await self._victims.drain()
