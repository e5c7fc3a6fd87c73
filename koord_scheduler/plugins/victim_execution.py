"""Carrying out the eviction of preemption victims, shared by DefaultPreemption and Coscheduling's job
preemption (kube-scheduler ``prepareCandidate``; Koordinator ``coscheduling/core/preemption.go``).

A victim is tracked from the decision until the snapshot no longer holds it, so a preemptor does not
preempt again for a node whose victims are still terminating. Eviction: a victim waiting at Permit is
rejected; any other gets its ``DisruptionTarget`` condition through a pods/status patch (best effort:
the deletion goes ahead when the patch fails, since the in-memory cluster cannot patch pods; the first
failure is a warning, later ones are debug messages), then is deleted with a ``Preempted`` event. The
API calls run as tasks beside the scheduling cycle; :meth:`VictimTracker.drain` waits for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from apis.core.parse import parse_pod
from apis.core.types import Pod
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.types import ObjectKind

log = logging.getLogger(__name__)

POD_KIND = ObjectKind(kind="Pod", group="", version="v1", plural="pods", namespaced=True, parse=parse_pod)
"""Pods as ``ClusterClient.patch_object_status`` addresses them (the pods/status subresource)."""

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def disruption_target_patch(
    victim: Pod, message: str, now: float, *, observed_generation: bool = True
) -> dict[str, Any] | None:
    """The pods/status patch marking ``victim`` as preempted: a ``DisruptionTarget`` condition (status True,
    reason ``PreemptionByScheduler``, ``message``, ``lastTransitionTime`` now and, when asked and known,
    ``observedGeneration``). None when the victim already carries a true DisruptionTarget (upstream patches
    only when ``UpdatePodCondition`` changed something). Only the new condition is sent: pods/status takes a
    strategic merge patch, which merges ``status.conditions`` by type."""
    if victim.conditions.get(DISRUPTION_TARGET) == "True":
        return None
    condition: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": message,
        "lastTransitionTime": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if observed_generation and victim.meta.generation:
        condition["observedGeneration"] = victim.meta.generation
    return {"status": {"conditions": [condition]}}


def terminating_by_preemption(pod: Pod) -> bool:
    """Being deleted after a scheduler marked it a preemption victim (``podTerminatingByPreemption``)."""
    return pod.meta.deletion_timestamp is not None and pod.conditions.get(DISRUPTION_TARGET) == "True"


class VictimTracker:
    """Victims in flight and the tasks that evict them (and any other API call the owning plugin runs in
    the background); ``what`` names the caller in log lines."""

    def __init__(self, handle: Handle, *, what: str) -> None:
        self._handle = handle
        self._what = what
        self._in_flight: dict[str, str] = {}
        """Victim key -> node, from the decision until the victim is gone from the snapshot."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._condition_failures = 0

    def track(self, victim: Pod, node: str) -> None:
        self._in_flight[victim.key] = node

    def in_flight(self, key: str) -> bool:
        return key in self._in_flight

    def terminating(self, pod: Pod) -> bool:
        """``pod`` is a victim on its way out: evicted by this tracker and still in the snapshot, or being
        deleted with a true DisruptionTarget (by any scheduler)."""
        return pod.key in self._in_flight or terminating_by_preemption(pod)

    def forget_gone(self) -> None:
        """Stop tracking victims the snapshot no longer holds."""
        snapshot = self._handle.snapshot
        for key, node in list(self._in_flight.items()):
            info = snapshot.node_info(node)
            if info is None or key not in info.pods:
                del self._in_flight[key]

    async def evict(self, victim: Pod, *, reject_plugin: str, patch: dict[str, Any] | None, reason: str) -> None:
        """Reject ``victim`` at Permit, or mark it (``patch``) and delete it; a failed deletion stops
        tracking it."""
        waiting = self._handle.waiting_pod(victim.key)
        if waiting is not None:
            waiting.reject(reject_plugin, "preempted")
            return
        cluster = self._handle.cluster
        if patch is not None:
            try:
                await cluster.patch_object_status(POD_KIND, victim.name, patch, namespace=victim.namespace)
            except Exception as exc:
                level = logging.DEBUG if self._condition_failures else logging.WARNING
                self._condition_failures += 1
                log.log(
                    level,
                    "%s: marking %s as a DisruptionTarget failed (it is deleted anyway): %s",
                    self._what,
                    victim.key,
                    exc,
                )
        if not await self.call(cluster, "delete_pod", victim, reason=reason, what=f"preempting {victim.key}"):
            self._in_flight.pop(victim.key, None)

    async def call(self, client: Any, method: str, *args: Any, what: str, **kwargs: Any) -> bool:
        """``client.method(*args, **kwargs)``; a failure (including a client that lacks the method) is
        logged, not raised."""
        try:
            await getattr(client, method)(*args, **kwargs)
        except Exception as exc:
            log.warning("%s: %s failed: %s", self._what, what, exc)
            return False
        return True

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task (dropped outside an event loop, where nothing could await it)."""
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
