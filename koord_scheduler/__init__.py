"""koord-scheduler: a Koordinator-style Kubernetes scheduler.

The names below are the public surface for plugin authors: one Protocol per extension point and per
optional capability, in three tiers (kube-scheduler's points, Koordinator's stages, fast paths; a plugin
implements only the ones it needs, and declares them for mypy), the :class:`Handle` a factory receives
(its profile's framework), the values passed between the runtime and plugins, and the registry. Register
a plugin in code with ``new_scheduler_command(with_plugin(name, factory))`` (:mod:`koord_scheduler.app.cli`),
or install it under the ``koord_scheduler.plugins`` entry-point group (:data:`ENTRY_POINT_GROUP`). See
docs/plugins.md.

The names are imported on first use (:pep:`562`), so a process that needs only part of the package,
such as ``koord-scheduler --help``, does not pay for all of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koord_scheduler.framework.cycle_state import CycleState, StateKey
    from koord_scheduler.framework.fast_paths import (
        AddedPodsCheck,
        AddedPodsFilter,
        CyclePreparer,
        QueueSortKey,
        ScoresOnlyNormalizer,
        SignedPlugin,
        WarmUpPlugin,
    )
    from koord_scheduler.framework.handle import (
        ClusterClient,
        Handle,
        NominatedPods,
        PodNominating,
        PreemptionExtenders,
    )
    from koord_scheduler.framework.interfaces import (
        BatchFilterPlugin,
        BatchScorePlugin,
        BindPlugin,
        EnqueueExtensions,
        FilterPlugin,
        PermitPlugin,
        Plugin,
        PostBindPlugin,
        PostFilterPlugin,
        PreBindPlugin,
        PreBindPreFlight,
        PreEnqueuePlugin,
        PreFilterExtensions,
        PreFilterPlugin,
        PreScorePlugin,
        QueueSortPlugin,
        ReservePlugin,
        ScoreExtensions,
        ScorePlugin,
    )
    from koord_scheduler.framework.koordinator_stages import (
        FilterTransformer,
        JobNodeFinder,
        NodePreferrer,
        NUMAHintProvider,
        PodPatchApplier,
        PreemptionGate,
        PreFilterTransformer,
        ReservationFilterPlugin,
        ReservationNominator,
        ReservationPreBindPlugin,
        ScoreTransformer,
    )
    from koord_scheduler.framework.numa_affinity import NUMATopologyHint
    from koord_scheduler.framework.registry import ENTRY_POINT_GROUP, PluginFactory, PluginSpec, Registry, with_plugin
    from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
    from koord_scheduler.framework.status import Code, Status, error, skip, success, unresolvable, unschedulable, wait
    from koord_scheduler.framework.types import (
        MAX_NODE_SCORE,
        MIN_NODE_SCORE,
        ActionType,
        ClusterEvent,
        ClusterEventWithHint,
        EventResource,
        NodeFilterResult,
        PostFilterResult,
        PreFilterResult,
        QueuedPodInfo,
        QueueingHint,
    )

_HOMES: dict[str, str] = {
    "ENTRY_POINT_GROUP": "koord_scheduler.framework.registry",
    "MAX_NODE_SCORE": "koord_scheduler.framework.types",
    "MIN_NODE_SCORE": "koord_scheduler.framework.types",
    "ActionType": "koord_scheduler.framework.types",
    "AddedPodsCheck": "koord_scheduler.framework.fast_paths",
    "AddedPodsFilter": "koord_scheduler.framework.fast_paths",
    "BatchFilterPlugin": "koord_scheduler.framework.interfaces",
    "BatchScorePlugin": "koord_scheduler.framework.interfaces",
    "BindPlugin": "koord_scheduler.framework.interfaces",
    "ClusterClient": "koord_scheduler.framework.handle",
    "ClusterEvent": "koord_scheduler.framework.types",
    "ClusterEventWithHint": "koord_scheduler.framework.types",
    "ClusterSnapshot": "koord_scheduler.framework.snapshot",
    "Code": "koord_scheduler.framework.status",
    "CyclePreparer": "koord_scheduler.framework.fast_paths",
    "CycleState": "koord_scheduler.framework.cycle_state",
    "EnqueueExtensions": "koord_scheduler.framework.interfaces",
    "EventResource": "koord_scheduler.framework.types",
    "FilterPlugin": "koord_scheduler.framework.interfaces",
    "FilterTransformer": "koord_scheduler.framework.koordinator_stages",
    "Handle": "koord_scheduler.framework.handle",
    "IntArray": "koord_scheduler.framework.snapshot",
    "JobNodeFinder": "koord_scheduler.framework.koordinator_stages",
    "NUMAHintProvider": "koord_scheduler.framework.koordinator_stages",
    "NUMATopologyHint": "koord_scheduler.framework.numa_affinity",
    "NodeFilterResult": "koord_scheduler.framework.types",
    "NodeInfo": "koord_scheduler.framework.snapshot",
    "NodePreferrer": "koord_scheduler.framework.koordinator_stages",
    "NominatedPods": "koord_scheduler.framework.handle",
    "PermitPlugin": "koord_scheduler.framework.interfaces",
    "Plugin": "koord_scheduler.framework.interfaces",
    "PluginFactory": "koord_scheduler.framework.registry",
    "PluginSpec": "koord_scheduler.framework.registry",
    "PodNominating": "koord_scheduler.framework.handle",
    "PodPatchApplier": "koord_scheduler.framework.koordinator_stages",
    "Positions": "koord_scheduler.framework.snapshot",
    "PostBindPlugin": "koord_scheduler.framework.interfaces",
    "PostFilterPlugin": "koord_scheduler.framework.interfaces",
    "PostFilterResult": "koord_scheduler.framework.types",
    "PreBindPlugin": "koord_scheduler.framework.interfaces",
    "PreBindPreFlight": "koord_scheduler.framework.interfaces",
    "PreEnqueuePlugin": "koord_scheduler.framework.interfaces",
    "PreFilterExtensions": "koord_scheduler.framework.interfaces",
    "PreFilterPlugin": "koord_scheduler.framework.interfaces",
    "PreFilterResult": "koord_scheduler.framework.types",
    "PreFilterTransformer": "koord_scheduler.framework.koordinator_stages",
    "PreScorePlugin": "koord_scheduler.framework.interfaces",
    "PreemptionExtenders": "koord_scheduler.framework.handle",
    "PreemptionGate": "koord_scheduler.framework.koordinator_stages",
    "QueueSortKey": "koord_scheduler.framework.fast_paths",
    "QueueSortPlugin": "koord_scheduler.framework.interfaces",
    "QueuedPodInfo": "koord_scheduler.framework.types",
    "QueueingHint": "koord_scheduler.framework.types",
    "Registry": "koord_scheduler.framework.registry",
    "ReservationFilterPlugin": "koord_scheduler.framework.koordinator_stages",
    "ReservationNominator": "koord_scheduler.framework.koordinator_stages",
    "ReservationPreBindPlugin": "koord_scheduler.framework.koordinator_stages",
    "ReservePlugin": "koord_scheduler.framework.interfaces",
    "ScoreExtensions": "koord_scheduler.framework.interfaces",
    "ScorePlugin": "koord_scheduler.framework.interfaces",
    "ScoreTransformer": "koord_scheduler.framework.koordinator_stages",
    "ScoresOnlyNormalizer": "koord_scheduler.framework.fast_paths",
    "SignedPlugin": "koord_scheduler.framework.fast_paths",
    "StateKey": "koord_scheduler.framework.cycle_state",
    "Status": "koord_scheduler.framework.status",
    "WarmUpPlugin": "koord_scheduler.framework.fast_paths",
    "error": "koord_scheduler.framework.status",
    "skip": "koord_scheduler.framework.status",
    "success": "koord_scheduler.framework.status",
    "unresolvable": "koord_scheduler.framework.status",
    "unschedulable": "koord_scheduler.framework.status",
    "wait": "koord_scheduler.framework.status",
    "with_plugin": "koord_scheduler.framework.registry",
}
"""Each public name and the module it comes from."""

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "ActionType",
    "AddedPodsCheck",
    "AddedPodsFilter",
    "BatchFilterPlugin",
    "BatchScorePlugin",
    "BindPlugin",
    "ClusterClient",
    "ClusterEvent",
    "ClusterEventWithHint",
    "ClusterSnapshot",
    "Code",
    "CyclePreparer",
    "CycleState",
    "EnqueueExtensions",
    "EventResource",
    "FilterPlugin",
    "FilterTransformer",
    "Handle",
    "IntArray",
    "JobNodeFinder",
    "NUMAHintProvider",
    "NUMATopologyHint",
    "NodeFilterResult",
    "NodeInfo",
    "NodePreferrer",
    "NominatedPods",
    "PermitPlugin",
    "Plugin",
    "PluginFactory",
    "PluginSpec",
    "PodNominating",
    "PodPatchApplier",
    "Positions",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreBindPreFlight",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreFilterTransformer",
    "PreScorePlugin",
    "PreemptionExtenders",
    "PreemptionGate",
    "QueueSortKey",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "QueueingHint",
    "Registry",
    "ReservationFilterPlugin",
    "ReservationNominator",
    "ReservationPreBindPlugin",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "ScoreTransformer",
    "ScoresOnlyNormalizer",
    "SignedPlugin",
    "StateKey",
    "Status",
    "WarmUpPlugin",
    "error",
    "skip",
    "success",
    "unresolvable",
    "unschedulable",
    "wait",
    "with_plugin",
]


if not TYPE_CHECKING:  # mypy sees the imports above; a module __getattr__ would turn typos into Any

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
