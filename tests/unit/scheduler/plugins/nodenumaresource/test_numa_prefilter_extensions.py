"""NodeNUMAResource's AddPod/RemovePod (Koordinator ``nodenumaresource/preempt_test.go``, facts
transcribed): a pod removed in a dry run frees its CPUs and NUMA shares in that cycle state only, adding it
back holds them again, and a pod the cache holds nothing for gets CPUs as Reserve would give it.
Topology: 2 NUMA nodes of 8 logical CPUs and 32Gi each (NUMA 0: CPUs 0-3,8-11; NUMA 1: 4-7,12-15)."""

from __future__ import annotations

import json

import pytest

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import NodeInfo
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.nodenumaresource import preemption
from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import make_plugin, nrt_object, numa_zones

STATUS = "scheduling.koordinator.sh/resource-status"
SPEC = "scheduling.koordinator.sh/resource-spec"
NUMA_STATUS: dict[str, object] = {"cpuset": "0-1,8-9", "numaNodeResources": [
    {"node": 0, "resources": {"cpu": "2"}}, {"node": 1, "resources": {"cpu": "2"}},
]}  # fmt: skip


def lsr(name: str, cpu: str, *, status: dict[str, object] | None = None, required: bool = False) -> Pod:
    builder = make_pod(name).req(cpu=cpu, memory="1Gi").label("koordinator.sh/qosClass", "LSR").priority(9999)
    if status is not None:
        builder = builder.annotation(STATUS, json.dumps(status)).node("n1")
    if required:
        builder = builder.annotation(SPEC, json.dumps({"requiredCPUBindPolicy": "FullPCPUs"}))
    return builder.build()


def setup(*held: Pod) -> tuple[NodeNUMAResource, NodeInfo]:
    snap = make_snapshot([make_node("n1").allocatable(cpu="16", memory="64Gi", pods="110").build()])
    plugin, _ = make_plugin(snap, nrt_object("n1", zones=numa_zones()))
    for p in held:
        plugin.on_pod(EventType.ADDED, None, p)
    info = snap.node_info("n1")
    assert info is not None
    return plugin, info


def prefiltered(plugin: NodeNUMAResource, pod: Pod) -> CycleState:
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, plugin._snapshot)
    assert status.is_success, status
    return state


def view(plugin: NodeNUMAResource, state: CycleState) -> tuple[frozenset[int], dict[int, dict[str, int]]]:
    allocations = preemption.allocations_for(state, plugin.allocations, "n1")
    return allocations.taken("n1")[0], allocations.numa_allocated("n1")


def test_remove_pod_frees_its_cpus_and_numa_shares_add_pod_holds_them_again() -> None:
    """Koordinator: RemovePod of the pod holding 0,1,8,9 with cpu 2 on each NUMA node adds those CPUs and
    shares to the preemptible state; AddPod takes them back out."""
    victim = lsr("victim", "4", status=NUMA_STATUS)
    plugin, info = setup(victim)
    state = prefiltered(plugin, lsr("preemptor", "4"))
    assert view(plugin, state) == (frozenset({0, 1, 8, 9}), {0: {"cpu": 2000}, 1: {"cpu": 2000}})
    assert plugin.remove_pod(state, lsr("preemptor", "4"), victim, info).is_success
    assert view(plugin, state) == (frozenset(), {})
    assert plugin.allocations.taken("n1")[0] == {0, 1, 8, 9}, "the cache itself is untouched"
    clone = state.clone()
    assert plugin.add_pod(state, lsr("preemptor", "4"), victim, info).is_success
    assert view(plugin, state) == (frozenset({0, 1, 8, 9}), {0: {"cpu": 2000}, 1: {"cpu": 2000}})
    assert view(plugin, clone) == (frozenset(), {}), "a clone keeps its own copy of the changes"


def test_add_pod_of_a_pod_already_held_counts_it_once() -> None:
    """Koordinator subtracts it again (a CPU set to remove); what is available is the same: its CPUs stay
    taken, and here its NUMA shares are not counted twice."""
    victim = lsr("victim", "4", status=NUMA_STATUS)
    plugin, info = setup(victim)
    state = prefiltered(plugin, lsr("preemptor", "4"))
    assert plugin.add_pod(state, lsr("preemptor", "4"), victim, info).is_success
    assert view(plugin, state) == (frozenset({0, 1, 8, 9}), {0: {"cpu": 2000}, 1: {"cpu": 2000}})


def test_add_pod_of_a_pending_pod_gives_it_cpus_and_remove_pod_takes_exactly_those_back() -> None:
    plugin, info = setup(lsr("holder", "4", status={"cpuset": "0-1,8-9"}))
    state = prefiltered(plugin, lsr("preemptor", "4"))
    member = lsr("member", "4")
    assert plugin.add_pod(state, member, member, info).is_success
    taken, _ = view(plugin, state)
    assert taken == {0, 1, 8, 9, 4, 5, 12, 13}, "the emptier NUMA node, whole cores (FullPCPUs)"
    assert plugin.remove_pod(state, member, member, info).is_success
    assert view(plugin, state)[0] == {0, 1, 8, 9}


@pytest.mark.parametrize(
    ("removed", "want_success"),
    [
        pytest.param((), False, id="nothing-removed-2-whole-cores"),
        pytest.param(("a",), False, id="one-victim-4-whole-cores"),
        pytest.param(("a", "b"), True, id="two-victims-6-whole-cores"),
    ],
)
def test_filter_reads_the_dry_run_changes(removed: tuple[str, ...], want_success: bool) -> None:
    """Holders of one CPU on each of cores 0-5 (CPU k and k+8 are siblings), so only cores 6 and 7 are
    whole: a pod requiring 5 whole cores (10 CPUs) fits once a and b are off."""
    held = {
        "a": lsr("a", "2", status={"cpuset": "0-1"}),
        "b": lsr("b", "2", status={"cpuset": "2-3"}),
        "c": lsr("c", "2", status={"cpuset": "4-5"}),
    }
    plugin, info = setup(*held.values())
    preemptor = lsr("preemptor", "10", required=True)
    state = prefiltered(plugin, preemptor)
    for name in removed:
        assert plugin.remove_pod(state, preemptor, held[name], info).is_success
    assert plugin.filter(state, preemptor, info).is_success is want_success
    fresh = prefiltered(plugin, preemptor)
    assert not plugin.filter(fresh, preemptor, info).is_success, "other cycles still see every holder"
