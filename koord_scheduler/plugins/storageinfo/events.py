"""Cluster events on storage kinds, for the volume plugins' EnqueueExtensions.

The scheduling queue routes an object event only for kinds it knows as an
:class:`~koord_scheduler.framework.types.EventResource` (PersistentVolumeClaim, PersistentVolume,
StorageClass, CSINode, CSIDriver and CSIStorageCapacity are); a registration for a kind it does not know
is left out, and pods the plugin rejected then wait for another event or the periodic flush.
"""

from __future__ import annotations

from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHintFn,
)


def on(kind_name: str, action: ActionType, hint: QueueingHintFn | None = None) -> list[ClusterEventWithHint]:
    """The registration for ``kind_name`` events, or none while the queue does not know the kind."""
    try:
        resource = EventResource(kind_name)
    except ValueError:
        return []
    return [ClusterEventWithHint(ClusterEvent(resource, action), hint)]
