"""The binding cycle of one assumed pod (``bindingCycle`` in kube-scheduler's ``schedule_one.go``): the
expected node nominated, the wait at Permit, PreBind, Bind (or a binding extender), PostBind; run as its
own task, concurrently with the scheduling loop and the other bindings.

:class:`BindingCycle` is one of the parts :class:`~koord_scheduler.scheduler.scheduler.Scheduler` is made
of."""

from __future__ import annotations

import asyncio
import logging
import time

from apis.core.types import Pod
from koord_scheduler.extenders import bind_with_extenders
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.scheduler.attempt_results import AttemptResults, Binding
from koord_scheduler.scheduler.metrics import attempts_label
from koord_scheduler.scheduler.monitor import STAGE_BIND, STAGE_PRE_BIND
from koord_scheduler.scheduler.options import Outcome

log = logging.getLogger(__name__)
startup_log = logging.getLogger("koord_scheduler.startup")
"""Start-up time-line lines (``-v 2``)."""


class BindingCycle(AttemptResults):
    """The binding cycles in flight and what each one does (see the module docstring)."""

    scheduled_count: int
    _bindings: set[asyncio.Task[None]]
    _binding_tasks: dict[asyncio.Task[None], Binding]
    _binding_slots: asyncio.Semaphore

    async def _binding_cycle(self, b: Binding) -> None:
        pod, node = b.assumed, b.assumed.node_name
        try:
            status = await self._nominate_expected_node(b)
            # Waiting at Permit holds no binding slot: a gang larger than the pool must not starve itself.
            if status.is_success:
                status = await self._wait_on_permit(b)
        except Exception as exc:
            log_failure(log, f"waiting on Permit for {pod.key} failed", exc)
            status = Status(Code.ERROR, (str(exc),))
        if b.released:  # rejected at Permit and released by the scheduling loop already
            return
        in_flight = self.metrics.child(self.metrics.bindings_in_flight, "binding")
        in_flight.inc()
        try:
            # PreBind holds no binding slot either: it may wait on other controllers (VolumeBinding waits
            # for provisioning up to bindTimeoutSeconds), and kube-scheduler runs every binding cycle at
            # once. The slots bound the bind requests.
            if status.is_success:
                self.monitor.stage(pod.key, STAGE_PRE_BIND)
                status = await b.fwk.run_pre_bind(b.state, pod, node)
            if status.is_success:
                self.monitor.stage(pod.key, STAGE_BIND)
                async with self._binding_slots:
                    status = await self._bind(b, pod, node)
        except Exception as exc:  # keep the scheduler alive whatever a plugin does
            log_failure(log, f"binding cycle for {pod.key} failed", exc)
            status = Status(Code.ERROR, (str(exc),))
        finally:
            in_flight.dec()
        if not status.is_success:
            self._release(b, status)
            return
        self.cache.finish_binding(pod, self.clock())
        b.fwk.run_post_bind(b.state, pod, node)
        elapsed = time.perf_counter() - b.perf_start
        self.metrics.record_attempt("scheduled", b.fwk.profile_name, elapsed)
        self.metrics.pod_attempts.observe(b.qpi.attempts)
        first = b.qpi.initial_attempt_timestamp or b.started
        sli = self.metrics.child(self.metrics.sli_duration, attempts_label(b.qpi.attempts))
        sli.observe(max(0.0, self.clock() - first))
        self.scheduled_count += 1
        if self.scheduled_count == 1:
            startup_log.info(
                "start-up: first bind, %s to %s (%.2f CPU-s since start)", pod.key, node, time.process_time()
            )
        self._record(Outcome(pod.key, node, "", b.qpi.attempts))
        self.monitor.complete(pod.key)
        self.queue.done(pod.key)
        self._spawn(self.source.report_scheduled(pod, node))

    async def _bind(self, b: Binding, pod: Pod, node: str) -> Status:
        """``bind``: an interested binding extender binds instead of the Bind plugins (in a worker
        thread: its HTTP call must not stall the event loop)."""
        extenders = self.options.extenders
        binders = extenders.binder_for(pod) if extenders else []
        if binders:
            bound, message = await asyncio.to_thread(bind_with_extenders, binders, pod, node)
            if bound:
                return Status(Code.ERROR, (message,)) if message else Status()
        return await b.fwk.run_bind(b.state, pod, node)

    async def _nominate_expected_node(self, b: Binding) -> Status:
        """NominatedNodeNameForExpectation (beta, on in v1.35; ``bindingCycle``): when binding will take a
        while (the pod waits at Permit, or some PreBind plugin has work to do), ``status.nominatedNodeName``
        names the chosen node first, so other components (cluster autoscaler) see where the pod goes. The
        API server clears it at binding (ClearingNominatedNodeNameAfterBinding). A failed write is logged
        and binding goes on, as upstream."""
        if not self.options.feature_gates.enabled("NominatedNodeNameForExpectation"):
            return Status()
        pod, node = b.assumed, b.assumed.node_name
        pre_flight = b.fwk.run_pre_bind_pre_flights(b.state, pod, node)
        if pre_flight.code == Code.ERROR or pre_flight.is_rejected:
            return pre_flight
        if (pre_flight.is_success or b.waiting is not None) and pod.nominated_node_name != node:
            try:
                await self.source.client.set_nominated_node_name(pod, node)
            except Exception as exc:
                log_failure(log, f"setting nominatedNodeName of {pod.key} to {node} failed", exc, level=logging.WARNING)
        return Status()

    async def _wait_on_permit(self, b: Binding) -> Status:
        waiting = b.waiting
        if waiting is None:
            return Status()
        try:
            return await waiting.wait()
        finally:
            if self.waiting_pods.get(b.assumed.key) is waiting:
                self.waiting_pods.remove(b.assumed.key)

    def bindings_in_flight(self) -> set[str]:
        """Keys of the pods whose binding cycle is under way (waiting at Permit, PreBind, Bind) and has
        not given the pod back to the queue yet."""
        return {b.assumed.key for b in self._binding_tasks.values() if not b.released}

    def _binding_done(self, task: asyncio.Task[None]) -> None:
        self._bindings.discard(task)
        self._binding_tasks.pop(task, None)
