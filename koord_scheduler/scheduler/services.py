"""The scheduler-wide services every profile's framework passes on to its plugins.

:class:`SchedulerServices` implements :class:`~koord_scheduler.framework.handle.SchedulerServices`. It
exists before the plugins are built and holds what they register (watches, pod handlers, next-pod hooks,
error-handler filters, simulation reports), the nominated pods and the pods waiting at Permit; the
:class:`~koord_scheduler.scheduler.scheduler.Scheduler` reads them from here. Only the queue comes later:
:meth:`attach` binds it once the scheduler is assembled (the queue needs the profiles' QueueSort and
PreEnqueue plugins).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry

from apis.core.types import Pod
from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from koord_scheduler.framework.handle import ClusterClient, PreemptionExtenders
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import (
    ErrorHandlerFilter,
    EventType,
    Handler,
    ObjectHandler,
    ObjectKind,
    SimulationReporter,
)
from koord_scheduler.framework.waiting_pods import WaitingPod, WaitingPods
from koord_scheduler.scheduler.cache import ForgetPodHandler, SchedulerCache
from koord_scheduler.scheduler.nominator import PodNominator

T = TypeVar("T")


if TYPE_CHECKING:
    from koord_scheduler.framework import handle
    from koord_scheduler.scheduler.scheduler import Scheduler


@dataclass(slots=True)
class SchedulerServices:
    """See the module docstring."""

    cache: SchedulerCache
    cluster: ClusterClient
    clock: Callable[[], float]
    metrics_registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES
    """``--feature-gates``, resolved (kube-scheduler's and Koordinator's gates)."""
    preemption_extenders: PreemptionExtenders | None = None
    nominator: PodNominator = field(default_factory=PodNominator)
    """Pods promised a node by preemption; Filter counts them there (see :mod:`.nominator`)."""
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    simulation_reporters: list[SimulationReporter] = field(default_factory=list)
    """Plugins add ``() -> (section title, rows)`` to show their state in ``simulate`` output."""
    next_pod_hooks: list[Callable[[], str | None]] = field(default_factory=list)
    """Koordinator's NextPod: asked before the queue; a key returned is taken out of the queue and
    scheduled next (Coscheduling tries a gang's members back to back)."""
    pre_error_filters: list[ErrorHandlerFilter] = field(default_factory=list)
    post_error_filters: list[ErrorHandlerFilter] = field(default_factory=list)
    pod_handlers: list[ObjectHandler] = field(default_factory=list)
    """Every pod event, after the cache and queue have it."""
    object_handlers: dict[str, list[ObjectHandler]] = field(default_factory=dict)
    watched_kinds: dict[str, ObjectKind[Any]] = field(default_factory=dict)
    """Kind name -> the kind some plugin watches (the cluster source lists and watches these)."""
    _scheduler: Scheduler | None = None

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self.cache.snapshot

    def attach(self, scheduler: Scheduler) -> None:
        """Bind the late-bound members (the queue, the pod path) once the scheduler exists."""
        self._scheduler = scheduler

    # ----- registrations -----

    def watch(self, kind: ObjectKind[T], handler: Handler[T]) -> None:
        """Have objects of ``kind`` delivered to ``handler``. A kind name watched with two different
        definitions is a wiring error."""
        existing = self.watched_kinds.get(kind.kind)
        if existing is not None and existing != kind:
            raise ValueError(f"kind {kind.kind!r} is already watched with a different definition")
        self.watched_kinds[kind.kind] = kind
        self.object_handlers.setdefault(kind.kind, []).append(handler)

    def watch_pods(self, handler: ObjectHandler) -> None:
        self.pod_handlers.append(handler)

    def add_simulation_report(self, reporter: SimulationReporter) -> None:
        self.simulation_reporters.append(reporter)

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None:
        self.next_pod_hooks.append(hook)

    def register_forget_pod_handler(self, handler: ForgetPodHandler) -> None:
        self.cache.register_forget_pod_handler(handler)

    def register_error_handler_filters(self, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None) -> None:
        if pre is not None:
            self.pre_error_filters.append(pre)
        if post is not None:
            self.post_error_filters.append(post)

    # ----- the cache -----

    def account_pod(self, pod: Pod) -> None:
        """Account an object that holds node resources like a pod (an Available reservation)."""
        self.cache.add_pod(pod)

    def unaccount_pod(self, pod: Pod) -> None:
        self.cache.remove_pod(pod)

    def is_assumed(self, key: str) -> bool:
        return self.cache.is_assumed(key)

    def waiting_pod(self, key: str) -> WaitingPod | None:
        return self.waiting_pods.get(key)

    # ----- the queue (late-bound) -----

    def enqueue_pod(self, pod: Pod) -> None:
        """Put a synthetic pending pod (a reservation's reserve pod) through the normal pod path."""
        if self._scheduler is not None:
            self._scheduler.on_pod(EventType.ADDED, None, pod)

    def dequeue_pod(self, pod: Pod) -> None:
        if self._scheduler is not None:
            self._scheduler.queue.delete(pod)

    def activate_pods(self, keys: Iterable[str]) -> None:
        """Move pending pods to activeQ now (kube's ``Activate``): a gang whose last member arrived."""
        if self._scheduler is not None:
            self._scheduler.queue.activate(keys)


if TYPE_CHECKING:
    _services: type[handle.SchedulerServices] = SchedulerServices
