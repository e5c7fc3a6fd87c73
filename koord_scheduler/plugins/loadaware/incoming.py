"""Estimates of pods for LoadAwareScheduling: the incoming pod's, and those of pods found on nodes.

Koordinator's ``IncomingPodEstimatedLoadAwareScheduling`` state and ``podAssignCache`` entries both hold
:func:`~koord_scheduler.plugins.loadaware.estimator.estimate_pod`'s answer. Pods of one template estimate
alike, so :class:`PodEstimator` memoises the answer per template (bounded), and for the last pod (the
assumed copy Reserve gets shares the metadata and requests of the pod Filter saw).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from apis.core.types import Pod
from apis.extension import LABEL_POD_PRIORITY_CLASS, LABEL_POD_QOS, PriorityClass
from koord_scheduler.framework.cycle_state import StateKey
from koord_scheduler.framework.snapshot import IntArray
from koord_scheduler.plugins import names
from koord_scheduler.plugins.loadaware.assign_cache import AssignedPod
from koord_scheduler.plugins.loadaware.estimator import (
    ANNOTATION_ESTIMATED_SCALING_FACTORS,
    estimate_pod,
    is_daemonset_pod,
    pod_priority_class,
)
from koord_scheduler.plugins.loadaware.timing import EstimationWindows, assign_time, estimation_deadline

MEMO_LIMIT = 1024
"""Templates remembered at most (the memo is cleared when full: a burst rarely has more templates)."""


@dataclass(frozen=True, slots=True)
class IncomingPod:
    """The pod being scheduled, estimated once per cycle (Koordinator's
    ``IncomingPodEstimatedLoadAwareScheduling`` state)."""

    estimate: tuple[int, ...]
    vector: IntArray
    prod: bool
    daemonset: bool
    sign: Hashable
    """What :meth:`LoadAwareScheduling.sign_pod` returns: (estimate, prod, daemonset)."""


INCOMING_KEY: StateKey[IncomingPod] = StateKey("IncomingPodEstimated" + names.LOAD_AWARE_SCHEDULING)


class LastEstimate(NamedTuple):
    """The last pod estimated and its answer."""

    pod: Pod
    incoming: IncomingPod


class PodEstimator:
    """:func:`estimate_pod` with the plugin's arguments, memoised (see the module docstring)."""

    __slots__ = ("_customize", "_memo", "_resources", "_scaling_factors", "last", "windows")

    def __init__(
        self, resources: Sequence[str], scaling_factors: Mapping[str, int], *, windows: EstimationWindows
    ) -> None:
        self._resources = tuple(resources)
        self._scaling_factors = scaling_factors
        self._customize = windows.allow_customize
        self.windows = windows
        self.last: LastEstimate | None = None
        """The last pod estimated (read by the plugin to skip the lookup for that very pod object)."""
        self._memo: dict[Hashable, IncomingPod] = {}
        """Estimates by :meth:`_key` (bounded by :data:`MEMO_LIMIT`)."""

    def estimate(self, pod: Pod) -> IncomingPod:
        """The pod's estimate: the last one for the same pod object, or for a copy of it with only fields
        the estimate does not read changed (such as the assumed pod Reserve gets); else by template."""
        last = self.last
        if last is not None:
            prev = last.pod
            if prev is pod or (
                prev.meta is pod.meta
                and prev.requests is pod.requests
                and prev.limits is pod.limits
                and prev.priority == pod.priority
                and prev.qos_class == pod.qos_class
            ):
                return last.incoming
        key: tuple[object, ...] | None = self._key(pod)
        try:
            incoming = self._memo.get(key)
        except TypeError:  # an unhashable field: estimate afresh
            key, incoming = None, None
        if incoming is None:
            estimate = estimate_pod(pod, self._resources, self._scaling_factors, allow_customize=self._customize)
            prod = pod_priority_class(pod) is PriorityClass.PROD
            daemonset = is_daemonset_pod(pod)
            incoming = IncomingPod(
                estimate, np.array(estimate, dtype=np.int64), prod, daemonset, (estimate, prod, daemonset)
            )
            if key is not None:
                if len(self._memo) >= MEMO_LIMIT:
                    self._memo.clear()
                self._memo[key] = incoming
        self.last = LastEstimate(pod, incoming)
        return incoming

    def _key(self, pod: Pod) -> tuple[object, ...]:
        """Everything :func:`estimate_pod`, :func:`pod_priority_class` and :func:`is_daemonset_pod` read
        (pods of one template share the key). It may not be hashable: :meth:`estimate` then estimates
        afresh."""
        meta = pod.meta
        labels = meta.labels
        limits = pod.limits
        return (
            pod.requests,  # hashed by the runtime's node cache anyway (FrozenDict caches its hash)
            tuple(limits.items()) if limits else (),
            pod.priority,
            pod.qos_class,
            labels.get(LABEL_POD_PRIORITY_CLASS),
            labels.get(LABEL_POD_QOS),
            meta.annotations.get(ANNOTATION_ESTIMATED_SCALING_FACTORS) if self._customize else None,
            is_daemonset_pod(pod),
        )

    def placed(self, pod: Pod, now: float) -> AssignedPod:
        """A pod this scheduler places now (Reserve): assigned at ``now``."""
        incoming = self.estimate(pod)  # (the same for the assumed copy as for the pod Filter saw)
        windows = self.windows
        deadline = estimation_deadline(pod, now, windows) if windows.may_need_pod_updates else None
        return AssignedPod(pod.key, incoming.estimate, incoming.prod, now, deadline)

    def found(self, pod: Pod) -> AssignedPod:
        """A pod found on a node (not placed by this scheduler): assigned at its PodScheduled transition
        (:mod:`.timing`; its creation time when it has none)."""
        incoming = self.estimate(pod)
        timestamp = assign_time(pod, pod.meta.creation_timestamp)
        windows = self.windows
        deadline = estimation_deadline(pod, timestamp, windows) if windows.may_need_pod_updates else None
        return AssignedPod(pod.key, incoming.estimate, incoming.prod, timestamp, deadline)
