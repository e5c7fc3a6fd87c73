"""The batch resource formula: hand-computed cases and Koordinator's own batchresource test facts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from apis.configuration import ColocationStrategy
from apis.core.frozendict import FrozenDict
from apis.slo.nodemetric_record import HostAppUsage, NodeMetricRecord, PodUsage
from koord_scheduler.scheduler.controllers.batch import (
    BatchInputs,
    HighPriorityLoad,
    Pair,
    annotation_reserved,
    batch_allocatable,
    batch_inputs,
    cpuset_size,
    high_priority_load,
    is_degraded,
    needs_sync,
    node_reserved,
)
from tests.builders import make_node, make_pod

GI = 1024**3
G = 10**9
CAP = Pair(10000, 40 * GI)
SYS = Pair(500, 2 * GI)
HP_USED = Pair(3000, 10 * GI)


def inputs(**kwargs: Any) -> BatchInputs:
    base: dict[str, Any] = {
        "capacity": CAP,
        "reserved": Pair(),
        "system_used": SYS,
        "hp": HighPriorityLoad(used=HP_USED),
    }
    base.update(kwargs)
    return BatchInputs(**base)


def strategy(**kwargs: Any) -> ColocationStrategy:
    return dataclasses.replace(ColocationStrategy(enable=True), **kwargs)


@pytest.mark.parametrize(
    ("given", "config", "want"),
    [
        pytest.param(inputs(), strategy(), (2500, 14 * GI), id="B1-usage-usage"),
        pytest.param(inputs(hp=HighPriorityLoad(used=Pair(8000, 30 * GI))), strategy(), (0, 0), id="B2-clamped-at-0"),
        pytest.param(inputs(reserved=Pair(1500, 3 * GI)), strategy(), (1500, 13 * GI), id="B3-reserved-above-sys-wins"),
        pytest.param(
            inputs(reserved=Pair(1000, 2 * GI), hp=HighPriorityLoad(used=HP_USED, request=Pair(6000, 20 * GI))),
            strategy(memory_calculate_policy="request"),
            (2000, 4 * GI),
            id="B4-memory-request",
        ),
        pytest.param(
            inputs(hp=HighPriorityLoad(max_used_request=Pair(6000, 20 * GI))),
            strategy(cpu_calculate_policy="maxUsageRequest", memory_calculate_policy="maxUsageRequest"),
            (0, 4 * GI),
            id="B5-max-usage-request",
        ),
        pytest.param(inputs(), strategy(cpu_calculate_policy="request"), (2500, 14 * GI), id="B6-cpu-request-is-usage"),
        pytest.param(inputs(), strategy(batch_cpu_threshold_percent=20), (2000, 14 * GI), id="B7-cpu-cap"),
        pytest.param(inputs(), strategy(batch_memory_threshold_percent=0), (2500, 0), id="B8-memory-cap-0"),
        pytest.param(
            inputs(),
            strategy(cpu_reclaim_threshold_percent=100, memory_reclaim_threshold_percent=100),
            (6500, 28 * GI),
            id="B9-no-margin",
        ),
        pytest.param(inputs(), strategy(cpu_reclaim_threshold_percent=56), (2100, 14 * GI), id="B10-reclaim-56"),
        pytest.param(
            BatchInputs(Pair(100_000, 120 * G), Pair(), Pair(7000, 12 * G), HighPriorityLoad(used=Pair(33000, 33 * G))),
            strategy(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65),
            (25000, 33 * G),
            id="koordinator-calculate-with-memory-usage",
        ),
    ],
)
def test_batch_allocatable(given: BatchInputs, config: ColocationStrategy, want: tuple[int, int]) -> None:
    got = batch_allocatable(given, config)
    assert (got.cpu, got.memory) == want
    assert f"batch-cpu {want[0]} " in got.explanation


def metric(**kwargs: Any) -> NodeMetricRecord:
    base: dict[str, Any] = {"name": "n1", "update_time": 1000.0, "has_node_metric": True}
    base.update(kwargs)
    return NodeMetricRecord(**base)


def usage(cpu: int, memory: int, priority: str = "") -> PodUsage:
    return PodUsage(FrozenDict({"cpu": cpu, "memory": memory}), priority == "koord-prod", priority)


def test_research_ex1_and_ex2() -> None:
    """32 cores / 128 GiB, kubelet reserves 1 core / 4 GiB; LS pod A with a metric, LS pod B without,
    a BE pod C (ignored)."""
    node = make_node("n1").capacity(cpu="32", memory="128Gi").allocatable(cpu="31", memory="124Gi").build()
    a = make_pod("a").req(cpu="8", memory="16Gi").node("n1").phase("Running").label("koordinator.sh/qosClass", "LS")
    b = make_pod("b").req(cpu="4", memory="8Gi").node("n1").phase("Running").label("koordinator.sh/qosClass", "LS")
    c = make_pod("c").req(cpu="4", memory="8Gi").node("n1").phase("Running").label("koordinator.sh/qosClass", "BE")
    pods = [a.build(), b.build(), c.build()]
    nm = metric(
        system_usage=FrozenDict({"cpu": 2000, "memory": 6 * GI}),
        pods=FrozenDict({"default/a": usage(3000, 10 * GI), "default/c": usage(4000, 8 * GI, "koord-batch")}),
    )
    got = batch_inputs(node, pods, nm)
    assert got.reserved == Pair(1000, 4 * GI)
    assert got.hp == HighPriorityLoad(
        used=Pair(7000, 18 * GI), request=Pair(12000, 24 * GI), max_used_request=Pair(12000, 24 * GI)
    )
    ex1 = batch_allocatable(got, strategy())
    assert (ex1.cpu, ex1.memory) == (10200, 63565515981)
    ex2 = batch_allocatable(got, strategy(cpu_calculate_policy="maxUsageRequest", memory_calculate_policy="request"))
    # B has no metric: counted at its request in maxUsageRequest (Koordinator's node level would give 9200).
    assert (ex2.cpu, ex2.memory) == (5200, 59270548685)


def test_research_ex3_lse_dangling_caps() -> None:
    node = (
        make_node("n1")
        .capacity(cpu="16", memory="64Gi")
        .allocatable(cpu="15500m", memory="62Gi")
        .annotation("node.koordinator.sh/reservation", '{"resources":{"cpu":"2","memory":"4Gi"}}')
        .build()
    )
    d = make_pod("d").req(cpu="4", memory="8Gi").node("n1").phase("Running").label("koordinator.sh/qosClass", "LSE")
    nm = metric(
        system_usage=FrozenDict({"cpu": 1000, "memory": 3 * GI}),
        pods=FrozenDict({"default/d": usage(1000, 6 * GI), "default/e": usage(500, 1 * GI, "koord-prod")}),
    )
    got = batch_inputs(node, [d.build()], nm)
    assert got.reserved == Pair(2000, 4 * GI)
    assert got.hp.used == Pair(4500, 7 * GI)
    config = strategy(
        cpu_reclaim_threshold_percent=80, batch_cpu_threshold_percent=30, batch_memory_threshold_percent=50
    )
    result = batch_allocatable(got, config)
    assert (result.cpu, result.memory) == (4800, 32856499815)


def test_koordinator_pods_in_multiple_priority_classes() -> None:
    """Koordinator TestPluginCalculate "calculate with pods in multiple priority classes": an LS pod, a
    koord-prod pod without QoS label, a BE pod (batch), a koord-mid pod (HP) and a Succeeded pod."""
    node = make_node("test-node1").capacity(cpu="100", memory="120G").build()
    pods = [
        make_pod("podProd", "test")
        .req(cpu="10", memory="10G")
        .label("koordinator.sh/qosClass", "LS")
        .node("test-node1")
        .phase("Running")
        .build(),
        make_pod("podProd1", "test")
        .req(cpu="10", memory="10G")
        .priority(9999, "koord-prod")
        .node("test-node1")
        .phase("Running")
        .build(),
        make_pod("podBatch", "test")
        .req(cpu="10", memory="10G")
        .label("koordinator.sh/qosClass", "BE")
        .node("test-node1")
        .phase("Running")
        .build(),
        make_pod("podMid", "test")
        .req(cpu="10", memory="20G")
        .label("koordinator.sh/qosClass", "BE")
        .priority(7000, "koord-mid")
        .node("test-node1")
        .phase("Pending")
        .build(),
        make_pod("podProd2", "test").req(cpu="10", memory="10G").node("test-node1").phase("Succeeded").build(),
    ]
    nm = metric(
        system_usage=FrozenDict({"cpu": 7000, "memory": 12 * G}),
        pods=FrozenDict(
            {
                "test/podProd": usage(5000, 5 * G),
                "test/podProd1": usage(6000, 6 * G),
                "test/podBatch": usage(10000, 10 * G),
                "test/podMid": usage(22000, 22 * G),
            }
        ),
    )
    result = batch_allocatable(
        batch_inputs(node, pods, nm), strategy(cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65)
    )
    assert (result.cpu, result.memory) == (25000, 33 * G)


@pytest.mark.parametrize(
    ("host_app_priority", "want_system"),
    [
        pytest.param("koord-prod", Pair(8000, 13 * G), id="prod-host-app-counts"),
        pytest.param("koord-mid", Pair(8000, 13 * G), id="mid-host-app-counts"),
        pytest.param("koord-batch", Pair(7000, 12 * G), id="batch-host-app-skipped"),
        pytest.param("", Pair(7000, 12 * G), id="no-priority-skipped"),
    ],
)
def test_host_applications(host_app_priority: str, want_system: Pair) -> None:
    node = make_node("n").capacity(cpu="100", memory="120G").build()
    nm = metric(
        system_usage=FrozenDict({"cpu": 7000, "memory": 12 * G}),
        host_apps=(HostAppUsage("nginx", FrozenDict({"cpu": 1000, "memory": G}), host_app_priority),),
    )
    assert batch_inputs(node, [], nm).system_used == want_system


def test_dangling_metrics_count_unless_batch_or_free() -> None:
    metrics = {
        "ns/gone-prod": usage(1000, GI, "koord-prod"),
        "ns/gone-unknown": usage(200, GI),
        "ns/gone-batch": usage(5000, GI, "koord-batch"),
        "ns/gone-free": usage(5000, GI, "koord-free"),
    }
    load = high_priority_load([], metrics)
    assert load == HighPriorityLoad(used=Pair(1200, 2 * GI), max_used_request=Pair(1200, 2 * GI))


@pytest.mark.parametrize(
    ("annotation", "want"),
    [
        pytest.param('{"resources":{"cpu":"2","memory":"4Gi"}}', Pair(2000, 4 * GI), id="quantities"),
        pytest.param('{"resources":{"cpu":"2"},"reservedCPUs":"0-3,8"}', Pair(5000, 0), id="cpuset-overrides-cpu"),
        pytest.param("{not json", Pair(), id="malformed-reserves-nothing"),
        pytest.param("", Pair(), id="absent"),
    ],
)
def test_annotation_reserved(annotation: str, want: Pair) -> None:
    assert annotation_reserved(annotation) == want


def test_reserved_is_max_of_kubelet_and_annotation() -> None:
    node = (
        make_node("n")
        .capacity(cpu="8", memory="32Gi")
        .allocatable(cpu="7", memory="31Gi")
        .annotation("node.koordinator.sh/reservation", '{"resources":{"cpu":"500m","memory":"2Gi"}}')
        .build()
    )
    assert node_reserved(node) == Pair(1000, 2 * GI)


def test_cpuset_size() -> None:
    assert cpuset_size("0-3,8, 10-11") == 7
    with pytest.raises(ValueError, match="bad cpuset"):
        cpuset_size("5-2")


@pytest.mark.parametrize(
    ("current", "want", "changed"),
    [
        pytest.param((10000, GI), (10900, GI), False, id="within-10-percent"),
        pytest.param((10000, GI), (11001, GI), True, id="beyond-10-percent"),
        pytest.param((10000, GI), (9000, GI), False, id="exactly-10-percent-is-not-more"),
        pytest.param((0, GI), (1, GI), True, id="from-zero"),
        pytest.param((None, None), (1, 1), True, id="appears"),
        pytest.param((10, 10), (None, None), True, id="withdrawn"),
        pytest.param((None, None), (None, None), False, id="still-absent"),
    ],
)
def test_needs_sync(current: tuple[int | None, int | None], want: tuple[int | None, int | None], changed: bool) -> None:
    assert needs_sync(current, want, diff_threshold=0.1) is changed


@pytest.mark.parametrize(
    ("record", "now", "want"),
    [
        pytest.param(None, 0.0, True, id="no-nodemetric"),
        pytest.param(metric(update_time=None), 0.0, True, id="never-reported"),
        pytest.param(metric(has_node_metric=False), 1000.0, True, id="no-status-nodemetric"),
        pytest.param(metric(update_time=1000.0), 1000.0 + 15 * 60, False, id="exactly-15-minutes"),
        pytest.param(metric(update_time=1000.0), 1000.0 + 16 * 60, True, id="16-minutes-old"),
    ],
)
def test_is_degraded(record: NodeMetricRecord | None, now: float, want: bool) -> None:
    assert is_degraded(record, now, 15) is want
