"""One small Protocol per extension point.

A plugin is any object with a ``name`` and the methods of the points it implements; the runtime finds
them once, when the profile is built (:func:`implements`). Filter and Score come in two forms: the
per-node form kube-scheduler plugin authors know, and a batch form over the whole snapshot that in-tree
plugins use. The runtime accepts either. A plugin may implement both, and they must agree: the runtime
then uses the per-node form for the few nodes (at most ``node_cache.FEW_NODES``) it recomputes for a pod
whose answers are cached (see :mod:`~koord_scheduler.framework.node_cache`), where one Python call per node
beats numpy calls on one-element arrays, and the batch form everywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import (
    ClusterEventWithHint,
    NodeFilterResult,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)

if TYPE_CHECKING:
    from koord_scheduler.framework.diagnosis import Diagnosis


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a ``name``, the one users write in configuration files."""

    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Pod) -> Status:
        """Success lets the pod into activeQ; anything else keeps it gated until a later update."""
        ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` pops before ``b``. Must be a strict weak order."""
        ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        """Update PreFilter state as if ``pod_to_add`` ran on the node (preemption dry runs, nominated pods)."""
        ...

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """Compute per-cycle state. Skip disables this plugin's Filter for the cycle;
        Unschedulable(AndUnresolvable) rejects the pod on every node."""
        ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Per-node Filter, as in kube-scheduler."""

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        """Success, Unschedulable, UnschedulableAndUnresolvable or Error. Must not mutate anything."""
        ...


@runtime_checkable
class BatchFilterPlugin(Plugin, Protocol):
    """Filter over many nodes at once."""

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        """Answer for every position in ``positions`` (aligned). Must not mutate anything."""
        ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Runs when no node fits (preemption). Success with a nominated node ends the PostFilter phase."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> Status:
        """Skip disables this plugin's Score for the cycle; any other failure aborts the cycle."""
        ...


@runtime_checkable
class ScoreExtensions(Protocol):
    """NormalizeScore. An extensions object may also set ``normalize_reads_only_scores = True`` when
    its result depends on nothing but the scores it is given (as with ``default_normalize_score``): for
    a signed plugin the runtime then reuses the last normalised scores while the raw scores and the
    scored nodes are unchanged."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        """Rewrite ``scores`` (aligned with the scored positions) in place into [0, 100]."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Per-node Score, as in kube-scheduler. Raise for an error; the runtime turns it into a Status."""

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int: ...

    def score_extensions(self) -> ScoreExtensions | None: ...


@runtime_checkable
class BatchScorePlugin(Plugin, Protocol):
    def score_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> IntArray:
        """Raw scores aligned with ``positions`` (int64)."""
        ...

    def score_extensions(self) -> ScoreExtensions | None: ...


@runtime_checkable
class WarmUpPlugin(Plugin, Protocol):
    """Optional, any plugin: prepare per-node state before the first scheduling cycle."""

    def warm_up(self) -> None:
        """Called once when the scheduler starts, after its caches are listed and before the first cycle.
        Work done here (a full pass over the snapshot, say) is then not part of the first pod's
        scheduling latency. A plugin must still be correct if it is never called. An exception is
        logged and ignored."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Claim per-plugin state for the chosen node. Failure triggers Unreserve of every Reserve plugin."""
        ...

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Undo ``reserve``. Must be idempotent: it may run for a plugin whose reserve never ran."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """Success, Unschedulable (reject) or Wait with a timeout in seconds."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """I/O before binding (annotations, volumes). Failure aborts the binding and unreserves."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Bind the pod, or return Skip to let the next Bind plugin do it."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Informational; runs after a successful bind."""
        ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Cluster events that may make a pod this plugin rejected schedulable again."""
        ...


# Extension point names as they appear in configuration files.
PRE_ENQUEUE = "preEnqueue"
QUEUE_SORT = "queueSort"
PRE_FILTER = "preFilter"
FILTER = "filter"
POST_FILTER = "postFilter"
PRE_SCORE = "preScore"
SCORE = "score"
RESERVE = "reserve"
PERMIT = "permit"
PRE_BIND = "preBind"
BIND = "bind"
POST_BIND = "postBind"

EXTENSION_POINTS: tuple[str, ...] = (
    PRE_ENQUEUE,
    QUEUE_SORT,
    PRE_FILTER,
    FILTER,
    POST_FILTER,
    PRE_SCORE,
    SCORE,
    RESERVE,
    PERMIT,
    PRE_BIND,
    BIND,
    POST_BIND,
)

_METHODS: dict[str, tuple[str, ...]] = {
    PRE_ENQUEUE: ("pre_enqueue",),
    QUEUE_SORT: ("less",),
    PRE_FILTER: ("pre_filter",),
    FILTER: ("filter", "filter_nodes"),
    POST_FILTER: ("post_filter",),
    PRE_SCORE: ("pre_score",),
    SCORE: ("score", "score_nodes"),
    RESERVE: ("reserve",),
    PERMIT: ("permit",),
    PRE_BIND: ("pre_bind",),
    BIND: ("bind",),
    POST_BIND: ("post_bind",),
}


def implements(plugin: object, point: str) -> bool:
    """Whether ``plugin`` implements the extension point named as in configuration (``"filter"``...)."""
    return any(callable(getattr(plugin, m, None)) for m in _METHODS[point])


def no_extensions(_: object) -> None:
    return None


def empty_scores(n: int) -> IntArray:
    return np.zeros(n, dtype=np.int64)
