"""Carrying out a preemption DefaultPreemption decided (kube-scheduler ``prepareCandidate``).

After the cycle (the PostFilter result nominates the node at once): lower-priority pods nominated to
that node lose their nomination, the preemptor's ``status.nominatedNodeName`` is written, and each victim
first gets a ``DisruptionTarget`` condition (status True, reason ``PreemptionByScheduler``, message
``"<schedulerName>: preempting to accommodate a higher priority pod"``,
:func:`.policy.disruption_target_patch`) through a pods/status patch, then is deleted through the API (a
victim waiting at Permit is rejected instead), with a ``Preempted`` event ``"Preempted by pod <uid> on
node <node>"``. Unlike upstream, a failed condition patch is logged and the deletion goes ahead: the
in-memory cluster cannot patch pods.

The API calls run as tasks beside the scheduling cycle. Until a victim is gone from the snapshot it
counts as terminating by preemption (:meth:`PreemptionExecutor.terminating_by_preemption`), which keeps
its preemptor from preempting again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from apis.core.parse import parse_pod
from apis.core.types import Pod
from koord_scheduler.framework.handle import ExtendedHandle
from koord_scheduler.framework.types import ObjectKind
from koord_scheduler.plugins import names
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.metrics import PreemptionMetrics
from koord_scheduler.plugins.defaultpreemption.policy import Candidate

log = logging.getLogger(__name__)

POD_KIND = ObjectKind(kind="Pod", group="", version="v1", plural="pods", namespaced=True, parse=parse_pod)
"""Pods as ``ClusterClient.patch_object_status`` addresses them (the pods/status subresource)."""


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """One successful preemption, for ``simulate`` output."""

    preemptor: str
    node: str
    victims: tuple[str, ...]


class PreemptionExecutor:
    """See the module docstring."""

    def __init__(self, handle: ExtendedHandle, *, metrics: PreemptionMetrics) -> None:
        self._handle = handle
        self._metrics = metrics
        self._in_flight: dict[str, str] = {}
        """Victim key -> node, from the decision until the victim is gone from the snapshot."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._condition_failures = 0
        self.history: list[PreemptionRecord] = []

    def execute(self, pod: Pod, candidate: Candidate, lower_nominated: list[Pod]) -> None:
        """Start carrying out ``candidate`` for ``pod``; ``lower_nominated`` are the lower-priority pods
        nominated to the candidate's node (they lose their nomination)."""
        self._metrics.victims.observe(len(candidate.victims))
        for victim in candidate.victims:
            self._in_flight[victim.key] = candidate.node_name
        self.history.append(PreemptionRecord(pod.key, candidate.node_name, tuple(v.key for v in candidate.victims)))
        log.info(
            "pod %s preempts %s on node %s", pod.key, ", ".join(v.key for v in candidate.victims), candidate.node_name
        )
        self._spawn(self._prepare_candidate(pod, candidate, lower_nominated))

    async def _prepare_candidate(self, pod: Pod, candidate: Candidate, lower: list[Pod]) -> None:
        cluster = self._handle.cluster
        node = candidate.node_name
        for other in lower:
            what = f"clearing the nomination of {other.key}"
            await _logged(cluster, "set_nominated_node_name", (other, ""), what=what)
        await _logged(cluster, "set_nominated_node_name", (pod, node), what=f"nominating {pod.key} to {node}")
        for victim in candidate.victims:
            waiting = self._handle.waiting_pod(victim.key)
            if waiting is not None:
                waiting.reject(names.DEFAULT_PREEMPTION, "preempted")
                continue
            patch = policy.disruption_target_patch(victim, pod, self._handle.clock())
            if patch is not None:
                await self._mark_disruption_target(victim, patch)
            reason = f"Preempted by pod {pod.uid or pod.key} on node {node}"
            ok = await _logged(cluster, "delete_pod", (victim,), {"reason": reason}, what=f"preempting {victim.key}")
            if not ok:
                self._in_flight.pop(victim.key, None)

    async def _mark_disruption_target(self, victim: Pod, patch: dict[str, Any]) -> None:
        """Best effort, unlike upstream (which leaves the victim alone when this patch fails): the in-memory
        cluster cannot patch pods yet, and the deletion must still happen there. The first failure is a
        warning, later ones are debug messages."""
        try:
            await self._handle.cluster.patch_object_status(POD_KIND, victim.name, patch, namespace=victim.namespace)
        except Exception as exc:
            level = logging.DEBUG if self._condition_failures else logging.WARNING
            self._condition_failures += 1
            what = "preemption: marking %s as a DisruptionTarget failed (it is deleted anyway): %s"
            log.log(level, what, victim.key, exc)

    def terminating_by_preemption(self, pod: Pod) -> bool:
        """``pod`` is a victim being deleted (by this scheduler, or marked DisruptionTarget and deleting)."""
        if pod.key in self._in_flight:
            return True
        return pod.meta.deletion_timestamp is not None and pod.conditions.get(policy.DISRUPTION_TARGET) == "True"

    def forget_gone_victims(self) -> None:
        """Stop tracking victims the snapshot no longer holds."""
        snapshot = self._handle.snapshot
        for key, node in list(self._in_flight.items()):
            info = snapshot.node_info(node)
            if info is None or key not in info.pods:
                del self._in_flight[key]

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            return
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the API calls of preemptions already decided."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def _logged(
    client: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None, *, what: str
) -> bool:
    """Call ``client.method``; a failure (including a client that lacks the method) is logged, not raised."""
    try:
        await getattr(client, method)(*args, **(kwargs or {}))
    except Exception as exc:
        log.warning("preemption: %s failed: %s", what, exc)
        return False
    return True
