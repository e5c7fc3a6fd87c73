"""The concrete handle plugins receive (Koordinator's ExtendedHandle, kept small)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from apis.core.types import Pod
from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import (
    ErrorHandlerFilter,
    EventType,
    ObjectHandler,
    ObjectKind,
    SimulationReporter,
)
from koord_scheduler.framework.waiting_pods import WaitingPod
from koord_scheduler.scheduler.cache import ForgetPodHandler, SchedulerCache

if TYPE_CHECKING:
    from koord_scheduler.scheduler.scheduler import Scheduler


@dataclass(slots=True)
class SchedulerHandle:
    """Implements :class:`~koord_scheduler.framework.handle.ExtendedHandle`: the framework handle plus
    error-handler filters, forget-pod handlers, synthetic pods (reserve pods) in the queue, pods waiting
    at Permit, node accounting for objects that hold resources, and the metrics registry."""

    cache: SchedulerCache
    cluster: ClusterClient
    clock: Callable[[], float]
    metrics_registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES
    """``--feature-gates``, resolved (kube-scheduler's and Koordinator's gates)."""
    _scheduler: Scheduler | None = None
    _pending_reports: list[SimulationReporter] = field(default_factory=list)
    _pending_pod_watches: list[ObjectHandler] = field(default_factory=list)
    _pending_next_pod_hooks: list[Callable[[], str | None]] = field(default_factory=list)
    _pending_watches: list[tuple[ObjectKind, ObjectHandler]] = field(default_factory=list)
    _pending_error_filters: list[tuple[ErrorHandlerFilter | None, ErrorHandlerFilter | None]] = field(
        default_factory=list
    )

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self.cache.snapshot

    def attach(self, scheduler: Scheduler) -> None:
        """Called once the scheduler exists (plugins are built before it)."""
        self._scheduler = scheduler
        scheduler.simulation_reporters.extend(self._pending_reports)
        self._pending_reports.clear()
        for pod_handler in self._pending_pod_watches:
            scheduler.watch_pods(pod_handler)
        self._pending_pod_watches.clear()
        scheduler.next_pod_hooks.extend(self._pending_next_pod_hooks)
        self._pending_next_pod_hooks.clear()
        for kind, handler in self._pending_watches:
            scheduler.subscribe(kind, handler)
        self._pending_watches.clear()
        for pre, post in self._pending_error_filters:
            self._add_error_filters(scheduler, pre, post)
        self._pending_error_filters.clear()

    def register_forget_pod_handler(self, handler: ForgetPodHandler) -> None:
        self.cache.register_forget_pod_handler(handler)

    def register_error_handler_filters(
        self, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None
    ) -> None:
        if self._scheduler is None:
            self._pending_error_filters.append((pre, post))
        else:
            self._add_error_filters(self._scheduler, pre, post)

    @staticmethod
    def _add_error_filters(
        scheduler: Scheduler, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None
    ) -> None:
        if pre is not None:
            scheduler.pre_error_filters.append(pre)
        if post is not None:
            scheduler.post_error_filters.append(post)

    def forget_pod(self, pod: Pod) -> None:
        """Forget an assumed pod; every forget-pod handler runs even if the cache had dropped it."""
        self.cache.forget_pod(pod)

    def account_pod(self, pod: Pod) -> None:
        """Account an object that holds node resources like a pod (an Available reservation)."""
        self.cache.add_pod(pod)

    def unaccount_pod(self, pod: Pod) -> None:
        self.cache.remove_pod(pod)

    def enqueue_pod(self, pod: Pod) -> None:
        """Put a synthetic pending pod (a reservation's reserve pod) through the normal pod path."""
        if self._scheduler is not None:
            self._scheduler.on_pod(EventType.ADDED, None, pod)

    def dequeue_pod(self, pod: Pod) -> None:
        if self._scheduler is not None:
            self._scheduler.queue.delete(pod)

    def watch(self, kind: ObjectKind, handler: ObjectHandler) -> None:
        """Have objects of ``kind`` delivered to ``handler`` (from the API server, or a simulate file)."""
        if self._scheduler is None:
            self._pending_watches.append((kind, handler))
        else:
            self._scheduler.subscribe(kind, handler)

    def watch_pods(self, handler: ObjectHandler) -> None:
        """Every pod event (bound, pending, deleted), delivered after the scheduler's cache and queue
        have applied it: ``handler(event_type, old_pod, new_pod)``."""
        if self._scheduler is None:
            self._pending_pod_watches.append(handler)
        else:
            self._scheduler.watch_pods(handler)

    def add_simulation_report(self, reporter: SimulationReporter) -> None:
        """A section for ``koord-scheduler simulate`` output: ``() -> (title, rows of column -> value)``."""
        if self._scheduler is not None:
            self._scheduler.simulation_reporters.append(reporter)
        else:
            self._pending_reports.append(reporter)

    def activate_pods(self, keys: Iterable[str]) -> None:
        """Move pending pods to activeQ now (kube's ``Activate``): a gang whose last member arrived."""
        if self._scheduler is not None:
            self._scheduler.queue.activate(keys)

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None:
        """Koordinator's NextPod: ``hook()`` returns the key of the pod to schedule next, or None to let
        the queue decide. The scheduler takes that pod out of the queue (wherever it waits)."""
        if self._scheduler is not None:
            self._scheduler.next_pod_hooks.append(hook)
        else:
            self._pending_next_pod_hooks.append(hook)

    def is_assumed(self, key: str) -> bool:
        return self.cache.is_assumed(key)

    def waiting_pod(self, key: str) -> WaitingPod | None:
        return self._scheduler.waiting_pods.get(key) if self._scheduler is not None else None
