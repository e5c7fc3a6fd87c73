"""Values passed between the runtime and plugins: filter results, queued pods, cluster events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntFlag, StrEnum
from typing import Any

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.snapshot import BoolArray, Positions
from koord_scheduler.framework.status import Code, Status
from kubeapi.kinds import EventType, Handler, ObjectHandler, ObjectKind

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the nodes Filter considers. ``node_names`` None means all nodes. ``plugins``: the
    PreFilter plugins whose results narrowed the set (the runtime stamps them; upstream's
    ``pluginsWithNodes``, named in the reason of the nodes left out)."""

    node_names: frozenset[str] | None = None
    plugins: frozenset[str] = frozenset()

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names, self.plugins | other.plugins)


@dataclass(frozen=True, slots=True)
class NodeFilterResult:
    """The batch Filter answer for ``positions``.

    ``passed[i]`` says whether ``positions[i]`` fits. For failing nodes ``reason_ids[i]`` indexes
    ``statuses``; nodes that pass may hold any id. One status per distinct failure keeps this cheap.
    """

    passed: BoolArray
    reason_ids: np.ndarray | None = None
    statuses: tuple[Status, ...] = ()
    every_node_passed: bool = False
    """Set when ``passed`` is all True (as :meth:`all_pass` does): the runtime then skips checking the
    mask, a numpy call per plugin per cycle."""

    @staticmethod
    def all_pass(n: int) -> NodeFilterResult:
        """Every one of ``n`` nodes passes: one shared result per ``n``, with a read-only mask (the
        runtime only reads results; a plugin that wants to edit a mask makes its own)."""
        result = _ALL_PASS.get(n)
        if result is None:
            mask = np.ones(n, dtype=np.bool_)
            mask.flags.writeable = False
            result = NodeFilterResult(mask, every_node_passed=True)
            if len(_ALL_PASS) >= 64:
                _ALL_PASS.clear()
            _ALL_PASS[n] = result
        return result

    @staticmethod
    def from_mask(passed: BoolArray, status: Status) -> NodeFilterResult:
        """Every failing node gets the same ``status``."""
        return NodeFilterResult(passed, None, (status,))

    def status_of(self, i: int) -> Status:
        if self.reason_ids is None:
            return self.statuses[0]
        return self.statuses[int(self.reason_ids[i])]


_ALL_PASS: dict[int, NodeFilterResult] = {}
"""Shared :meth:`NodeFilterResult.all_pass` results by node count (bounded)."""


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    nominated_node_name: str = ""


class ActionType(IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_POD_LABEL = 64
    UPDATE_POD_SCALE_DOWN = 128
    UPDATE_POD_TOLERATIONS = 256
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 512
    UPDATE = 1024
    """Any other update."""
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 2048
    """A pod's ``status.resourceClaimStatuses`` changed (kube-controller-manager created its claims)."""
    ALL = 4095


class EventResource(StrEnum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    RESERVATION = "Reservation"
    NODE_METRIC = "NodeMetric"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    PERSISTENT_VOLUME = "PersistentVolume"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    ELASTIC_QUOTA = "ElasticQuota"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """Whether a registered event (self) covers an incoming one (other)."""
        if self.resource not in (EventResource.WILDCARD, other.resource) and not (
            self.resource == EventResource.POD
            and other.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
        ):
            return False
        return bool(self.action & other.action)


class QueueingHint(Enum):
    QUEUE = "Queue"
    SKIP = "QueueSkip"


QueueingHintFn = Callable[[Pod, object | None, object | None], QueueingHint]
"""(pod waiting, old object, new object) -> whether the event may make the pod schedulable."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue, with its queue bookkeeping."""

    pod: Pod
    timestamp: float
    """When the pod was (re)added to the queue; QueueSort uses it for FIFO among equal priorities."""
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: frozenset[str] = frozenset()
    pending_plugins: frozenset[str] = frozenset()
    gated: bool = False
    backoff_expiry: float = 0.0
    error_backoff: bool = False
    group_backoff: bool = False
    """Tried in a round with other pods (a gang's members, picked by a NextPod hook): its backoff is waited
    out in full, as the group's, even when the queue pops from backoffQ early."""

    @property
    def key(self) -> str:
        return self.pod.key


PointObserver = Callable[[str, Code, float], None]
"""``observer(extension_point, status_code, seconds)``: metrics hook."""


@dataclass(slots=True)
class DebugOptions:
    """``--debug-scores N`` and ``--debug-filters``; switchable at runtime."""

    scores: int = 0
    filters: bool = False


ErrorHandlerFilter = Callable[[QueuedPodInfo, Status], bool]
"""``filter(queued_pod, status) -> handled``, Koordinator's error-handler filters. Pre filters: the first
returning True takes over the failure and the default handler is skipped. Post filters run after the
default handler."""

SimulationReporter = Callable[[], tuple[str, list[dict[str, Any]]]]
"""A section of ``koord-scheduler simulate`` output: ``() -> (title, rows of column -> value)``."""

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "ActionType",
    "ClusterEvent",
    "ClusterEventWithHint",
    "DebugOptions",
    "ErrorHandlerFilter",
    "EventResource",
    "EventType",
    "Handler",
    "NodeFilterResult",
    "ObjectHandler",
    "ObjectKind",
    "PointObserver",
    "Positions",
    "PostFilterResult",
    "PreFilterResult",
    "QueuedPodInfo",
    "QueueingHint",
    "QueueingHintFn",
    "SimulationReporter",
]
