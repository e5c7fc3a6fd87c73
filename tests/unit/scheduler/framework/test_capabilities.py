"""What the runtime finds a plugin implements (isinstance on the runtime-checkable Protocols, once, when
the profile is built), the per-cycle preparation step, and the public surface for plugin authors."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import koord_scheduler
from apis.config.profile import DEFAULT_MULTIPOINT
from apis.core.types import Pod
from koord_scheduler.framework import fast_paths, koordinator_stages
from koord_scheduler.framework import interfaces as ep
from koord_scheduler.framework.capabilities import find_capabilities
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import PluginCycleError, ProfileError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import Plugin
from koord_scheduler.framework.runtime import Framework
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status, success, unschedulable
from koord_scheduler.framework.types import NodeFilterResult, PreFilterResult, QueuedPodInfo
from koord_scheduler.plugins.registry import in_tree_registry
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, make_snapshot

REPO = Path(__file__).resolve().parents[4]


class Recorder:
    """PreFilter plus a per-cycle preparer; records the order of calls."""

    name = "Recorder"

    def __init__(self, log: list[str], *, fail: bool = False) -> None:
        self.log = log
        self.fail = fail
        self.snapshots: list[ClusterSnapshot] = []

    def prepare_cycle(self, snapshot: ClusterSnapshot) -> None:
        if self.fail:
            raise RuntimeError("rows out of sync")
        self.snapshots.append(snapshot)
        self.log.append("prepare_cycle")

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        self.log.append("pre_filter")
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None


class FilterOnly:
    """Batch Filter, nothing else (no ``score_extensions``, so it cannot be a Score plugin)."""

    name = "FilterOnly"

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        return NodeFilterResult.all_pass(len(positions))

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        return np.zeros(len(positions), dtype=np.int64)


class Sorter:
    name = "Sorter"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class Watcher:
    """Reads the scheduler's nominated pods through its handle, when it runs."""

    name = "Watcher"

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_enqueue(self, pod: Pod) -> Status:
        return success() if not self.handle.nominator else unschedulable("someone is nominated")


def framework(plugins: Sequence[Plugin], points: dict[str, list[str]]) -> Framework:
    fwk = Framework("test", FakeHandle(make_snapshot([make_node("n1").build()])))
    fwk.install({p.name: p for p in plugins}, points, {})
    return fwk


def test_prepare_cycle_runs_once_per_cycle_before_pre_filter_with_the_cycles_snapshot() -> None:
    log: list[str] = []
    plugin = Recorder(log)
    fwk = framework([plugin], {"preFilter": [plugin.name]})
    pod = make_pod("p").build()
    fwk.run_pre_filter(CycleState(), pod)
    fwk.run_pre_filter(CycleState(), pod)
    assert log == ["prepare_cycle", "pre_filter", "prepare_cycle", "pre_filter"]
    assert plugin.snapshots == [fwk.snapshot, fwk.snapshot]


def test_a_failing_prepare_cycle_aborts_the_cycle_naming_the_plugin() -> None:
    plugin = Recorder([], fail=True)
    fwk = framework([plugin], {"preFilter": [plugin.name]})
    with pytest.raises(PluginCycleError) as raised:
        fwk.run_pre_filter(CycleState(), make_pod("p").build())
    assert raised.value.status.plugin == "Recorder"
    assert "rows out of sync" in raised.value.status.message


def test_capabilities_are_found_by_protocol() -> None:
    log: list[str] = []
    recorder, only, sorter = Recorder(log), FilterOnly(), Sorter()
    plugins = {p.name: p for p in (recorder, only, sorter)}
    points = {"preFilter": ["Recorder"], "filter": ["FilterOnly"], "queueSort": ["Sorter"]}
    caps = find_capabilities(plugins, points, {})
    assert caps.cycle_preparers == [recorder]
    assert caps.pre_filter == [recorder]
    assert [e.name for e in caps.filters] == ["FilterOnly"]
    assert caps.filters[0].few is None, "no per-node form"
    assert caps.queue_sort is sorter
    assert not ep.implements(only, ep.SCORE), "score_nodes without score_extensions is not a Score plugin"
    assert ep.implements(only, ep.FILTER)


def test_a_plugin_configured_at_a_point_it_does_not_implement_is_a_profile_error() -> None:
    with pytest.raises(ProfileError, match="'Sorter' does not implement the filter extension point"):
        find_capabilities({"Sorter": Sorter()}, {"filter": ["Sorter"]}, {})


def test_a_plugin_reaches_the_schedulers_nominator_through_the_framework_it_was_built_with() -> None:
    services = FakeHandle(make_snapshot([make_node("n1").build()]))
    fwk = Framework("test", services)
    watcher = Watcher(fwk)
    fwk.install({watcher.name: watcher}, {"preEnqueue": [watcher.name]}, {})
    pod = make_pod("p").build()
    assert fwk.run_pre_enqueue(pod).is_success
    services.nominator.add(make_pod("high").build(), "n1")
    assert fwk.nominator is services.nominator
    assert fwk.run_pre_enqueue(pod).message == "someone is nominated"


def test_public_surface_is_pinned() -> None:
    names = koord_scheduler.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    assert names == [
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
    assert all(hasattr(koord_scheduler, n) for n in names)
    protocols = {
        n
        for module in (ep, koordinator_stages, fast_paths)
        for n, v in vars(module).items()
        if isinstance(v, type) and v.__module__ == module.__name__ and n[0].isupper()
    }
    assert protocols <= set(names), "every extension point and capability Protocol is public"
    authors_need = {"Status", "Code", "CycleState", "Registry", "with_plugin", "Handle"}
    assert authors_need <= set(names)


def test_the_default_profile_names_only_registered_plugins() -> None:
    registered = set(in_tree_registry().names())
    assert [p.name for p in DEFAULT_MULTIPOINT if p.name not in registered] == []


def test_the_example_plugin_satisfies_the_protocols() -> None:
    path = REPO / "examples" / "koord-scheduler-example-plugin" / "koord_example_plugin" / "plugin.py"
    spec = importlib.util.spec_from_file_location("koord_example_plugin_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plugin = module.new(None, FakeHandle(make_snapshot([])))
    assert isinstance(plugin, koord_scheduler.BatchFilterPlugin)
    assert isinstance(plugin, koord_scheduler.BatchScorePlugin)
