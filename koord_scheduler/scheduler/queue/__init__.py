"""The scheduling queue: activeQ, backoffQ, the unschedulable and gated pools, and queueing hints."""

from koord_scheduler.scheduler.queue.hints import event_label
from koord_scheduler.scheduler.queue.pod_events import pod_scheduling_property_events
from koord_scheduler.scheduler.queue.scheduling_queue import (
    ACTIVE,
    BACKOFF,
    DEFAULT_QUEUE_OPTIONS,
    GATED,
    IN_FLIGHT,
    UNSCHEDULABLE,
    QueueOptions,
    SchedulingQueue,
)

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "DEFAULT_QUEUE_OPTIONS",
    "GATED",
    "IN_FLIGHT",
    "UNSCHEDULABLE",
    "QueueOptions",
    "SchedulingQueue",
    "event_label",
    "pod_scheduling_property_events",
]
