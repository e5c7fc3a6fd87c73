"""Eviction decisions: the pure plan (``plan_victims``), the allocatable strategies' need and victims, and
the executor carrying out the plan (re-planning around a PodDisruptionBudget refusal)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import ScriptedEvictionAPI, make_ctx, make_node, pod, threshold_slo, uid_for

from apis.slo.nodeslo import ResourceThresholdStrategy
from koordlet.metriccache import MetricKind
from koordlet.qosmanager.evictor import PodEvictor
from koordlet.qosmanager.plugins.allocatable import (
    AllocatableEvictConfig,
    allocatable_evict_config,
    allocatable_evict_plan,
    allocatable_release,
)
from koordlet.qosmanager.plugins.cpuevict import plugin as cpuevict
from koordlet.qosmanager.plugins.cpuevict.policy import be_allocatable_milli
from koordlet.qosmanager.plugins.eviction import Candidate, plan_victims
from koordlet.qosmanager.plugins.memoryevict import plugin as memoryevict
from koordlet.statesinformer import PodMeta, parse_pod
from koordlet.system import CgroupDriver, CgroupLayout, CgroupVersion
from koordlet.system.clock import FakeClock

GiB = 1 << 30
BATCH_CPU, BATCH_MEM, MID_CPU = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory", "kubernetes.io/mid-cpu"
LAYOUT = CgroupLayout.for_driver(CgroupDriver.CGROUPFS)


def c(uid: str, release: float, resource: str = "") -> Candidate:
    return Candidate(uid=uid, name=f"default/{uid}", priority=None, used=None, release=release, resource=resource)


@pytest.mark.parametrize(
    ("need", "pending", "excluded", "want_victims", "want_pending", "want_outstanding"),
    [
        pytest.param(5.0, (), (), ["a", "b"], [], {}, id="stop-once-covered"),
        pytest.param(5.0, ("a",), (), ["b"], ["a"], {}, id="pending-counts-not-evicted-again"),
        pytest.param(5.0, (), ("a",), ["b", "c"], [], {}, id="pdb-refused-passed-over"),
        pytest.param(50.0, (), (), ["a", "b", "c"], [], {"": 41.0}, id="shortfall-outstanding"),
        pytest.param(0.0, (), (), [], [], {}, id="nothing-needed"),
    ],
)
def test_plan_victims_single_need(  # noqa: PLR0917
    need: float,
    pending: tuple[str, ...],
    excluded: tuple[str, ...],
    want_victims: list[str],
    want_pending: list[str],
    want_outstanding: dict[str, float],
) -> None:
    plan = plan_victims([c("a", 3), c("b", 3), c("c", 3)], need, pending=pending, excluded=excluded)
    assert ([v.uid for v in plan.victims], [v.uid for v in plan.pending], dict(plan.outstanding)) == (
        want_victims,
        want_pending,
        want_outstanding,
    )


def test_plan_victims_per_resource_skips_pods_that_cannot_help() -> None:
    ordered = [c("mid-1", 500, MID_CPU), c("batch-1", 1000, BATCH_CPU), c("batch-2", 1000, BATCH_CPU)]
    plan = plan_victims(ordered, {BATCH_CPU: 1500})
    assert [v.uid for v in plan.victims] == ["batch-1", "batch-2"] and plan.outstanding == {}


@pytest.mark.parametrize(
    ("requested", "allocatable", "want"),
    [
        pytest.param({BATCH_CPU: 12000}, {BATCH_CPU: 10000}, {BATCH_CPU: 2000.0}, id="120pct-over-110-release-to-100"),
        pytest.param({BATCH_CPU: 10500}, {BATCH_CPU: 10000}, {}, id="105pct-under-110"),
        pytest.param({BATCH_CPU: 11000}, {BATCH_CPU: 10000}, {}, id="exactly-110-not-over"),
        pytest.param({BATCH_CPU: 3000}, {}, {BATCH_CPU: 3000.0}, id="no-allocatable-release-all"),
        pytest.param({BATCH_CPU: 3000}, {BATCH_CPU: 0}, {BATCH_CPU: 3000.0}, id="zero-allocatable-release-all"),
        pytest.param({BATCH_MEM: 9 * GiB}, {BATCH_MEM: 8 * GiB}, {}, id="112pct-memory-under-threshold-120"),
    ],
)
def test_allocatable_release(requested: dict[str, float], allocatable: dict[str, int], want: dict[str, float]) -> None:
    threshold = 120 if BATCH_MEM in requested else 110
    assert allocatable_release(requested, allocatable, AllocatableEvictConfig(threshold, 100, 7999)) == want


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        pytest.param({}, None, id="no-fields-no-defaults"),
        pytest.param(
            {"cpuAllocatableEvictThresholdPercent": 110, "cpuAllocatableEvictLowerPercent": 100,
             "allocatableEvictPriorityThreshold": 5999},
            AllocatableEvictConfig(110, 100, 5999),
            id="valid",
        ),
        pytest.param(
            {"cpuAllocatableEvictThresholdPercent": 110, "cpuAllocatableEvictLowerPercent": 110,
             "allocatableEvictPriorityThreshold": 5999},
            None,
            id="lower-not-below-threshold",
        ),
        pytest.param(
            {"cpuAllocatableEvictThresholdPercent": 110, "cpuAllocatableEvictLowerPercent": 100,
             "allocatableEvictPriorityThreshold": 9000},
            None,
            id="prod-priority-refused",
        ),
        pytest.param(
            {"enable": False, "cpuAllocatableEvictThresholdPercent": 110, "cpuAllocatableEvictLowerPercent": 100,
             "allocatableEvictPriorityThreshold": 5999},
            None,
            id="nodeslo-switch-off",
        ),
    ],
)  # fmt: skip
def test_allocatable_evict_config(fields: dict[str, object], want: AllocatableEvictConfig | None) -> None:
    slo = ResourceThresholdStrategy.model_validate({"enable": True, **fields})
    assert allocatable_evict_config(slo, "cpu") == want


def _batch_pod(name: str, n: int, cpu: int, *, prio: int = 5000, opted: bool = True, **ann: str) -> PodMeta:
    b = pod(name, uid_for(n)).be().priority(prio).container("main", requests={BATCH_CPU: str(cpu)})
    if opted:
        b.label("koordinator.sh/eviction-enabled", "true")
    for key, value in ann.items():
        b.annotation(key.replace("_", "-").replace("koordinator-sh-", "koordinator.sh/"), value)
    return parse_pod(b.build(), LAYOUT)


def test_cpu_allocatable_plan_need_and_victim_order() -> None:
    pods = (
        (_batch_pod("big", 1, 4000), 100.0),
        (_batch_pod("small", 2, 1000), 100.0),
        (_batch_pod("low-prio", 3, 2000, prio=5100), 100.0),
        (_batch_pod("not-opted", 4, 5000, opted=False), 100.0),  # counts toward the sum, never a victim
        (_batch_pod("no-metric", 5, 3000), None),
    )
    cfg = AllocatableEvictConfig(110, 100, 5999)
    plan = allocatable_evict_plan(pods, {BATCH_CPU: 12000}, cfg, resource="cpu", gate="CPUAllocatableEvict")
    assert plan is not None
    assert plan.need == {BATCH_CPU: 15000 - 12000}  # 15000 / 12000 = 125 % > 110 %
    assert [v.name for v in plan.ordered] == ["default/big", "default/small", "default/low-prio"]
    assert [v.name for v in plan_victims(plan.ordered, plan.need).victims] == ["default/big"]


def test_be_allocatable_limit() -> None:
    assert be_allocatable_milli({BATCH_CPU: 0}) == 1.0
    assert be_allocatable_milli({BATCH_CPU: 2500}) == 2500.0
    assert be_allocatable_milli({}) is None and be_allocatable_milli(None) is None


# -- the executor carries out the plan ---------------------------------------------------------------


def _alloc_ctx(tmp_path: Path, api: ScriptedEvictionAPI, clock: FakeClock, pods: list[dict[str, object]]) -> object:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx = make_ctx(fake.fs(), clock=clock, evictor=PodEvictor(api, node_name="node-1", clock=clock))
    ctx.states_informer.set_node(make_node(cpu="16", allocatable={BATCH_CPU: "8k", BATCH_MEM: "16Gi"}))
    ctx.states_informer.replace_pods(pods)
    ctx.states_informer.set_node_slo(
        threshold_slo(
            cpuAllocatableEvictThresholdPercent=110,
            cpuAllocatableEvictLowerPercent=100,
            memoryAllocatableEvictThresholdPercent=110,
            memoryAllocatableEvictLowerPercent=100,
            allocatableEvictPriorityThreshold=5999,
        )
    )
    return ctx


def tick_with_usage(plugin: object, ctx: object, clock: FakeClock) -> None:
    """Fresh usage samples for every pod (victims need a recent sample), then one tick."""
    for meta in ctx.states_informer.get_all_pods():  # type: ignore[attr-defined]
        ctx.metric_cache.append(MetricKind.POD_CPU_USAGE, meta.uid, clock(), 0.5)  # type: ignore[attr-defined]
        ctx.metric_cache.append(MetricKind.POD_MEMORY_USAGE, meta.uid, clock(), 1.0 * GiB)  # type: ignore[attr-defined]
    plugin.tick()  # type: ignore[attr-defined]


def _opted(name: str, n: int, cpu: str, memory: str = "1Gi", prio: int = 5000) -> dict[str, object]:
    return (
        pod(name, uid_for(n))
        .be()
        .priority(prio)
        .label("koordinator.sh/eviction-enabled", "true")
        .container("main", f"containerd://{n:04d}", requests={BATCH_CPU: cpu, BATCH_MEM: memory})
        .build()
    )


def test_cpu_allocatable_evict_replans_around_a_pdb(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    api = ScriptedEvictionAPI({"guarded": 429})
    pods = [_opted("guarded", 1, "4000"), _opted("second", 2, "3000"), _opted("third", 3, "2000", prio=5100)]
    ctx = _alloc_ctx(tmp_path, api, clock, pods)  # requested 9000 of 8000 = 112.5 % > 110 %: release 1000
    plugin = cpuevict.CPUAllocatableEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    clock.advance(21)  # CPU eviction cools down from start-up (20 s)
    tick_with_usage(plugin, ctx, clock)
    assert api.evicted == ["guarded", "second"]  # the PDB refuses the first choice; the plan moves on
    assert [(e[0], e[1], e[2]) for e in api.events] == [
        ("guarded", "evictPodFail", "Warning"),
        ("second", "evictPodSuccess", "Warning"),
    ]
    assert api.events[1][3].startswith(
        "evict Pod:default/second, reason: trigger by koordlet feature CPUAllocatableEvict, message: "
    )
    clock.advance(21)
    caplog.set_level(logging.INFO)
    tick_with_usage(
        plugin, ctx, clock
    )  # "second" is still listed (terminating): pending; "guarded" is tried again, nobody else
    assert api.evicted == ["guarded", "second", "guarded"]


def test_memory_allocatable_evict_by_batch_memory(tmp_path: Path) -> None:
    clock = FakeClock()
    api = ScriptedEvictionAPI()
    pods = [_opted("a", 1, "100", "10Gi"), _opted("b", 2, "100", "8Gi"), _opted("mid", 3, "100", "1Gi", prio=7100)]
    ctx = _alloc_ctx(tmp_path, api, clock, pods)  # batch-memory 18Gi of 16Gi = 112.5 %: release 2Gi
    plugin = memoryevict.MemoryAllocatableEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    tick_with_usage(plugin, ctx, clock)
    assert api.evicted == ["a"]  # largest request first at equal priority


def test_evictor_gone_pod_is_remembered_not_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    api = ScriptedEvictionAPI({"gone": 404})
    ctx = _alloc_ctx(tmp_path, api, clock, [_opted("gone", 1, "9000")])
    plugin = cpuevict.CPUAllocatableEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO)
    for _ in range(3):
        clock.advance(21)
        tick_with_usage(plugin, ctx, clock)
    assert api.evicted == ["gone"] and api.events == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING and "gone" in r.getMessage()] == []


def test_be_victims_are_labelled_be_only() -> None:
    """Koordinator picks BE victims by the raw ``koordinator.sh/qosClass`` label: a BestEffort pod without it
    is not a BEMemoryEvict victim, and the evictor refuses it for a BE gate."""
    from koordlet.qosmanager.evictor import EvictionOutcome
    from koordlet.qosmanager.plugins.memoryevict.policy import MemoryEvictConfig, MemorySnapshot, be_memory_evict_plan

    labelled = parse_pod(pod("labelled", uid_for(1)).be().priority(5000).build(), LAYOUT)
    unlabelled = parse_pod(pod("kube-besteffort", uid_for(2)).qos("BestEffort").priority(5000).build(), LAYOUT)
    plan = be_memory_evict_plan(
        MemorySnapshot(100 * GiB, 80 * GiB, ((labelled, 1 * GiB), (unlabelled, 9 * GiB))), MemoryEvictConfig(70, 68)
    )
    assert plan is not None and [c.name for c in plan.ordered] == ["default/labelled"]
    evictor = PodEvictor(ScriptedEvictionAPI(), node_name="n", clock=FakeClock())
    assert evictor.evict(unlabelled, "BEMemoryEvict", "x") is EvictionOutcome.NOT_ALLOWED
