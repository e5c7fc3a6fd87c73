"""The scheduling cycle of one pod (``scheduleOne`` / ``schedulingCycle`` in kube-scheduler's
``schedule_one.go``): pop the next pod (a next-pod hook's first), filter and score, assume, Reserve,
Permit, then hand the pod to its binding cycle; a fit error goes through PostFilter (preemption), and
whatever the runtime did not turn into a status stays that pod's failure.

:class:`SchedulingCycle` is one of the parts :class:`~koord_scheduler.scheduler.scheduler.Scheduler` is
made of."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from apis.core.copying import replace_fields
from apis.core.types import Pod
from koord_scheduler.extenders import ExtenderError
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import fit_error_message
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.runtime import Framework, PluginCycleError
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import QueuedPodInfo
from koord_scheduler.framework.waiting_pods import WaitingPod
from koord_scheduler.scheduler.algorithm import FitError, NoNodesError, Sampler, schedule_pod
from koord_scheduler.scheduler.attempt_results import Binding
from koord_scheduler.scheduler.binding_cycle import BindingCycle
from koord_scheduler.scheduler.monitor import STAGE_PERMIT, STAGE_PRE_BIND
from koord_scheduler.scheduler.object_errors import SCHEDULING_ERROR

log = logging.getLogger(__name__)


class SchedulingCycle(BindingCycle):
    """One pod at a time, on the event-loop thread (see the module docstring)."""

    sampler: Sampler
    next_pod_hooks: list[Callable[[], str | None]]
    _rejected: deque[Binding]
    _yield_soon: bool

    def schedule_one(self) -> bool:
        """Pop one pod and run its scheduling cycle; starts its binding cycle. False if the queue is empty.

        Pods rejected at Permit (a gang's waiting members when the gang fails) are released before any
        pod is tried and again after the cycle, so no cycle sees resources a rejected pod no longer holds.
        """
        self._release_rejected()
        qpi = self._next_from_hooks()
        if qpi is None:
            self._release_rejected()  # a round that just ended may have rejected its waiting members
            qpi = self.queue.pop()
        if qpi is None:
            return False
        pod = qpi.pod
        fwk = self.profiles.get(pod.scheduler_name)
        if fwk is None or self.cache.get_pod(pod.key) is not None:
            self.queue.done(pod.key)
            return True
        perf_start = time.perf_counter()
        state = CycleState()
        self.monitor.start(pod, fwk.profile_name)
        try:
            self._schedule_cycle(fwk, state, qpi, perf_start)
        except Exception as exc:  # one pod's failure stays that pod's: the loop goes on
            self._contain_cycle_failure(fwk, state, qpi, exc, perf_start)
        self._release_rejected()
        return True

    def _rejection_of(self, binding: Binding) -> Callable[[WaitingPod], None]:
        def rejected(_: WaitingPod) -> None:
            self._rejected.append(binding)

        return rejected

    def _release_rejected(self) -> None:
        """Release the pods plugins rejected at Permit: Unreserve, forget, requeue, here in the scheduling
        loop rather than when their binding cycles next run (which may be many cycles later)."""
        while self._rejected:
            b = self._rejected.popleft()
            status = b.waiting.rejection if b.waiting is not None else None
            if status is not None and not b.released:
                self._release(b, status)

    def _contain_cycle_failure(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, exc: Exception, perf_start: float
    ) -> None:
        """What the runtime did not turn into a status raised in ``qpi``'s cycle (a plugin's per-node
        computation on an extreme value, say): reported once, the pod forgotten if it was assumed and
        retried with backoff as after any error, and the next pod scheduled."""
        pod = qpi.pod
        message = f"scheduling cycle raised {type(exc).__name__}: {exc}"
        self.metrics.object_errors.report("Pod", pod.key, SCHEDULING_ERROR, message, exc=exc)
        # Assumed in this cycle (a pod already in the cache is never popped into one), binding not started.
        assumed = self.cache.get_pod(pod.key) if self.cache.is_assumed(pod.key) else None
        if assumed is not None:
            fwk.run_unreserve(state, assumed, assumed.node_name)
            self.cache.forget_pod(assumed)
        try:
            self._fail(fwk, qpi, Status(Code.ERROR, (message,)), message, perf_start, error=True)
        except Exception as again:  # the pod goes back to the queue whatever the reporting does
            log.debug("reporting the failure of %s raised", pod.key, exc_info=again)
            self.queue.add_unschedulable(qpi, error=True)
            self.queue.done(pod.key)

    def _schedule_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, perf_start: float) -> None:
        """The scheduling cycle of one pod (``schedulingCycle`` in kube-scheduler's ``schedule_one.go``)."""
        pod = qpi.pod
        started = self.clock()
        try:
            result = schedule_pod(
                fwk,
                state,
                pod,
                self.cache.snapshot,
                self.sampler,
                nominator=self.nominator,
                extenders=self.options.extenders,
            )
        except FitError as err:
            self.metrics.algorithm_duration.observe(time.perf_counter() - perf_start)
            self._handle_fit_error(fwk, state, qpi, err, perf_start)
            return
        except NoNodesError as err:
            self._fail(fwk, qpi, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (str(err),)), str(err), perf_start)
            return
        except PluginCycleError as err:
            self._fail(fwk, qpi, err.status, err.status.message, perf_start, error=True)
            return
        except ExtenderError as err:  # a non-ignorable extender failed: the cycle fails with its error
            self._fail(fwk, qpi, Status(Code.ERROR, (str(err),)), str(err), perf_start, error=True)
            return
        self.metrics.algorithm_duration.observe(time.perf_counter() - perf_start)

        assumed = pod_on_node(pod, result.node_name)
        status = fwk.run_reservation_nominate(state, assumed, result.node_name)
        if not status.is_success:
            self._fail_after_assume(fwk, qpi, status, result.node_name, perf_start)
            return
        try:
            self.cache.assume_pod(assumed)
        except ValueError as exc:
            self._fail(fwk, qpi, Status(Code.ERROR, (str(exc),)), str(exc), perf_start, error=True)
            return
        self.nominator.delete(assumed)
        status = fwk.run_reserve(state, assumed, result.node_name)
        if not status.is_success:
            fwk.run_unreserve(state, assumed, result.node_name)
            self.cache.forget_pod(assumed)
            self._fail_after_assume(fwk, qpi, status, result.node_name, perf_start)
            return
        status, waits = fwk.run_permit(state, assumed, result.node_name)
        if not status.is_success and not status.is_wait:
            fwk.run_unreserve(state, assumed, result.node_name)
            self.cache.forget_pod(assumed)
            self._fail_after_assume(fwk, qpi, status, result.node_name, perf_start)
            return
        self.monitor.stage(pod.key, STAGE_PERMIT if waits else STAGE_PRE_BIND)
        binding = Binding(qpi, state, fwk, assumed, started, perf_start, waits)
        if waits:
            binding.waiting = WaitingPod(assumed, assumed.node_name, waits, on_reject=self._rejection_of(binding))
            self.waiting_pods.add(binding.waiting)
        task = asyncio.get_running_loop().create_task(self._binding_cycle(binding))
        self._bindings.add(task)
        self._binding_tasks[task] = binding
        task.add_done_callback(self._binding_done)

    def _next_from_hooks(self) -> QueuedPodInfo | None:
        for hook in self.next_pod_hooks:
            while True:
                try:
                    key = hook()
                except Exception as exc:
                    log_failure(log, "next-pod hook failed", exc)
                    break
                if key is None:
                    break
                qpi = self.queue.pop_key(key)
                if qpi is not None:
                    return qpi
        return None

    def _handle_fit_error(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, err: FitError, perf_start: float
    ) -> None:
        diagnosis = err.diagnosis
        if fwk.post_filter_plugins:
            result, status = fwk.run_post_filter(state, qpi.pod, diagnosis)
            if status.code == Code.ERROR:
                self._fail(fwk, qpi, status, status.message, perf_start, error=True)
                return
            if not status.is_success:
                diagnosis.post_filter_msg = status.message
            if result is not None:
                # A PostFilter result overrides the nomination; "" clears it (preemption found nothing).
                qpi.pod = replace(qpi.pod, nominated_node_name=result.nominated_node_name)
                self.nominator.add(qpi.pod)
                if result.nominated_node_name:
                    # Let the victims' deletions run before the next cycle looks at the cluster.
                    self._yield_soon = True
        message = fit_error_message(diagnosis)
        qpi.unschedulable_plugins = frozenset(diagnosis.unschedulable_plugins)
        qpi.pending_plugins = frozenset(diagnosis.pending_plugins)
        status = Status(Code.UNSCHEDULABLE, (message,))
        self._fail(fwk, qpi, status, message, perf_start)


def pod_on_node(pod: Pod, node_name: str) -> Pod:
    """``dataclasses.replace(pod, node_name=node_name)``, about five times cheaper
    (:func:`~apis.core.copying.replace_fields`: the fields are copied as they are instead of going
    through ``__init__``). Equal to what ``replace`` gives because nothing ``Pod.__post_init__`` derives
    (the key) depends on ``node_name``; a test pins the two together."""
    return replace_fields(pod, node_name=node_name)
