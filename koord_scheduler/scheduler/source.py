"""The cluster-source interface: the only way the scheduler core reaches a cluster.

Two implementations: :mod:`~koord_scheduler.scheduler.memory_source` (the embedded simulator) and the
API-server source. The scheduler core never knows which one it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from apis.core.types import Node, Pod
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.types import EventType, ObjectKind


class EventSink(Protocol):
    """Receives parsed objects. Called on the event-loop thread, never during a scheduling cycle."""

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None: ...

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None: ...

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        """Other kinds (Reservation, NodeMetric...): forwarded to the plugins that subscribed."""
        ...

    def on_invalid_object(
        self, kind: str, key: str, reason: str, message: str, exc: BaseException | None = None
    ) -> bool:
        """An object the source could not use (it is treated as absent): log once and count it.
        True when this problem is new (the source then writes an Event about it)."""
        ...


class ClusterSource(Protocol):
    @property
    def client(self) -> ClusterClient: ...

    async def start(self, sink: EventSink, kinds: Sequence[ObjectKind[Any]] = ()) -> None:
        """Deliver the initial state (as ADDED events) before returning, then keep delivering changes
        from tasks the source owns until :meth:`stop`. ``kinds`` are the extra kinds plugins watch
        (delivered through ``sink.on_object``)."""
        ...

    async def stop(self) -> None: ...

    async def report_unschedulable(self, pod: Pod, *, reason: str, message: str) -> None:
        """PodScheduled=False with ``reason`` and ``message``, and a FailedScheduling event."""
        ...

    async def report_scheduled(self, pod: Pod, node_name: str) -> None:
        """A Scheduled event."""
        ...


__all__ = ["ClusterSource", "EventSink", "EventType"]
