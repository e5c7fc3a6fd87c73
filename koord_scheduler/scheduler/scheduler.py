"""The scheduler: its assembly and run loops (kube-scheduler's ``scheduler.go``).

:class:`Scheduler` is made of parts, as kube-scheduler's methods are spread over ``pkg/scheduler``:
:mod:`.event_handlers` (informer events into cache and queue), :mod:`.scheduling_cycle` (one pod:
filter, score, Reserve, Permit, then the hand-off), :mod:`.binding_cycle` (the concurrent binding of an
assumed pod) and :mod:`.attempt_results` (outcomes and failure handling). :class:`Outcome` and
:class:`SchedulerOptions` live in :mod:`.options` and are importable from here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Mapping

from koord_scheduler.framework.runtime import Framework
from koord_scheduler.scheduler.algorithm import Sampler
from koord_scheduler.scheduler.event_handlers import EventHandlers
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.monitor import MonitorOptions, SchedulingMonitor
from koord_scheduler.scheduler.options import Outcome, SchedulerOptions
from koord_scheduler.scheduler.queue import SchedulingQueue
from koord_scheduler.scheduler.scheduling_cycle import SchedulingCycle
from koord_scheduler.scheduler.services import SchedulerServices
from koord_scheduler.scheduler.source import ClusterSource

__all__ = ["Outcome", "Scheduler", "SchedulerOptions"]

startup_log = logging.getLogger("koord_scheduler.startup")
"""Start-up time-line lines (``-v 2``)."""


class Scheduler(EventHandlers, SchedulingCycle):
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
        self._rejected = deque()
        """Bindings whose pod a plugin rejected at Permit and that :meth:`_release_rejected` has not
        released yet."""
        self.next_pod_hooks = services.next_pod_hooks
        self.gated_messages: dict[str, str] = {}
        """Pod key -> the last PreEnqueue rejection (``simulate`` reports it for pods never attempted)."""
        self._binding_tasks = {}
        self._rejected_series: set[tuple[str, str]] = set()
        self.monitor = SchedulingMonitor(
            self.options.monitor or MonitorOptions(timeout=0),
            self.metrics.registry,
            profiles=[f.profile_name for f in self.profiles.values()],
        )
        """Attempts that run too long (:mod:`.monitor`); off unless ``options.monitor`` is set."""
        self.nominator = services.nominator
        services.attach(self)

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
