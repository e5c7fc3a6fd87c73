"""The first tier of the plugin contract: kube-scheduler's extension points, one small Protocol each.

A plugin is any object with a ``name`` and the methods of the points it implements; a kube-scheduler
plugin author knows every Protocol here. The other tiers are optional: Koordinator's stages
(:mod:`.koordinator_stages`: transformers, reservation stages, PreferNodes, FindOneNode, PreBind
patches, preemption gates) and the fast paths (:mod:`.fast_paths`: answers cached per node signature,
batch rechecks, queue sort keys, warm-up and per-cycle preparation). What a plugin receives is its
:class:`~koord_scheduler.framework.handle.Handle`.

The runtime finds what a plugin implements once, when the profile is built, with ``isinstance`` on these
runtime-checkable Protocols (:func:`implements`, and
:class:`~koord_scheduler.framework.capabilities.Capabilities`), and keeps typed lists. Each in-tree plugin
module declares every Protocol it implements in a ``declared_capabilities`` function whose return type
mypy checks, the way kube-scheduler writes ``var _ framework.FilterPlugin = &NodeAffinity{}``; a test
holds the declaration equal to what the runtime finds.

Filter and Score come in two forms: the per-node form kube-scheduler plugin authors know, and a batch
form over the whole snapshot that in-tree plugins use. The runtime accepts either. A plugin may implement
both, and they must agree in every cycle state (restored capacity included): the runtime then decides,
in one place, to call the per-node form when at most ``node_cache.FEW_NODES`` nodes are asked about (the
few it recomputes for a pod whose answers are cached, see :mod:`~koord_scheduler.framework.node_cache`,
or a preemption dry run on one node), where one Python call per node beats numpy calls on one-element
arrays, and the batch form everywhere else. A plugin never branches on the node count itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import (
    ClusterEventWithHint,
    NodeFilterResult,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)


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

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status: ...


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
    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        """Runs when no node fits (preemption). Success with a nominated node ends the PostFilter phase."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        """Skip disables this plugin's Score for the cycle; any other failure aborts the cycle."""
        ...


@runtime_checkable
class ScoreExtensions(Protocol):
    """NormalizeScore."""

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
    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        """Raw scores aligned with ``positions`` (int64)."""
        ...

    def score_extensions(self) -> ScoreExtensions | None: ...


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
class PreBindPreFlight(Plugin, Protocol):
    """Optional, on a PreBind plugin (kube-scheduler's ``PreBindPreFlight``): whether its PreBind will do
    work for this pod. Success: it will (it may take long: API writes, waiting on other controllers);
    Skip: nothing to do. Error aborts the binding cycle. Must not change anything."""

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...


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
    """Optional, any plugin (kube-scheduler's ``EnqueueExtensions``)."""

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Cluster events that may make a pod this plugin rejected schedulable again. A plugin without
        it gets every event."""
        ...


# ----- extension point names as they appear in configuration files -----

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

POINT_PROTOCOLS: dict[str, tuple[type[Plugin], ...]] = {
    PRE_ENQUEUE: (PreEnqueuePlugin,),
    QUEUE_SORT: (QueueSortPlugin,),
    PRE_FILTER: (PreFilterPlugin,),
    FILTER: (BatchFilterPlugin, FilterPlugin),
    POST_FILTER: (PostFilterPlugin,),
    PRE_SCORE: (PreScorePlugin,),
    SCORE: (BatchScorePlugin, ScorePlugin),
    RESERVE: (ReservePlugin,),
    PERMIT: (PermitPlugin,),
    PRE_BIND: (PreBindPlugin,),
    BIND: (BindPlugin,),
    POST_BIND: (PostBindPlugin,),
}
"""The Protocols a plugin may satisfy to implement each extension point (either form for Filter/Score)."""


def implements(plugin: object, point: str) -> bool:
    """Whether ``plugin`` implements the extension point named as in configuration (``"filter"``...)."""
    return any(isinstance(plugin, proto) for proto in POINT_PROTOCOLS[point])
