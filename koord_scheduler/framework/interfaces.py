"""One small Protocol per extension point and per optional capability.

A plugin is any object with a ``name`` and the methods of the points it implements. The runtime finds
them once, when the profile is built, with ``isinstance`` on these runtime-checkable Protocols
(:func:`implements`, and :class:`~koord_scheduler.framework.capabilities.Capabilities`), and keeps typed
lists. Each in-tree plugin module states the points it implements so that mypy checks the signatures
(``_: type[FilterPlugin] = MyPlugin`` under ``TYPE_CHECKING``), the way kube-scheduler writes
``var _ framework.FilterPlugin = &NodeAffinity{}``.

Filter and Score come in two forms: the per-node form kube-scheduler plugin authors know, and a batch
form over the whole snapshot that in-tree plugins use. The runtime accepts either. A plugin may implement
both, and they must agree in every cycle state (restored capacity included): the runtime then decides,
in one place, to call the per-node form when at most ``node_cache.FEW_NODES`` nodes are asked about (the
few it recomputes for a pod whose answers are cached, see :mod:`~koord_scheduler.framework.node_cache`,
or a preemption dry run on one node), where one Python call per node beats numpy calls on one-element
arrays, and the batch form everywhere else. A plugin never branches on the node count itself.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk
from koord_scheduler.framework.numa_affinity import NUMATopologyHint
from koord_scheduler.framework.pod_patch import PodPatch
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


# ----- extension points -----


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
    """NormalizeScore."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        """Rewrite ``scores`` (aligned with the scored positions) in place into [0, 100]."""
        ...


@runtime_checkable
class ScoresOnlyNormalizer(ScoreExtensions, Protocol):
    """Optional, on a ScoreExtensions object: ``normalize_reads_only_scores = True`` declares that the
    result depends on nothing but the scores it is given (as with ``default_normalize_score``). For a
    signed plugin the runtime then reuses the last normalised scores while the raw scores and the scored
    nodes are unchanged."""

    normalize_reads_only_scores: bool


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
class PodPatchApplier(Plugin, Protocol):
    """Koordinator's PreBindExtensions (the DefaultPreBind plugin): after every PreBind plugin succeeded,
    sends the labels and annotations they recorded in the cycle state's
    :class:`~koord_scheduler.framework.pod_patch.PodPatch` as one request. Enabled at preBind."""

    async def apply_pod_patch(self, state: CycleState, pod: Pod, patch: PodPatch) -> Status:
        """Failure aborts the binding like a PreBind failure."""
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


# ----- Koordinator's transformers (native stages of the runtime) -----
# A transformer runs only if its plugin is enabled at the matching extension point, in the profile's
# order; a non-success status aborts the cycle, naming the plugin.


@runtime_checkable
class PreFilterTransformer(Plugin, Protocol):
    def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Pod | None, Status]:
        """Return a replacement pod (or None to keep it) used for the rest of the cycle."""
        ...

    def after_pre_filter(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> Status: ...


@runtime_checkable
class FilterTransformer(Plugin, Protocol):
    def before_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> tuple[Pod | None, Status]:
        """Runs once per cycle over the candidate nodes, before any Filter. May replace the pod and
        write a :class:`~koord_scheduler.framework.restored.RestoredCapacity` into ``state`` (the batch
        form of Koordinator's per-node BeforeFilter, which swaps the NodeInfo)."""
        ...


@runtime_checkable
class ScoreTransformer(Plugin, Protocol):
    def before_score(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> tuple[Pod | None, Positions | None, Status]:
        """May replace the pod and/or the node list to score (a subset of ``positions``)."""
        ...


@runtime_checkable
class NodePreferrer(Plugin, Protocol):
    """Koordinator's ``PreferNodesPlugin``: nodes to try first, in order, after PreFilter. The first one
    that passes the whole Filter chain (nominated pods counted) is the only candidate of the cycle;
    when none passes, the cycle goes on over every node. One per profile (the first plugin with it)."""

    def prefer_nodes(
        self, state: CycleState, pod: Pod, result: PreFilterResult | None
    ) -> tuple[Sequence[str], Status]:
        """Success with the node names, or Skip for none."""
        ...


@runtime_checkable
class JobNodeFinder(Plugin, Protocol):
    """Koordinator's ``FindOneNodePlugin``: runs after PreFilter (and the AfterPreFilter transformers),
    before PreferNodes, and may pick the one node of the cycle for a pod whose whole job it plans at
    once. One per profile (the first plugin with it)."""

    def find_one_node(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> tuple[str, Status]:
        """Success with the node (the cycle's only candidate), Skip to go on as usual, a rejection
        (the pod is rejected as by PreFilter) or Error."""
        ...


# ----- Koordinator's reservation stages -----
# ``reservation`` is the Reservation plugin's own record of one reservation (opaque to the framework).


@runtime_checkable
class ReservationFilterPlugin(Plugin, Protocol):
    def filter_reservation(self, state: CycleState, pod: Pod, reservation: object, node_info: NodeInfo) -> Status:
        """Whether ``pod`` may use ``reservation`` on its node, in the Filter phase."""
        ...


@runtime_checkable
class ReservationPreBindPlugin(Plugin, Protocol):
    async def pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status:
        """PreBind of a reservation's reserve pod (it is never bound like a pod)."""
        ...


@runtime_checkable
class ReservationNominator(Plugin, Protocol):
    """Chooses which reservation on the chosen node a pod consumes (the Reservation plugin)."""

    def nominate_reservation(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Record the nominated reservation in ``state`` for Reserve; Success with none is fine."""
        ...


@runtime_checkable
class NUMAHintProvider(Plugin, Protocol):
    """Koordinator's ``NUMATopologyHintProvider``: a plugin whose resources the topology manager
    (NodeNUMAResource, on nodes with a NUMA topology policy) aligns with CPUs and memory."""

    def numa_topology_hints(
        self, state: CycleState, pod: Pod, node_name: str
    ) -> tuple[Mapping[str, Sequence[NUMATopologyHint]] | None, Status]:
        """Hints per resource (None: no preference); a failure status when nothing the pod asks for fits
        the node whatever the NUMA nodes (Unschedulable, or Error)."""
        ...

    def allocate_numa(self, state: CycleState, pod: Pod, node_name: str, affinity: int | None) -> Status:
        """Whether the pod's resources fit inside the chosen NUMA ``affinity`` (a mask; None: any)."""
        ...


# ----- optional capabilities of any plugin -----


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Cluster events that may make a pod this plugin rejected schedulable again. A plugin without
        it gets every event."""
        ...


@runtime_checkable
class QueueSortKey(Protocol):
    """Optional, on a QueueSort plugin: a key equivalent to ``less`` (``a`` before ``b`` exactly when
    ``sort_key(a) < sort_key(b)``), which lets the queue keep a heap of keys instead of calling ``less``."""

    def sort_key(self, qpi: QueuedPodInfo) -> object: ...


@runtime_checkable
class SignedPlugin(Protocol):
    """Optional, on a Filter or Score plugin: what its per-node answer depends on besides the node's row.

    Pods with equal signatures get equal answers on an unchanged node, so the runtime caches answers per
    node (:mod:`~koord_scheduler.framework.node_cache`). ``None`` means "do not cache for this pod"."""

    def sign_pod(self, pod: Pod) -> Hashable | None: ...


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
class CyclePreparer(Plugin, Protocol):
    """Optional, any plugin: bring per-plugin state up to date with the snapshot, once per cycle."""

    def prepare_cycle(self, snapshot: ClusterSnapshot) -> None:
        """Called once per scheduling cycle, before PreFilter, with the cycle's snapshot. Queries
        (``sign_pod``, Filter, Score) then only read. An exception aborts the cycle as an Error naming
        the plugin."""
        ...


class NominatedPods(Protocol):
    """The scheduler's nominated pods (pending pods that preemption promised a node to), read-only."""

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]: ...

    def by_node(self) -> Iterator[tuple[str, Iterable[Pod]]]:
        """Node -> its nominated pods, without copying."""
        ...

    def __bool__(self) -> bool: ...


@runtime_checkable
class PodNominating(NominatedPods, Protocol):
    """The nominator as a plugin that nominates pods besides the one in its cycle sees it (job-level
    preemption nominates every member of a gang; kube-scheduler's ``AddNominatedPod`` /
    ``DeleteNominatedPodIfExists``). The scheduler's nominator provides it."""

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name``; "" keeps only a nomination its status carries."""
        ...

    def delete(self, pod: Pod) -> None: ...


class PreemptionExtenders(Protocol):
    """The configured HTTP extenders that take part in preemption (kube-scheduler ``callExtenders``); the
    scheduler provides it when some extender has a ``preemptVerb``."""

    def process_preemption(
        self, pod: Pod, candidates: Mapping[str, tuple[Sequence[Pod], int]]
    ) -> tuple[dict[str, tuple[list[Pod], int]], Status]:
        """The candidates (node -> victims, PodDisruptionBudget violations) every interested extender keeps,
        in turn. An Error status when a non-ignorable extender failed or answered inconsistently (failing
        ignorable extenders are skipped); an empty result means nothing may be preempted."""
        ...


@runtime_checkable
class PreemptionGate(Plugin, Protocol):
    """Optional, any plugin of the profile: may refuse that a pod preempt on its own. DefaultPreemption asks
    before its dry run (Coscheduling refuses for a gang member whose gang could not complete even with it)."""

    def refuse_preemption(self, state: CycleState, pod: Pod) -> str | None:
        """None allows; otherwise why not (the pod's unschedulable message)."""
        ...


@runtime_checkable
class PreemptionExtendersAware(Protocol):
    """Optional, any plugin: receives the preemption extenders when the configuration has some."""

    def bind_preemption_extenders(self, extenders: PreemptionExtenders) -> None: ...


@runtime_checkable
class NominatorAware(Protocol):
    """Optional, any plugin: receives the scheduler's nominated pods once the scheduler exists."""

    def bind_nominator(self, nominator: NominatedPods) -> None: ...


class FrameworkRunner(Protocol):
    """What a plugin that drives other plugins may run (the profile's
    :class:`~koord_scheduler.framework.runtime.Framework` provides it)."""

    @property
    def pre_filter_plugins(self) -> Sequence[PreFilterPlugin]: ...

    @property
    def filter_plugin_names(self) -> Sequence[str]:
        """The Filter plugins of the profile, in order."""
        ...

    @property
    def reservation_filter_plugins(self) -> Sequence[ReservationFilterPlugin]: ...

    @property
    def numa_hint_providers(self) -> Sequence[NUMAHintProvider]:
        """The profile's NUMA hint providers, in order (plugins enabled at Filter or Reserve)."""
        ...

    def filter_nodes_uncached(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """The Filter chain over ``positions`` without the per-node cache (answers that depend on more
        than the node's row: dry runs that edit the snapshot). Returns the feasible positions."""
        ...

    def run_reservation_filter_plugins(
        self, state: CycleState, pod: Pod, reservation: object, node_info: NodeInfo
    ) -> Status: ...

    async def run_pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status: ...

    def preemption_refusal(self, state: CycleState, pod: Pod) -> Status | None:
        """The first :class:`PreemptionGate` refusal for ``pod`` (an Unschedulable status naming the plugin),
        or None when every gate allows it to preempt on its own."""
        ...


@runtime_checkable
class FrameworkAware(Protocol):
    """Optional, any plugin: plugins that drive other plugins (the Reservation plugin runs the
    reservation filter plugins, preemption runs Filter) receive the framework once it is built."""

    def bind_framework(self, framework: FrameworkRunner) -> None: ...


class AddedPodsCheck(Protocol):
    """One cycle's batch recheck of a Filter answer with extra pods added to some nodes."""

    def rejections(
        self, snapshot: ClusterSnapshot, added: Sequence[tuple[int, Sequence[Pod]]]
    ) -> FailureChunk | None:
        """The nodes among ``added`` (position, pods to add there) where the pod no longer fits with those
        pods counted, with statuses stamped with the plugin; None when every node fits. A pod already
        accounted on its node (assumed) is not counted twice."""
        ...


@runtime_checkable
class AddedPodsFilter(Plugin, Protocol):
    """Optional, on a Filter plugin: answer for many nodes at once as if extra pods ran there, without
    editing the snapshot (Filtering with nominated pods otherwise runs the whole chain node by node)."""

    def added_pods_check(self, state: CycleState, active_filters: Sequence[str]) -> AddedPodsCheck | None:
        """A check exact for this cycle, or None. Exact means that among ``active_filters`` (the Filter
        plugins running this cycle, by name) this plugin is the only one whose answer depends on the pods
        on a node, so no other plugin's answer can change when pods are added. The runtime asks only
        when no active PreFilter plugin has PreFilterExtensions."""
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
