"""The scheduler: event handling, the synchronous scheduling cycle and the concurrent binding cycle.

:class:`Outcome` and :class:`SchedulerOptions` live in :mod:`.options` and are importable from here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from apis.core.copying import replace_fields
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import fit_error_message
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.runtime import Framework, PluginCycleError
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    EventResource,
    ObjectHandler,
    ObjectKind,
    QueuedPodInfo,
)
from koord_scheduler.framework.waiting_pods import WaitingPod
from koord_scheduler.scheduler.algorithm import FitError, NoNodesError, Sampler, schedule_pod
from koord_scheduler.scheduler.cluster_events import node_update_action, object_cluster_event
from koord_scheduler.scheduler.extenders import ExtenderError, bind_with_extenders
from koord_scheduler.scheduler.metrics import SchedulerMetrics, attempts_label
from koord_scheduler.scheduler.monitor import (
    STAGE_BIND,
    STAGE_PERMIT,
    STAGE_PRE_BIND,
    MonitorOptions,
    SchedulingMonitor,
)
from koord_scheduler.scheduler.object_errors import HANDLER_ERROR, SCHEDULING_ERROR
from koord_scheduler.scheduler.options import Outcome, SchedulerOptions
from koord_scheduler.scheduler.queue import SchedulingQueue
from koord_scheduler.scheduler.services import SchedulerServices
from koord_scheduler.scheduler.source import ClusterSource, EventType

__all__ = ["Outcome", "Scheduler", "SchedulerOptions", "pod_on_node"]

log = logging.getLogger(__name__)
startup_log = logging.getLogger("koord_scheduler.startup")
"""Start-up time-line lines (``-v 2``)."""


@dataclass(slots=True)
class _Binding:
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


class Scheduler:
    """Runs pods whose ``schedulerName`` one of ``profiles`` serves."""

    def __init__(
        self,
        profiles: Mapping[str, Framework],
        services: SchedulerServices,
        queue: SchedulingQueue,
        source: ClusterSource,
        *,
        metrics: SchedulerMetrics | None = None,
        options: SchedulerOptions | None = None,
    ) -> None:
        self.profiles = dict(profiles)
        self.services = services
        self.cache = services.cache
        self.queue = queue
        self.source = source
        self.clock = services.clock
        self.metrics = metrics or SchedulerMetrics()
        self.options = options or SchedulerOptions()
        self.sampler = Sampler()
        self.outcomes: dict[str, Outcome] = {}
        """The last outcome of each pod that still exists (a deleted pod's is dropped)."""
        self._object_handlers = services.object_handlers
        self.watched_kinds = services.watched_kinds
        self._pod_handlers = services.pod_handlers
        self.simulation_reporters = services.simulation_reporters
        self._bindings: set[asyncio.Task[None]] = set()
        self._binding_slots = asyncio.Semaphore(self.options.max_concurrent_bindings)
        self._background: set[asyncio.Task[None]] = set()
        self.scheduled_count = 0
        """Pods bound so far (``run_until_idle`` reads it to tell progress from a stalled gang)."""
        self._yield_soon = False
        self._warmed_up = False
        self.first_pass_done = asyncio.Event()
        """Set once :meth:`run` has first emptied the queue: every pod pending at start has been tried and
        its binding is under way. Cluster mode starts the leader-only controllers then, not before."""
        self.pre_error_filters = services.pre_error_filters
        self.post_error_filters = services.post_error_filters
        self.waiting_pods = services.waiting_pods
        self._rejected: deque[_Binding] = deque()
        """Bindings whose pod a plugin rejected at Permit and that :meth:`_release_rejected` has not
        released yet."""
        self.next_pod_hooks = services.next_pod_hooks
        self.gated_messages: dict[str, str] = {}
        """Pod key -> the last PreEnqueue rejection (``simulate`` reports it for pods never attempted)."""
        self._binding_tasks: dict[asyncio.Task[None], _Binding] = {}
        self._rejected_series: set[tuple[str, str]] = set()
        self.monitor = SchedulingMonitor(
            self.options.monitor or MonitorOptions(timeout=0),
            self.metrics.registry,
            profiles=[f.profile_name for f in self.profiles.values()],
        )
        """Attempts that run too long (:mod:`.monitor`); off unless ``options.monitor`` is set."""
        self.nominator = services.nominator
        services.attach(self)

    # ----- event sink -----

    def responsible_for(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.profiles

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if event == EventType.DELETED:
            if old is not None:
                self.cache.remove_node(old.name)
                self.queue.on_cluster_event(ClusterEvent(EventResource.NODE, ActionType.DELETE), old, None)
            return
        assert new is not None
        self.cache.update_node(new)
        if old is None:
            action = ActionType.ADD
        else:
            action = node_update_action(old, new)
            if not action:
                return
        self.queue.on_cluster_event(ClusterEvent(EventResource.NODE, action), old, new)

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        self._handle_pod(event, old, new)
        for handler in self._pod_handlers:
            try:
                handler(event, old, new)
            except Exception as exc:  # a plugin's pod state may miss this pod; the others go on
                pod = new or old
                message = f"pod event handler raised {type(exc).__name__}: {exc}"
                self.metrics.object_errors.report("Pod", pod.key if pod else "", HANDLER_ERROR, message, exc=exc)

    def watch_pods(self, handler: ObjectHandler) -> None:
        """Plugins that keep per-pod state get every pod event after the cache and queue have it."""
        self.services.watch_pods(handler)

    def _handle_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        if event == EventType.DELETED:
            pod = old or new
            assert pod is not None
            self.nominator.delete(pod)
            self.gated_messages.pop(pod.key, None)
            self.outcomes.pop(pod.key, None)  # kept for pods that exist: a long run must not grow with churn
            if pod.node_name or self.cache.get_pod(pod.key) is not None:
                self.cache.remove_pod(pod)
                self.queue.on_cluster_event(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), pod, None)
            self.queue.delete(pod)
            return
        assert new is not None
        if new.node_name:
            self.nominator.delete(new)
            if self.cache.get_pod(new.key) is None or event == EventType.ADDED:
                self.queue.delete(new)
            self.cache.add_pod(new)
            action = ActionType.ADD if old is None or not old.node_name else ActionType.UPDATE
            self.queue.on_cluster_event(ClusterEvent(EventResource.ASSIGNED_POD, action), old, new)
            return
        if new.is_terminal or not self.responsible_for(new):
            self.nominator.delete(new)
            return
        if self.cache.is_assumed(new.key):
            # Already counted on its node; a nominatedNodeName set for expected placement must not count
            # it a second time among the nominated pods.
            self.nominator.delete(new)
        else:
            self.nominator.update(old, new)
        if old is None or old.key not in self.queue:
            if not self.cache.is_assumed(new.key):
                self.queue.add(new)
        else:
            self.queue.update(old, new)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        """Plugin handlers first (they update their state), then the queue: pods a plugin rejected
        may become schedulable on a Reservation or NodeMetric event they registered for."""
        for handler in self._object_handlers.get(kind, ()):
            handler(event, old, new)
        cluster_event = object_cluster_event(kind, event)
        if cluster_event is not None:
            self.queue.on_cluster_event(cluster_event, old, new)

    def on_invalid_object(
        self, kind: str, key: str, reason: str, message: str, exc: BaseException | None = None
    ) -> bool:
        return self.metrics.object_errors.report(kind, key, reason, message, exc=exc)

    def subscribe(self, kind: ObjectKind[Any], handler: ObjectHandler) -> None:
        self.services.watch(kind, handler)

    # ----- scheduling cycle -----

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

    def _rejection_of(self, binding: _Binding) -> Callable[[WaitingPod], None]:
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

    def _release(self, b: _Binding, status: Status) -> None:
        """Undo an assumed pod that will not bind (``status`` says why) and requeue it; once per binding."""
        b.released = True
        pod, node = b.assumed, b.assumed.node_name
        if b.waiting is not None and self.waiting_pods.get(pod.key) is b.waiting:
            self.waiting_pods.remove(pod.key)
        b.fwk.run_unreserve(b.state, pod, node)
        self.cache.forget_pod(pod)
        self.queue.on_cluster_event(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), pod, None)
        self._fail_after_assume(b.fwk, b.qpi, status, node, b.perf_start)

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
        binding = _Binding(qpi, state, fwk, assumed, started, perf_start, waits)
        if waits:
            binding.waiting = WaitingPod(assumed, assumed.node_name, waits, on_reject=self._rejection_of(binding))
            self.waiting_pods.add(binding.waiting)
        task = asyncio.get_running_loop().create_task(self._binding_cycle(binding))
        self._bindings.add(task)
        self._binding_tasks[task] = binding
        task.add_done_callback(self._binding_done)

    def bindings_in_flight(self) -> set[str]:
        """Keys of the pods whose binding cycle is under way (waiting at Permit, PreBind, Bind) and has
        not given the pod back to the queue yet."""
        return {b.assumed.key for b in self._binding_tasks.values() if not b.released}

    def _binding_done(self, task: asyncio.Task[None]) -> None:
        self._bindings.discard(task)
        self._binding_tasks.pop(task, None)

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

    # ----- binding cycle -----

    async def _binding_cycle(self, b: _Binding) -> None:
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

    async def _bind(self, b: _Binding, pod: Pod, node: str) -> Status:
        """``bind``: an interested binding extender binds instead of the Bind plugins (in a worker
        thread: its HTTP call must not stall the event loop)."""
        extenders = self.options.extenders
        binders = extenders.binder_for(pod) if extenders else []
        if binders:
            bound, message = await asyncio.to_thread(bind_with_extenders, binders, pod, node)
            if bound:
                return Status(Code.ERROR, (message,)) if message else Status()
        return await b.fwk.run_bind(b.state, pod, node)

    async def _nominate_expected_node(self, b: _Binding) -> Status:
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

    async def _wait_on_permit(self, b: _Binding) -> Status:
        waiting = b.waiting
        if waiting is None:
            return Status()
        try:
            return await waiting.wait()
        finally:
            if self.waiting_pods.get(b.assumed.key) is waiting:
                self.waiting_pods.remove(b.assumed.key)

    # ----- loop -----

    def warm_up(self) -> None:
        """Let the plugins prepare before the first cycle (:meth:`Framework.run_warm_up`); once. The
        loops call it when they start, after the cluster source has listed the cluster."""
        if self._warmed_up:
            return
        self._warmed_up = True
        for fwk in self.profiles.values():
            fwk.run_warm_up()

    async def run(self, stop: asyncio.Event) -> None:
        """Schedule until ``stop`` is set."""
        self.warm_up()
        startup_log.info("start-up: scheduling starts (%.2f CPU-s since start)", time.process_time())
        heap = self.options.heap
        if heap is not None:  # settled when first idle (``heap.idle`` below), not before the first bind
            heap.loading()
        while not stop.is_set():
            self.queue.flush()
            processed = 0
            while self.schedule_one():
                processed += 1
                if processed % self.options.yield_every == 0 or self._yield_soon:
                    self._yield_soon = False
                    await asyncio.sleep(0)
                    if stop.is_set():
                        return
            self._update_gauges()
            self.first_pass_done.set()
            if heap is not None and not self._bindings:  # nothing to pop, nothing in flight
                heap.idle()
            waiter = asyncio.ensure_future(self.queue.wait_for_pod())
            stopper = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({waiter, stopper}, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for f in (waiter, stopper):
                    if not f.done():
                        f.cancel()
                await asyncio.gather(waiter, stopper, return_exceptions=True)

    async def run_until_idle(self) -> None:
        """Schedule until nothing is active or backing off and no binding is in flight (the simulator).

        Time is virtual: when no pod can be popped, the group backoff (a gang round's) that ends first ends
        at once, and then, when every binding left waits at Permit, the earliest Permit wait times out at
        once instead of after its seconds. The run also ends when the cluster stops changing: once every
        pending pod has been tried a few times since the last binding or removal (a gang that can never
        complete would otherwise be retried forever), the last outcome of each pod is its answer."""
        self.warm_up()
        last_progress = self._progress()
        fruitless = 0
        while True:
            self.queue.flush()
            processed = 0
            stalled = False
            while self.schedule_one():
                processed += 1
                fruitless += 1
                if processed % self.options.yield_every == 0 or self._yield_soon:
                    self._yield_soon = False
                    await asyncio.sleep(0)
                    progress = self._progress()
                    if progress != last_progress:
                        last_progress, fruitless = progress, 0
                    elif fruitless > self._stall_limit():
                        stalled = True
                        break
            progress = self._progress()
            if progress != last_progress:
                last_progress, fruitless = progress, 0
            elif stalled or fruitless > self._stall_limit():
                break
            if self._bindings:
                moving = [t for t, b in self._binding_tasks.items() if b.waiting is None or b.waiting.is_done()]
                if moving:
                    await asyncio.wait(moving, return_when=asyncio.FIRST_COMPLETED)
                    continue
                await asyncio.sleep(0)
            if self.queue.end_backoff_early():  # a backoff (at most podMaxBackoffSeconds) ends before a Permit wait
                continue
            if self._bindings and self.waiting_pods.expire_first():
                continue
            await asyncio.sleep(0)
            if processed == 0 and not self._bindings:
                break
        # A stalled run leaves nothing waiting behind: the waits run out, in virtual time.
        while self.waiting_pods.expire_first():
            await asyncio.gather(*list(self._bindings), return_exceptions=True)
        await self.drain()

    def _progress(self) -> tuple[int, int, int]:
        """Binds and the cluster's pods and nodes: what a retry cannot change by itself (assumed pods,
        which come and go with every gang round, are left out)."""
        counts = self.cache.counts()
        return self.scheduled_count, counts["pods"] - counts["assumed_pods"], counts["nodes"]

    def _stall_limit(self) -> int:
        pods = sum(self.queue.pending_counts().values()) + len(self._bindings)
        return _STALL_ATTEMPTS_PER_POD * pods + _STALL_SLACK

    async def drain(self) -> None:
        """Wait for in-flight bindings and reports."""
        while self._bindings or self._background:
            await asyncio.gather(*list(self._bindings), *list(self._background), return_exceptions=True)

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

    def _update_gauges(self) -> None:
        for queue_name, n in self.queue.pending_counts().items():
            self.metrics.child(self.metrics.pending_pods, queue_name).set(n)
        for kind, n in self.cache.counts().items():
            self.metrics.child(self.metrics.cache_size, kind).set(n)
        rejected = self.queue.unschedulable_by_plugin()
        for key in self._rejected_series - rejected.keys():  # a series drops to 0, as kube-scheduler's
            self.metrics.child(self.metrics.unschedulable_pods, *key).set(0)
        for key, n in rejected.items():
            self.metrics.child(self.metrics.unschedulable_pods, *key).set(n)
        self._rejected_series = set(rejected)


_STALL_ATTEMPTS_PER_POD = 4
_STALL_SLACK = 16


def pod_on_node(pod: Pod, node_name: str) -> Pod:
    """``dataclasses.replace(pod, node_name=node_name)``, about five times cheaper
    (:func:`~apis.core.copying.replace_fields`: the fields are copied as they are instead of going
    through ``__init__``). Equal to what ``replace`` gives because nothing ``Pod.__post_init__`` derives
    (the key) depends on ``node_name``; a test pins the two together."""
    return replace_fields(pod, node_name=node_name)
