"""koord-scheduler: a Koordinator-style Kubernetes scheduler.

The names below are the public surface for plugin authors: one Protocol per extension point and per
optional capability (a plugin implements only the ones it needs, and states them for mypy with
``_: type[FilterPlugin] = MyPlugin`` under ``TYPE_CHECKING``), the handles a factory receives, the values
passed between the runtime and plugins, and the registry. Register a plugin in code with
``new_scheduler_command(with_plugin(name, factory))`` (:mod:`koord_scheduler.app.cli`), or install it
under the ``koord_scheduler.plugins`` entry-point group (:data:`ENTRY_POINT_GROUP`). See docs/plugins.md.

The names are imported on first use (:pep:`562`), so a process that needs only part of the package,
such as ``koord-scheduler --help``, does not pay for all of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koord_scheduler.framework.cycle_state import CycleState, StateKey
    from koord_scheduler.framework.handle import ClusterClient, ExtendedHandle, FrameworkHandle, WatchingHandle
    from koord_scheduler.framework.interfaces import (
        AddedPodsCheck,
        AddedPodsFilter,
        BatchFilterPlugin,
        BatchScorePlugin,
        BindPlugin,
        CyclePreparer,
        EnqueueExtensions,
        FilterPlugin,
        FilterTransformer,
        FrameworkAware,
        FrameworkRunner,
        NodePreferrer,
        NominatedPods,
        NominatorAware,
        PermitPlugin,
        Plugin,
        PodPatchApplier,
        PostBindPlugin,
        PostFilterPlugin,
        PreBindPlugin,
        PreEnqueuePlugin,
        PreFilterExtensions,
        PreFilterPlugin,
        PreFilterTransformer,
        PreScorePlugin,
        QueueSortKey,
        QueueSortPlugin,
        ReservationFilterPlugin,
        ReservationNominator,
        ReservationPreBindPlugin,
        ReservePlugin,
        ScoreExtensions,
        ScorePlugin,
        ScoresOnlyNormalizer,
        ScoreTransformer,
        SignedPlugin,
        WarmUpPlugin,
    )
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
    "AddedPodsCheck": "koord_scheduler.framework.interfaces",
    "AddedPodsFilter": "koord_scheduler.framework.interfaces",
    "BatchFilterPlugin": "koord_scheduler.framework.interfaces",
    "BatchScorePlugin": "koord_scheduler.framework.interfaces",
    "BindPlugin": "koord_scheduler.framework.interfaces",
    "ClusterClient": "koord_scheduler.framework.handle",
    "ClusterEvent": "koord_scheduler.framework.types",
    "ClusterEventWithHint": "koord_scheduler.framework.types",
    "ClusterSnapshot": "koord_scheduler.framework.snapshot",
    "Code": "koord_scheduler.framework.status",
    "CyclePreparer": "koord_scheduler.framework.interfaces",
    "CycleState": "koord_scheduler.framework.cycle_state",
    "EnqueueExtensions": "koord_scheduler.framework.interfaces",
    "EventResource": "koord_scheduler.framework.types",
    "ExtendedHandle": "koord_scheduler.framework.handle",
    "FilterPlugin": "koord_scheduler.framework.interfaces",
    "FilterTransformer": "koord_scheduler.framework.interfaces",
    "FrameworkAware": "koord_scheduler.framework.interfaces",
    "FrameworkHandle": "koord_scheduler.framework.handle",
    "FrameworkRunner": "koord_scheduler.framework.interfaces",
    "IntArray": "koord_scheduler.framework.snapshot",
    "NodeFilterResult": "koord_scheduler.framework.types",
    "NodeInfo": "koord_scheduler.framework.snapshot",
    "NodePreferrer": "koord_scheduler.framework.interfaces",
    "NominatedPods": "koord_scheduler.framework.interfaces",
    "NominatorAware": "koord_scheduler.framework.interfaces",
    "PermitPlugin": "koord_scheduler.framework.interfaces",
    "Plugin": "koord_scheduler.framework.interfaces",
    "PluginFactory": "koord_scheduler.framework.registry",
    "PluginSpec": "koord_scheduler.framework.registry",
    "PodPatchApplier": "koord_scheduler.framework.interfaces",
    "Positions": "koord_scheduler.framework.snapshot",
    "PostBindPlugin": "koord_scheduler.framework.interfaces",
    "PostFilterPlugin": "koord_scheduler.framework.interfaces",
    "PostFilterResult": "koord_scheduler.framework.types",
    "PreBindPlugin": "koord_scheduler.framework.interfaces",
    "PreEnqueuePlugin": "koord_scheduler.framework.interfaces",
    "PreFilterExtensions": "koord_scheduler.framework.interfaces",
    "PreFilterPlugin": "koord_scheduler.framework.interfaces",
    "PreFilterResult": "koord_scheduler.framework.types",
    "PreFilterTransformer": "koord_scheduler.framework.interfaces",
    "PreScorePlugin": "koord_scheduler.framework.interfaces",
    "QueueSortKey": "koord_scheduler.framework.interfaces",
    "QueueSortPlugin": "koord_scheduler.framework.interfaces",
    "QueuedPodInfo": "koord_scheduler.framework.types",
    "QueueingHint": "koord_scheduler.framework.types",
    "Registry": "koord_scheduler.framework.registry",
    "ReservationFilterPlugin": "koord_scheduler.framework.interfaces",
    "ReservationNominator": "koord_scheduler.framework.interfaces",
    "ReservationPreBindPlugin": "koord_scheduler.framework.interfaces",
    "ReservePlugin": "koord_scheduler.framework.interfaces",
    "ScoreExtensions": "koord_scheduler.framework.interfaces",
    "ScorePlugin": "koord_scheduler.framework.interfaces",
    "ScoreTransformer": "koord_scheduler.framework.interfaces",
    "ScoresOnlyNormalizer": "koord_scheduler.framework.interfaces",
    "SignedPlugin": "koord_scheduler.framework.interfaces",
    "StateKey": "koord_scheduler.framework.cycle_state",
    "Status": "koord_scheduler.framework.status",
    "WarmUpPlugin": "koord_scheduler.framework.interfaces",
    "WatchingHandle": "koord_scheduler.framework.handle",
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
    "ExtendedHandle",
    "FilterPlugin",
    "FilterTransformer",
    "FrameworkAware",
    "FrameworkHandle",
    "FrameworkRunner",
    "IntArray",
    "NodeFilterResult",
    "NodeInfo",
    "NodePreferrer",
    "NominatedPods",
    "NominatorAware",
    "PermitPlugin",
    "Plugin",
    "PluginFactory",
    "PluginSpec",
    "PodPatchApplier",
    "Positions",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreFilterTransformer",
    "PreScorePlugin",
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
    "WatchingHandle",
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
