"""The scheduling queue: activeQ, backoffQ, the unschedulable and gated pools, and queueing hints."""

from koord_scheduler.scheduler.queue.pod_events import pod_scheduling_property_events
from koord_scheduler.scheduler.queue.scheduling_queue import (
    DEFAULT_QUEUE_OPTIONS,
    QueueOptions,
    SchedulingQueue,
    event_label,
)

__all__ = [
    "DEFAULT_QUEUE_OPTIONS",
    "QueueOptions",
    "SchedulingQueue",
    "event_label",
    "pod_scheduling_property_events",
]
