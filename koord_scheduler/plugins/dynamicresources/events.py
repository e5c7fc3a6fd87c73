"""DynamicResources' EnqueueExtensions and queueing hints (kube-scheduler ``dynamicresources.go``
``EventsToRegister``, ``isSchedulableAfterClaimChange``, ``isSchedulableAfterPodChange``; queueing
hints on)."""

from __future__ import annotations

from collections.abc import Callable

from apis.core.types import Pod
from apis.resource.types import ResourceClaim
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
    QueueingHintFn,
)
from koord_scheduler.plugins.dynamicresources.policy import ClaimProblem, pod_claims

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP

Lookup = Callable[[str], ResourceClaim | None]


def after_claim_change(lookup: Lookup) -> QueueingHintFn:
    def hint(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        if not isinstance(new, ResourceClaim):
            return QUEUE
        claims = pod_claims(pod, lookup)
        if isinstance(claims, ClaimProblem):
            return SKIP
        if isinstance(old, ResourceClaim) and old.allocation is not None and new.allocation is None:
            return QUEUE  # deallocated: its devices may help anyone
        if not any(c.uid == new.uid for c in claims):
            return SKIP
        if old is None:
            return QUEUE
        if isinstance(old, ResourceClaim) and (old.allocation, old.reserved_for) == (new.allocation, new.reserved_for):
            return SKIP  # only metadata changed (a driver added its finalizer)
        return QUEUE

    return hint


def after_pod_change(lookup: Lookup) -> QueueingHintFn:
    def hint(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        if not isinstance(new, Pod) or new.uid != pod.uid:
            return SKIP
        return SKIP if isinstance(pod_claims(new, lookup), ClaimProblem) else QUEUE

    return hint


def dynamic_resources_events(lookup: Lookup) -> list[ClusterEventWithHint]:
    add_update = ActionType.ADD | ActionType.UPDATE
    node_actions = ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE
    return [
        ClusterEventWithHint(ClusterEvent(EventResource.NODE, node_actions)),
        ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_CLAIM, add_update), after_claim_change(lookup)),
        ClusterEventWithHint(
            ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM), after_pod_change(lookup)
        ),
        ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS, add_update)),
        ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_SLICE, add_update)),
    ]
