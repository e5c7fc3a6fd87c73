"""The second tier of the plugin contract: Koordinator's stages, native stages of the one runtime.

Optional for a plugin. The transformers (BeforePreFilter / AfterPreFilter, BeforeFilter, BeforeScore) run
only if their plugin is enabled at the matching extension point, in the profile's order; a non-success
status aborts the cycle, naming the plugin. ``reservation`` in the reservation stages is the Reservation
plugin's own record of one reservation (opaque to the framework). The first tier is
:mod:`.interfaces`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.interfaces import Plugin
from koord_scheduler.framework.numa_affinity import NUMATopologyHint
from koord_scheduler.framework.pod_patch import PodPatch
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import PreFilterResult


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

    def prefer_nodes(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> tuple[Sequence[str], Status]:
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
class PodPatchApplier(Plugin, Protocol):
    """Koordinator's PreBindExtensions (the DefaultPreBind plugin): after every PreBind plugin succeeded,
    sends the labels and annotations they recorded in the cycle state's
    :class:`~koord_scheduler.framework.pod_patch.PodPatch` as one request. Enabled at preBind."""

    async def apply_pod_patch(self, state: CycleState, pod: Pod, patch: PodPatch) -> Status:
        """Failure aborts the binding like a PreBind failure."""
        ...


@runtime_checkable
class PreemptionGate(Plugin, Protocol):
    """Optional, any plugin of the profile: may refuse that a pod preempt on its own. DefaultPreemption asks
    before its dry run (Coscheduling refuses for a gang member whose gang could not complete even with it)."""

    def refuse_preemption(self, state: CycleState, pod: Pod) -> str | None:
        """None allows; otherwise why not (the pod's unschedulable message)."""
        ...


@runtime_checkable
class NUMAHintProvider(Plugin, Protocol):
    """Koordinator's ``NUMATopologyHintProvider``: a plugin whose resources the topology manager
    (NodeNUMAResource, on nodes with a NUMA topology policy) aligns with CPUs and memory. The profile's
    providers are the handle's ``numa_hint_providers``."""

    def numa_topology_hints(
        self, state: CycleState, pod: Pod, node_name: str
    ) -> tuple[Mapping[str, Sequence[NUMATopologyHint]] | None, Status]:
        """Hints per resource (None: no preference); a failure status when nothing the pod asks for fits
        the node whatever the NUMA nodes (Unschedulable, or Error)."""
        ...

    def allocate_numa(self, state: CycleState, pod: Pod, node_name: str, affinity: int | None) -> Status:
        """Whether the pod's resources fit inside the chosen NUMA ``affinity`` (a mask; None: any)."""
        ...
