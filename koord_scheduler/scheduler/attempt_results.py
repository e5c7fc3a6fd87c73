"""What an attempt ends in, shared by the scheduling and binding cycles: the outcome recorded, a failed
attempt handled (``handleSchedulingFailure`` in kube-scheduler's ``schedule_one.go``: error-handler
filters, back to the queue, the Unschedulable report), an assumed pod that will not bind released, and the
API reports run in the background.

:class:`AttemptResults` is one of the parts :class:`~koord_scheduler.scheduler.scheduler.Scheduler` is
made of, as kube-scheduler's ``Scheduler`` methods are spread over the files of ``pkg/scheduler``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.runtime import Framework
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import ActionType, ClusterEvent, ErrorHandlerFilter, EventResource, QueuedPodInfo
from koord_scheduler.framework.waiting_pods import WaitingPod, WaitingPods
from koord_scheduler.scheduler.cache import SchedulerCache
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.monitor import SchedulingMonitor
from koord_scheduler.scheduler.nominator import PodNominator
from koord_scheduler.scheduler.options import Outcome, SchedulerOptions
from koord_scheduler.scheduler.queue import SchedulingQueue
from koord_scheduler.scheduler.services import SchedulerServices
from koord_scheduler.scheduler.source import ClusterSource

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Binding:
    qpi: QueuedPodInfo
    state: CycleState
    fwk: Framework
    assumed: Pod
    started: float
    perf_start: float
    waits: dict[str, float] = field(default_factory=dict)
    waiting: WaitingPod | None = None
    """Registered in ``Scheduler.waiting_pods`` at Permit, in the scheduling cycle, so a Permit plugin of
    a later cycle can allow it before its binding task first runs."""
    released: bool = False
    """Unreserved, forgotten and requeued (rejected at Permit, or its binding failed): nothing left to do."""


class AttemptResults:
    """Recording and failing attempts (see the module docstring)."""

    # The scheduler's state these methods share (set by ``Scheduler.__init__``).
    profiles: dict[str, Framework]
    services: SchedulerServices
    cache: SchedulerCache
    queue: SchedulingQueue
    source: ClusterSource
    clock: Callable[[], float]
    metrics: SchedulerMetrics
    options: SchedulerOptions
    monitor: SchedulingMonitor
    nominator: PodNominator
    outcomes: dict[str, Outcome]
    waiting_pods: WaitingPods
    pre_error_filters: list[ErrorHandlerFilter]
    post_error_filters: list[ErrorHandlerFilter]
    _background: set[asyncio.Task[None]]

    def _release(self, b: Binding, status: Status) -> None:
        """Undo an assumed pod that will not bind (``status`` says why) and requeue it; once per binding."""
        b.released = True
        pod, node = b.assumed, b.assumed.node_name
        if b.waiting is not None and self.waiting_pods.get(pod.key) is b.waiting:
            self.waiting_pods.remove(pod.key)
        b.fwk.run_unreserve(b.state, pod, node)
        self.cache.forget_pod(pod)
        self.queue.on_cluster_event(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), pod, None)
        self._fail_after_assume(b.fwk, b.qpi, status, node, b.perf_start)

    def _fail_after_assume(
        self, fwk: Framework, qpi: QueuedPodInfo, status: Status, node: str, perf_start: float
    ) -> None:
        if status.is_rejected:
            qpi.unschedulable_plugins = frozenset({status.plugin}) if status.plugin else frozenset()
            message = f"0/1 nodes are available: 1 {status.message}."
            self._fail(fwk, qpi, status, message, perf_start)
        else:
            self._fail(fwk, qpi, status, status.message, perf_start, error=True)

    def _fail(
        self,
        fwk: Framework,
        qpi: QueuedPodInfo,
        status: Status,
        message: str,
        perf_start: float,
        *,
        error: bool = False,
    ) -> None:
        result = "error" if error or status.code == Code.ERROR else "unschedulable"
        elapsed = time.perf_counter() - perf_start
        self.metrics.record_attempt(result, fwk.profile_name, elapsed)
        pod = qpi.pod
        self._record(Outcome(pod.key, None, message, qpi.attempts))
        self.monitor.complete(pod.key)
        failure = Status(status.code, (message,), status.plugin)
        handled = False
        for pre in self.pre_error_filters:
            try:
                if pre(qpi, failure):
                    handled = True
                    break
            except Exception as exc:
                log_failure(log, f"pre error-handler filter failed for {pod.key}", exc)
        if not handled:
            self.queue.add_unschedulable(qpi, error=error or status.code == Code.ERROR)
            reason = "SchedulerError" if result == "error" else "Unschedulable"
            log.info("pod %s unschedulable: %s", pod.key, message)
            self._spawn(self.source.report_unschedulable(pod, reason=reason, message=message))
        self.queue.done(pod.key)
        for post in self.post_error_filters:
            try:
                if post(qpi, failure):
                    break
            except Exception as exc:
                log_failure(log, f"post error-handler filter failed for {pod.key}", exc)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._on_background_done)

    def _on_background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background report failed: %s", task.exception())

    def _record(self, outcome: Outcome) -> None:
        self.outcomes[outcome.pod_key] = outcome
        if self.options.on_outcome is not None:
            self.options.on_outcome(outcome)
