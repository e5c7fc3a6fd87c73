"""The scheduling queue: kube-scheduler's ``PriorityQueue`` (``pkg/scheduler/backend/queue``).

Where a pending pod can be:

- **activeQ**: ready to be tried, a heap in QueueSort order.
- **backoffQ**: failed recently and waits out ``initial * 2^(attempts-1)`` seconds; a heap by backoff expiry,
  ties in activeQ order. Pods that must wait out their whole backoff wait in a separate heap, ordered by
  expiry alone, which pop-from-backoff never takes from: those that failed with an error (no rejecting
  plugin), and, in a third heap, those tried in a round with others (``group_backoff``: a gang's members back
  off as a group, so a gang that cannot complete is retried once per backoff, not whenever the queue is idle).
- **unschedulable pool**: rejected by plugins and waiting for a cluster event that one of those plugins says
  may help (its QueueingHint returns Queue), or for ``max_in_unschedulable_seconds`` to pass.
- **gated pool**: rejected by a PreEnqueue plugin; it comes back through the same hints, with the gating
  plugin as the rejector, and PreEnqueue runs again before it enters activeQ or backoffQ.
- **in flight**: popped and being scheduled. Cluster events seen meanwhile are logged and replayed through the
  pod's hints by :meth:`SchedulingQueue.add_unschedulable`, so an event that arrives mid-attempt is not lost.

Everything runs on one asyncio thread and reads time only from the injected clock. Not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.core.types import Pod
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import (
    ClusterEvent,
    ClusterEventWithHint,
    QueuedPodInfo,
)
from koord_scheduler.scheduler.queue.backoff import backoff_expiry, is_backing_off, release_time
from koord_scheduler.scheduler.queue.hints import QueueingHints, Strategy, event_label
from koord_scheduler.scheduler.queue.pod_events import pod_scheduling_property_events
from koord_scheduler.scheduler.queue.pod_heap import Order, PodHeap

logger = logging.getLogger(__name__)

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "in-flight"
"""Sub-queue names: the ``queue`` label of ``scheduler_pending_pods`` and
``scheduler_queue_incoming_pods_total``. Gated pods count as ``gated`` in the gauge but enter as
``unschedulable`` in the counter, as in kube. In-flight pods (being scheduled, waiting at Permit, binding) are
not pending: :data:`IN_FLIGHT` appears only in :meth:`SchedulingQueue.locations`."""

POD_ADD = "PodAdd"
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
UNSCHEDULED_POD_UPDATE = "UnscheduledPodUpdate"
FORCE_ACTIVATE = "ForceActivate"
"""``event`` label values of ``scheduler_queue_incoming_pods_total`` for the queue's own moves; cluster events
use :func:`event_label`."""

_MIN_TIMER_SECONDS = 0.001


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Tuning and hooks for :class:`SchedulingQueue`.

    - ``initial_backoff_seconds`` / ``max_backoff_seconds``: kube's ``podInitialBackoffSeconds`` (1) and
      ``podMaxBackoffSeconds`` (10).
    - ``max_in_unschedulable_seconds``: kube's ``podMaxInUnschedulablePodsDuration`` (5 min), the safety net
      for a hint that never fires.
    - ``pop_from_backoff``: KEP-5142 (on by default since 1.33): with activeQ empty, ``pop`` takes the head of
      the backoffQ before its backoff ends; backoff expiries are then truncated to whole seconds.
    - ``sort_key``: when given, orders activeQ instead of ``less``, and must agree with it; a key is much
      faster than a comparison function (PrioritySort: ``(-priority, timestamp)``).
    - ``on_incoming``: called with ``(queue, event)`` each time a pod enters a sub-queue, for
      ``scheduler_queue_incoming_pods_total``. ``scheduler_pending_pods`` should read
      :meth:`SchedulingQueue.pending_counts`, which is O(1).
    """

    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 10.0
    max_in_unschedulable_seconds: float = 300.0
    pop_from_backoff: bool = True
    sort_key: Callable[[QueuedPodInfo], Any] | None = None
    on_incoming: Callable[[str, str], None] | None = None


DEFAULT_QUEUE_OPTIONS = QueueOptions()


@dataclass(slots=True)
class _InFlight:
    pod: Pod
    """The newest version of the pod seen while it was being scheduled."""
    log_start: int
    """Absolute index in the event log of the first event this attempt has not seen."""
    gone: bool = False
    """Deleted while in flight: the attempt's outcome is dropped."""


class _LessOrder:
    """Adapts a ``less`` function to heap order, ties broken by arrival."""

    __slots__ = ("less", "qpi", "seq")

    def __init__(self, qpi: QueuedPodInfo, seq: int, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]):
        self.qpi = qpi
        self.seq = seq
        self.less = less

    def __lt__(self, other: _LessOrder) -> bool:
        if self.less(self.qpi, other.qpi):
            return True
        if self.less(other.qpi, self.qpi):
            return False
        return self.seq < other.seq


_NO_PLUGINS: frozenset[str] = frozenset()


class SchedulingQueue:
    """Pending pods of one scheduler, between the informers and the scheduling loop.

    ``pre_enqueue`` runs the profile's PreEnqueue plugins and returns the first rejection, stamped with the
    plugin's name. ``plugin_events`` maps each plugin to the events it registered (``EventsToRegister``); a
    plugin absent from it, or registered with no events, is requeued by every event.
    """

    def __init__(
        self,
        *,
        less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
        pre_enqueue: Callable[[Pod], Status],
        plugin_events: Mapping[str, Sequence[ClusterEventWithHint]],
        clock: Callable[[], float],
        options: QueueOptions = DEFAULT_QUEUE_OPTIONS,
    ) -> None:
        self._pre_enqueue = pre_enqueue
        self._clock = clock
        self._options = options
        self._align = options.pop_from_backoff
        self._hints = QueueingHints(plugin_events)

        active_order = _active_order(less, options.sort_key)
        backoff_order: Order = (
            (lambda qpi, seq: (qpi.backoff_expiry, *active_order(qpi, seq)))
            if options.pop_from_backoff
            else (lambda qpi, seq: (qpi.backoff_expiry,))
        )
        self._active = PodHeap(active_order)
        self._backoff = PodHeap(backoff_order)
        self._error_backoff = PodHeap(lambda qpi, seq: (qpi.backoff_expiry,))
        self._group_backoff = PodHeap(lambda qpi, seq: (qpi.backoff_expiry,))
        self._backoff_heaps = (self._backoff, self._error_backoff, self._group_backoff)
        self._heaps = (self._active, *self._backoff_heaps)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        """Insertion order is timestamp order: pods enter only from add_unschedulable, stamped with now."""
        self._gated: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, _InFlight] = {}
        """Pop order, so the first record has the oldest log_start."""
        self._event_log: list[tuple[ClusterEvent, object | None, object | None]] = []
        self._log_base = 0
        self._seq = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._round_first: QueuedPodInfo | None = None
        """The pod :meth:`pop` took last: pods taken by :meth:`pop_key` join its round."""

    # ---- informer side -------------------------------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new pending pod: PreEnqueue, then the gated pool or activeQ. A known key is an update."""
        if pod.node_name:
            return
        key = pod.key
        known = self._find_pod(key)
        if known is not None:
            self.update(known, pod)
            return
        self._enter_active(QueuedPodInfo(pod, timestamp=self._clock()), POD_ADD, key)

    def update(self, old: Pod, new: Pod) -> None:
        """A pending pod changed.

        A pod that now has a node leaves the queue. In flight: the change is logged as events for the
        attempt's outcome and the newer pod kept. In activeQ/backoffQ: updated in place. In the unschedulable
        or gated pool: the change is turned into events (:func:`pod_scheduling_property_events`) and run
        through the pod's hints, which may move it (a gated pod whose gates are gone goes to activeQ this
        way). Unknown: added as new.
        """
        key = new.key
        flight = self._in_flight.get(key)
        if new.node_name:
            self._remove_queued(key, new.uid)
            if flight is not None:
                flight.pod = new
            return
        if flight is not None and not flight.gone:
            for event in pod_scheduling_property_events(old, new):
                self._event_log.append((event, old, new))
            flight.pod = new
            return
        for heap in self._heaps:
            queued = heap.get(key)
            if queued is not None:
                queued.pod = new
                heap.push(queued, self._next_seq(), key)
                return
        waiting = self._unschedulable.get(key) or self._gated.get(key)
        if waiting is None:
            self._enter_active(QueuedPodInfo(new, timestamp=self._clock()), UNSCHEDULED_POD_UPDATE, key)
            return
        waiting.pod = new
        for event in pod_scheduling_property_events(old, new):
            strategy = self._hints.strategy(waiting, event, old, new)
            if strategy is Strategy.SKIP:
                continue
            if self._move_waiting(waiting, strategy, event_label(event)) != GATED:
                return

    def delete(self, pod: Pod) -> None:
        """Forget ``pod`` wherever it is; an in-flight attempt's outcome will be dropped. A stale delete of an
        older pod with the same key (different uid) is ignored."""
        key = pod.key
        flight = self._in_flight.get(key)
        if flight is not None and _same_incarnation(flight.pod, pod):
            flight.gone = True
        self._remove_queued(key, pod.uid)

    def on_cluster_event(self, event: ClusterEvent, old: object | None, new: object | None) -> None:
        """Requeue waiting pods that ``event`` may help, and log it for pods in flight.

        A waiting pod moves when one of its rejecting plugins registered an event matching ``event``
        whose hint says Queue (no hint: Queue). Queue from a Pending plugin skips backoff. A pod with no
        rejecting plugin, and any pod on a wildcard ``(*, ALL)`` event, moves regardless.
        """
        if self._in_flight:
            self._event_log.append((event, old, new))
        if not self._unschedulable and not self._gated:
            return
        label = ""
        for waiting in [*self._unschedulable.values(), *self._gated.values()]:
            strategy = self._hints.strategy(waiting, event, old, new)
            if strategy is not Strategy.SKIP:
                label = label or event_label(event)
                self._move_waiting(waiting, strategy, label)

    # ---- scheduling loop side ------------------------------------------------------------------------

    def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, or None. Never blocks.

        Takes activeQ's head (after moving pods whose backoff has ended); with activeQ empty and
        ``pop_from_backoff`` on, the backoffQ's head. Counts the attempt, clears the rejecting plugins of the
        previous one and marks the pod in flight until :meth:`add_unschedulable` or :meth:`done`.
        """
        now = self._clock()
        if any(self._backoff_heaps):
            self._flush_backoff(now)
        qpi = self._active.pop()
        if qpi is None and self._options.pop_from_backoff:
            qpi = self._backoff.pop()
        if qpi is None:
            return None
        self._round_first = qpi
        return self._start_attempt(qpi, now)

    def pop_key(self, key: str) -> QueuedPodInfo | None:
        """Take the pod ``key`` out of whichever sub-queue holds it and start its attempt, as :meth:`pop`
        does (Koordinator's NextPod: a plugin picks the next pod). A pod in the gated pool is taken only if
        PreEnqueue now passes. None if the pod is not queued (in flight, deleted, gated).

        The pod joins the round of the pod :meth:`pop` took last (the one whose attempt made the plugin
        start picking): both take the larger attempt count and back off as a group (``group_backoff``),
        as Koordinator's ``CopyQueueInfoToPod`` has a gang retried as a whole, not member by member."""
        qpi: QueuedPodInfo | None = None
        for heap in self._heaps:
            if heap.get(key) is not None:
                qpi = heap.remove(key)
                break
        if qpi is None and key in self._unschedulable:
            qpi = self._unschedulable.pop(key)
        if qpi is None and key in self._gated:
            gated = self._gated[key]
            if not self._pre_enqueue(gated.pod).is_success:
                return None
            qpi = self._gated.pop(key)
        if qpi is None:
            return None
        self._start_attempt(qpi, self._clock())
        first = self._round_first
        if first is not None and first is not qpi:
            first.attempts = qpi.attempts = max(first.attempts, qpi.attempts)
            first.group_backoff = qpi.group_backoff = True
        return qpi

    def activate(self, keys: Iterable[str]) -> None:
        """Move the given pods from the unschedulable/gated pools and backoffQ to activeQ (kube's
        ``Activate``); gated pods go through PreEnqueue again. Unknown keys are ignored."""
        for key in keys:
            waiting = self._unschedulable.get(key) or self._gated.get(key)
            if waiting is not None:
                self._move_waiting(waiting, Strategy.IMMEDIATELY, FORCE_ACTIVATE)
                continue
            for heap in self._backoff_heaps:
                if heap.get(key) is not None:
                    queued = heap.remove(key)
                    if queued is not None:
                        self._enter_active(queued, FORCE_ACTIVATE)
                    break

    def _start_attempt(self, qpi: QueuedPodInfo, now: float) -> QueuedPodInfo:
        qpi.attempts += 1
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = now
        qpi.unschedulable_plugins = _NO_PLUGINS
        qpi.pending_plugins = _NO_PLUGINS
        qpi.gated = False
        qpi.group_backoff = False
        key = qpi.pod.key
        # Re-insert so dict order stays pop order even if a stale record under this key lingers.
        in_flight = self._in_flight
        if key in in_flight:
            del in_flight[key]
        in_flight[key] = _InFlight(qpi.pod, self._log_base + len(self._event_log))
        return qpi

    async def wait_for_pod(self) -> None:
        """Return once :meth:`pop` may have a pod: at once if it has one now, else when a pod is added or
        moved or the earliest backoff ends. Wake-ups can be spurious: pop, and wait again on None. Cancelling
        is safe and leaves nothing behind; no task is created."""
        now = self._clock()
        if self._active or (self._options.pop_from_backoff and self._backoff):
            return
        due = self._next_backoff_release()
        if due is not None and due <= now:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if due is None else loop.call_later(max(due - now, _MIN_TIMER_SECONDS), _resolve, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def done(self, pod_key: str) -> None:
        """The attempt for ``pod_key`` is over (bound, or its failure handled). Idempotent."""
        if self._in_flight.pop(pod_key, None) is not None and self._event_log:
            self._trim_event_log()

    def add_unschedulable(self, qpi: QueuedPodInfo, *, error: bool = False) -> None:
        """Requeue ``qpi`` after a failed attempt; this also ends the attempt (no :meth:`done` needed).

        The caller sets ``qpi.unschedulable_plugins`` / ``pending_plugins``. ``error`` (or no rejecting
        plugin) sends it to the error backoff heap. Otherwise the events logged during the attempt are
        replayed through its hints: any Queue → backoffQ (activeQ once its backoff has ended, or at once for a
        Pending plugin), else the unschedulable pool. A pod not popped from this queue is requeued after
        backoff. Dropped if it was deleted or got a node meanwhile, or is already queued.
        """
        key = qpi.key
        flight = self._in_flight.get(key)
        if flight is not None and not _same_incarnation(flight.pod, qpi.pod):
            logger.info("dropping a failed attempt of a replaced pod %s", key)
            return
        self._in_flight.pop(key, None)
        events: list[tuple[ClusterEvent, object | None, object | None]] | None = None
        if flight is not None:
            # A pod's own forget (AssignedPod delete of the assumed pod) never requeues it, as upstream
            # excludes the assumed pod from that move.
            events = [
                e
                for e in self._event_log[flight.log_start - self._log_base :]
                if not (e[2] is None and isinstance(e[1], Pod) and e[1].key == key)
            ]
            self._trim_event_log()
            if flight.gone or flight.pod.node_name:
                return
            qpi.pod = flight.pod
        if self._find_pod(key) is not None:
            logger.warning("pod %s is already queued; ignoring its failed attempt", key)
            return
        now = self._clock()
        rejected = bool(qpi.unschedulable_plugins or qpi.pending_plugins)
        qpi.timestamp = now
        qpi.gated = False
        qpi.error_backoff = error or not rejected
        qpi.backoff_expiry = backoff_expiry(
            now,
            qpi.attempts,
            initial=self._options.initial_backoff_seconds,
            maximum=self._options.max_backoff_seconds,
            align=self._align,
        )
        if qpi.error_backoff or events is None:
            strategy = Strategy.AFTER_BACKOFF
        else:
            strategy = self._hints.strategy_for_events(qpi, events)
        if strategy is Strategy.SKIP:
            self._unschedulable[key] = qpi
            self._incoming(UNSCHEDULABLE, SCHEDULE_ATTEMPT_FAILURE)
        else:
            self._requeue(qpi, strategy, SCHEDULE_ATTEMPT_FAILURE)

    def flush(self) -> None:
        """Move pods whose backoff ended to activeQ, and pods unschedulable for longer than
        ``max_in_unschedulable_seconds`` to backoffQ/activeQ. Gated pods stay until an event or update frees
        them. Call at least once a second, ideally on whole seconds (the backoff ordering window)."""
        now = self._clock()
        self._flush_backoff(now)
        limit = self._options.max_in_unschedulable_seconds
        expired: list[QueuedPodInfo] = []
        for waiting in self._unschedulable.values():
            if now - waiting.timestamp <= limit:
                break
            expired.append(waiting)
        for waiting in expired:
            self._move_waiting(waiting, Strategy.AFTER_BACKOFF, UNSCHEDULABLE_TIMEOUT)

    def end_backoff_early(self) -> bool:
        """Virtual time (the simulator, whose clock stands still): the group backoff that ends first ends
        now. Moves the pods tried in a round whose backoff ends first to activeQ (the backoffQ is popped early
        anyway, and a pod that failed with an error would fail the same way again); False if none waits."""
        head = self._group_backoff.peek()
        if head is None:
            return False
        expiry = head.backoff_expiry
        while (head := self._group_backoff.peek()) is not None and head.backoff_expiry <= expiry:
            self._group_backoff.pop()
            self._enter_active(head, BACKOFF_COMPLETE, run_pre_enqueue=not self._options.pop_from_backoff)
        return True

    def pending_counts(self) -> dict[str, int]:
        """Pods per sub-queue, for ``scheduler_pending_pods{queue}``; in-flight pods are not pending."""
        return {
            ACTIVE: len(self._active),
            BACKOFF: sum(len(heap) for heap in self._backoff_heaps),
            UNSCHEDULABLE: len(self._unschedulable),
            GATED: len(self._gated),
        }

    def unschedulable_by_plugin(self) -> dict[tuple[str, str], int]:
        """(plugin, schedulerName) -> pods in the unschedulable and gated pools that plugin rejected, for
        ``scheduler_unschedulable_pods{plugin,profile}``. O(pods there)."""
        out: dict[tuple[str, str], int] = {}
        for pool in (self._unschedulable, self._gated):
            for qpi in pool.values():
                for plugin in qpi.unschedulable_plugins:
                    key = (plugin, qpi.pod.scheduler_name)
                    out[key] = out.get(key, 0) + 1
        return out

    def locations(self) -> dict[str, list[str]]:
        """Every pod key the queue holds -> the places holding it (:data:`ACTIVE`, :data:`BACKOFF`,
        :data:`UNSCHEDULABLE`, :data:`GATED`, :data:`IN_FLIGHT`), for invariant checks: each pod must be in
        exactly one. A deleted pod whose attempt is still running is left out. O(pods)."""
        out: dict[str, list[str]] = {}
        places: list[tuple[str, Iterable[QueuedPodInfo]]] = [
            (ACTIVE, self._active),
            *((BACKOFF, heap) for heap in self._backoff_heaps),
            (UNSCHEDULABLE, self._unschedulable.values()),
            (GATED, self._gated.values()),
        ]
        for place, pods in places:
            for qpi in pods:
                out.setdefault(qpi.key, []).append(place)
        for key, flight in self._in_flight.items():
            if not flight.gone:
                out.setdefault(key, []).append(IN_FLIGHT)
        return out

    def __contains__(self, pod_key: str) -> bool:
        """Whether the pod is queued or in flight (and not deleted)."""
        return self._find_pod(pod_key) is not None

    # ---- moves ---------------------------------------------------------------------------------------

    def _requeue(self, qpi: QueuedPodInfo, strategy: Strategy, event: str) -> str:
        """Send a pod that sits in no sub-queue to backoffQ or activeQ; returns where it landed."""
        if strategy is Strategy.AFTER_BACKOFF and self._is_backing_off(qpi):
            return self._enter_backoff(qpi, event)
        return self._enter_active(qpi, event)

    def _move_waiting(self, qpi: QueuedPodInfo, strategy: Strategy, event: str) -> str:
        """Move a pod out of the unschedulable or gated pool; it may land in the gated pool again."""
        source = self._gated if qpi.key in self._gated else self._unschedulable
        where = self._requeue(qpi, strategy, event)
        if not (where == GATED and source is self._gated):
            del source[qpi.key]
        return where

    def _enter_active(self, qpi: QueuedPodInfo, event: str, key: str = "", *, run_pre_enqueue: bool = True) -> str:
        if run_pre_enqueue and not self._passes_pre_enqueue(qpi, event):
            return GATED
        self._seq += 1
        self._active.push(qpi, self._seq, key or qpi.pod.key)
        if self._options.on_incoming is not None:
            self._options.on_incoming(ACTIVE, event)
        if self._waiters:
            self._notify()
        return ACTIVE

    def _enter_backoff(self, qpi: QueuedPodInfo, event: str) -> str:
        # Pods popped straight from backoffQ skip activeQ, so PreEnqueue must have passed on the way in.
        if self._options.pop_from_backoff and not self._passes_pre_enqueue(qpi, event):
            return GATED
        if qpi.error_backoff:
            heap = self._error_backoff
        elif qpi.group_backoff:
            heap = self._group_backoff
        else:
            heap = self._backoff
        heap.push(qpi, self._next_seq(), qpi.pod.key)
        self._incoming(BACKOFF, event)
        self._notify()
        return BACKOFF

    def _passes_pre_enqueue(self, qpi: QueuedPodInfo, event: str) -> bool:
        """Run PreEnqueue; on rejection park the pod in the gated pool, the gating plugin a rejector."""
        status = self._pre_enqueue(qpi.pod)
        if status.is_success:
            qpi.gated = False
            return True
        qpi.gated = True
        if status.plugin:
            qpi.unschedulable_plugins = qpi.unschedulable_plugins | {status.plugin}
        if qpi.key not in self._gated:
            self._gated[qpi.key] = qpi
            self._incoming(UNSCHEDULABLE, event)
        return False

    def _flush_backoff(self, now: float) -> None:
        run_pre_enqueue = not self._options.pop_from_backoff
        for heap in self._backoff_heaps:
            while (head := heap.peek()) is not None and not self._is_backing_off(head, now):
                heap.pop()
                self._enter_active(head, BACKOFF_COMPLETE, run_pre_enqueue=run_pre_enqueue)

    def _remove_queued(self, key: str, uid: str) -> None:
        for heap in self._heaps:
            queued = heap.get(key)
            if queued is not None and _same_incarnation(queued.pod, uid):
                heap.remove(key)
        for pool in (self._unschedulable, self._gated):
            waiting = pool.get(key)
            if waiting is not None and _same_incarnation(waiting.pod, uid):
                del pool[key]

    # ---- small helpers -------------------------------------------------------------------------------

    def _is_backing_off(self, qpi: QueuedPodInfo, now: float | None = None) -> bool:
        return is_backing_off(qpi.backoff_expiry, self._clock() if now is None else now, align=self._align)

    def _next_backoff_release(self) -> float | None:
        heads = [head for head in (heap.peek() for heap in self._backoff_heaps) if head is not None]
        if not heads:
            return None
        return min(release_time(head.backoff_expiry, align=self._align) for head in heads)

    def _find_pod(self, key: str) -> Pod | None:
        """The newest known version of a queued or in-flight pod."""
        flight = self._in_flight.get(key)
        if flight is not None and not flight.gone:
            return flight.pod
        for heap in self._heaps:
            queued = heap.get(key)
            if queued is not None:
                return queued.pod
        waiting = self._unschedulable.get(key) or self._gated.get(key)
        return None if waiting is None else waiting.pod

    def _trim_event_log(self) -> None:
        """Drop logged events that every in-flight attempt has already seen."""
        if not self._in_flight:
            self._log_base += len(self._event_log)
            self._event_log.clear()
            return
        oldest = next(iter(self._in_flight.values())).log_start
        if oldest > self._log_base:
            del self._event_log[: oldest - self._log_base]
            self._log_base = oldest

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _incoming(self, queue: str, event: str) -> None:
        if self._options.on_incoming is not None:
            self._options.on_incoming(queue, event)

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _resolve(waiter)


def _active_order(
    less: Callable[[QueuedPodInfo, QueuedPodInfo], bool], sort_key: Callable[[QueuedPodInfo], Any] | None
) -> Order:
    if sort_key is not None:

        def by_key(qpi: QueuedPodInfo, seq: int) -> tuple[Any, ...]:
            key = sort_key(qpi)
            return key if type(key) is tuple else (key,)

        return by_key
    return lambda qpi, seq: (_LessOrder(qpi, seq, less),)


def _same_incarnation(queued: Pod, other: Pod | str) -> bool:
    """Whether ``other`` (a pod or a uid) is the same pod object as ``queued``; unknown uids match."""
    uid = other if isinstance(other, str) else other.uid
    return not uid or not queued.uid or uid == queued.uid


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
