"""``PodScheduled=False`` on pending gang members, so ``kubectl describe pod`` says why the gang waits.

Koordinator's feature gate ``GangPendingPodsConditionPatch`` (Beta, on by default;
``coscheduling/core/core.go`` ``patchGangPendingPodsCondition``): once per round, when a member fails
*because an earlier member of the round failed* (a quick-failed, "non-root-cause" pod), every pending member
of the gang group that the round has not tried yet, except that pod, gets ``PodScheduled=False``, reason
``Unschedulable``, and the message the quick-failed pod got (``0/N nodes are available: <the round's
failure>. <its PostFilter message>``, kube-scheduler's ``FitError`` text). ``nominatedNodeName`` is left
alone. The pods the round did try got the same condition from the scheduler itself.

pykoord also writes the condition, under the same gate, on a member the plugin holds at PreEnqueue (its gang
does not have ``min-available`` pods yet, its PodGroup is missing, its annotations are unusable): Koordinator
records nothing for those, and the Event pykoord records expires after an hour, while the condition stays
until the pod binds. The message there leaves out the member counts (``(2/3)``) the Event shows, so that a
gang growing one pod at a time rewrites no earlier member's condition.

Differences from Koordinator, on purpose: members held by ``spec.schedulingGates`` are skipped (the API
server's ``SchedulingGated`` condition says more than ours would), and a pod is not written again with the
message it already shows.

Writes are background tasks (a failed write is logged at debug level, never retried: the next round or
PreEnqueue check writes again); :meth:`PendingConditions.drain` waits for them. The API server turns the
condition to ``True`` when the pod binds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from datetime import UTC, datetime
from typing import Any

from apis.core.parse import parse_pod
from apis.core.types import Pod
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.types import ObjectKind

log = logging.getLogger(__name__)

POD_KIND = ObjectKind(kind="Pod", group="", version="v1", plural="pods", namespaced=True, parse=parse_pod)
POD_SCHEDULED = "PodScheduled"
REASON_UNSCHEDULABLE = "Unschedulable"


def condition_patch(pod: Pod, message: str, *, now: float) -> dict[str, Any]:
    """The pods/status patch: one ``PodScheduled=False`` condition (merged by type), its
    ``lastTransitionTime`` only when the status changes (else the server keeps the old one), and the pod's
    UID as a precondition (a pod recreated under the same name is not written)."""
    condition: dict[str, Any] = {
        "type": POD_SCHEDULED,
        "status": "False",
        "reason": REASON_UNSCHEDULABLE,
        "message": message,
    }
    if pod.conditions.get(POD_SCHEDULED) != "False":
        condition["lastTransitionTime"] = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch: dict[str, Any] = {"status": {"conditions": [condition]}}
    if pod.uid:
        patch["metadata"] = {"uid": pod.uid}
    return patch


class PendingConditions:
    """Writes the condition on pending pods, at most once per pod and message."""

    def __init__(self, handle: Handle, *, enabled: bool) -> None:
        self._handle = handle
        self.enabled = enabled
        self._shown: dict[str, tuple[str, str]] = {}
        """Pod key -> (UID, message) last written on it."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.written = 0
        """Writes started (tests and the round's log line)."""

    def write(self, pods: Iterable[Pod], message: str) -> int:
        """Start a write on each of ``pods`` that is pending, not held by scheduling gates and not already
        showing ``message``; the number started (0 when the gate is off or outside an event loop)."""
        if not self.enabled:
            return 0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return 0
        started = 0
        for pod in pods:
            if pod.node_name or pod.scheduling_gates or self._shown.get(pod.key) == (pod.uid, message):
                continue
            self._shown[pod.key] = (pod.uid, message)
            patch = condition_patch(pod, message, now=self._handle.clock())
            self._spawn(loop, self._send(pod, patch))
            started += 1
        self.written += started
        return started

    def forget(self, key: str) -> None:
        """The pod bound or is gone: a later pod of that name starts afresh."""
        self._shown.pop(key, None)

    def _spawn(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> None:
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, pod: Pod, patch: dict[str, Any]) -> None:
        try:
            await self._handle.cluster.patch_object_status(POD_KIND, pod.name, patch, namespace=pod.namespace)
        except Exception as exc:  # best effort: gone, replaced, or the API server is away
            if self._shown.get(pod.key, ("", ""))[1] == patch["status"]["conditions"][0]["message"]:
                self._shown.pop(pod.key, None)  # not shown after all: the next attempt writes again
            log.debug("writing PodScheduled=False on gang member %s failed: %s", pod.key, exc)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
