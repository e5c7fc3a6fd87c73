"""The scheduler's informer event handlers (kube-scheduler's ``eventhandlers.go``): Node, Pod and plugin
kinds' events into the cache, the nominator, the plugins' handlers and the scheduling queue.

:class:`EventHandlers` is one of the parts :class:`~koord_scheduler.scheduler.scheduler.Scheduler` is made
of; it is the :class:`~koord_scheduler.scheduler.source.EventSink` the cluster source feeds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apis.core.types import Node, Pod
from koord_scheduler.framework.runtime import Framework
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, ObjectHandler, ObjectKind
from koord_scheduler.framework.waiting_pods import WaitingPods
from koord_scheduler.scheduler.cache import SchedulerCache
from koord_scheduler.scheduler.cluster_events import node_update_action, object_cluster_event
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.monitor import SchedulingMonitor
from koord_scheduler.scheduler.nominator import PodNominator
from koord_scheduler.scheduler.object_errors import HANDLER_ERROR
from koord_scheduler.scheduler.options import Outcome, SchedulerOptions
from koord_scheduler.scheduler.queue import SchedulingQueue
from koord_scheduler.scheduler.services import SchedulerServices
from koord_scheduler.scheduler.source import ClusterSource, EventType


class EventHandlers:
    """The event sink (see the module docstring); runs on the event-loop thread."""

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
    gated_messages: dict[str, str]
    _pod_handlers: list[ObjectHandler]
    _object_handlers: dict[str, list[ObjectHandler]]

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
