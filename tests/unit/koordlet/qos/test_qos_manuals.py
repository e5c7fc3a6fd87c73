"""Koordinator's user manuals (koordinator.sh docs/user-manuals: memory-evict, cpu-evict, cpu-burst), their
ConfigMap values as koord-manager renders them into the NodeSLO, and the node-side behaviour they describe."""

from __future__ import annotations

from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import ScriptedEvictionAPI, make_ctx, make_node, pod, uid_for

from koordlet.metriccache import MetricKind
from koordlet.qosmanager.evictor import PodEvictor
from koordlet.qosmanager.plugins.cpuburst import plugin as cpuburst
from koordlet.qosmanager.plugins.cpuevict import plugin as cpuevict
from koordlet.qosmanager.plugins.memoryevict import plugin as memoryevict
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

GiB = 1 << 30
BE_USAGE, BE_REQUEST, BE_REAL_LIMIT = "cpu/usage", "cpu/request", "cpu/real-limit"


def nodeslo(threshold: dict[str, object]) -> dict[str, object]:
    """The NodeSLO koord-manager renders from ``resource-threshold-config: {"clusterStrategy": threshold}``."""
    return {"spec": {"resourceUsedThresholdWithBE": threshold}}


# -- memory-evict: {"clusterStrategy": {"enable": true, "memoryEvictThresholdPercent": 70}} -------------


def _memory_ctx(tmp_path: Path, api: ScriptedEvictionAPI, clock: FakeClock) -> object:
    ctx = make_ctx(
        FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS).fs(),
        clock=clock,
        evictor=PodEvictor(api, node_name="node-1", clock=clock),
    )
    ctx.states_informer.set_node(make_node(memory="16Gi"))
    ctx.states_informer.replace_pods(
        [
            pod("be-pod-demo", uid_for(1)).be().priority(5000).build(),  # priorityClassName: koord-batch
            pod("be-pod-greedy", uid_for(2)).be().priority(5000).build(),
            pod("be-pod-higher", uid_for(3)).be().priority(5900).build(),
            pod("ls-pod", uid_for(4)).qos("Burstable", "LS").priority(9000).build(),
        ]
    )
    ctx.states_informer.set_node_slo(nodeslo({"enable": True, "memoryEvictThresholdPercent": 70}))
    return ctx


def _feed_memory(ctx: object, clock: FakeClock, node_gib: float) -> None:
    cache = ctx.metric_cache  # type: ignore[attr-defined]
    cache.append(MetricKind.NODE_MEMORY_USAGE, "", clock(), node_gib * GiB)
    for n, gib in ((1, 1.0), (2, 2.0), (3, 3.0), (4, 6.0)):
        cache.append(MetricKind.POD_MEMORY_USAGE, uid_for(n), clock(), gib * GiB)


def test_memory_evict_manual_below_threshold_nothing(tmp_path: Path) -> None:
    clock, api = FakeClock(), ScriptedEvictionAPI()
    ctx = _memory_ctx(tmp_path, api, clock)
    plugin = memoryevict.BEMemoryEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    _feed_memory(ctx, clock, 11.0)  # 68 % of 16 GiB
    plugin.tick()
    assert api.evicted == []


def test_memory_evict_manual_evicts_lower_priority_then_larger_until_below(tmp_path: Path) -> None:
    """At 12.5 GiB of 16 GiB (78 %): release 16 GiB x (78 - 68) % = 1.6 GiB. Lower priority first, and at
    the same priority the pod using more memory: be-pod-greedy (2 GiB) covers it. Never the LS pod."""
    clock, api = FakeClock(), ScriptedEvictionAPI()
    ctx = _memory_ctx(tmp_path, api, clock)
    plugin = memoryevict.BEMemoryEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    _feed_memory(ctx, clock, 12.5)
    plugin.tick()
    assert api.evicted == ["be-pod-greedy"]
    name, reason, event_type, message = api.events[0]
    assert (name, reason, event_type) == ("be-pod-greedy", "evictPodSuccess", "Warning")
    assert message.startswith("evict Pod:default/be-pod-greedy, reason: trigger by koordlet feature BEMemoryEvict")
    clock.advance(5)  # after the 4 s cool-down, usage still high (the pod is terminating): pending, no new victim
    _feed_memory(ctx, clock, 12.5)
    plugin.tick()
    assert api.evicted == ["be-pod-greedy"]
    _feed_memory(ctx, clock, 15.0)  # 93 %: release 4 GiB = greedy 2 (pending) + demo 1 + higher 3
    plugin.tick()
    assert api.evicted == ["be-pod-greedy", "be-pod-demo", "be-pod-higher"]


# -- cpu-evict: lower 60, upper 80, usage 90, window 60 s ----------------------------------------------

CPU_EVICT = {
    "enable": True,
    "cpuEvictBESatisfactionLowerPercent": 60,
    "cpuEvictBESatisfactionUpperPercent": 80,
    "cpuEvictBEUsageThresholdPercent": 90,
    "cpuEvictTimeWindowSeconds": 60,
}


def _cpu_ctx(tmp_path: Path, api: ScriptedEvictionAPI, clock: FakeClock, **extra: object) -> object:
    ctx = make_ctx(
        FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS).fs(),
        clock=clock,
        evictor=PodEvictor(api, node_name="node-1", clock=clock),
    )
    ctx.states_informer.set_node(make_node(cpu="8", allocatable={"kubernetes.io/batch-cpu": "2k"}))
    batch = {"kubernetes.io/batch-cpu": "2000"}
    ctx.states_informer.replace_pods(
        [
            pod("be-pod-demo", uid_for(1)).be().priority(5000).container("stress", requests=batch).build(),
            pod("be-pod-busy", uid_for(2)).be().priority(5000).container("stress", requests=batch).build(),
        ]
    )
    ctx.states_informer.set_node_slo(nodeslo({**CPU_EVICT, **extra}))
    return ctx


def _feed_be(ctx: object, clock: FakeClock, *, usage: float, limit: float, seconds: int = 60) -> None:
    """``seconds`` of 1 s BE samples: request 4000m (two pods x 2000m), the given usage and real limit."""
    cache = ctx.metric_cache  # type: ignore[attr-defined]
    for t in range(seconds):
        now = clock() - seconds + 1 + t
        cache.append(MetricKind.NODE_BE, BE_REQUEST, now, 4000.0)
        cache.append(MetricKind.NODE_BE, BE_USAGE, now, usage)
        cache.append(MetricKind.NODE_BE, BE_REAL_LIMIT, now, limit)
    cache.append(MetricKind.POD_CPU_USAGE, uid_for(1), clock(), 0.5)
    cache.append(MetricKind.POD_CPU_USAGE, uid_for(2), clock(), 1.4)


@pytest.mark.parametrize(
    ("usage", "limit", "policy", "want"),
    [
        pytest.param(1900.0, 2000.0, {}, ["be-pod-busy"], id="satisfaction-50pct-usage-95pct-evicts-busiest"),
        pytest.param(1500.0, 2000.0, {}, [], id="usage-75pct-under-90-no-eviction"),
        pytest.param(3300.0, 3500.0, {}, [], id="satisfaction-87pct-over-lower-60"),
        pytest.param(
            1900.0, 8000.0, {"cpuEvictPolicy": "evictByAllocatable"}, ["be-pod-busy"], id="by-allocatable-2000m"
        ),
    ],
)
def test_cpu_evict_manual(
    tmp_path: Path, usage: float, limit: float, policy: dict[str, object], want: list[str]
) -> None:
    """Release = request x (upper - satisfaction) = 4000 x (0.8 - 0.5) = 1200m: the pod with the highest
    usage/request (be-pod-busy, 1400/2000) goes first and its 2000m request covers it."""
    clock, api = FakeClock(), ScriptedEvictionAPI()
    ctx = _cpu_ctx(tmp_path, api, clock, **policy)
    plugin = cpuevict.BECPUEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    clock.advance(61)
    _feed_be(ctx, clock, usage=usage, limit=limit)
    plugin.tick()
    assert api.evicted == want


def test_cpu_evict_by_allocatable_without_batch_cpu_on_node_does_nothing(tmp_path: Path) -> None:
    clock, api = FakeClock(), ScriptedEvictionAPI()
    ctx = _cpu_ctx(tmp_path, api, clock, cpuEvictPolicy="evictByAllocatable")
    ctx.states_informer.set_node(make_node(cpu="8"))  # type: ignore[attr-defined]
    plugin = cpuevict.BECPUEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    clock.advance(61)
    _feed_be(ctx, clock, usage=1900.0, limit=2000.0)
    plugin.tick()
    assert api.evicted == []


# -- cpu-burst: koordinator.sh/cpuBurst annotation and cpu-burst-config --------------------------------


def _burst(tmp_path: Path, node_policy: str, pods: list[dict[str, object]]) -> tuple[FakeCgroups, object, object]:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = fake.fs()
    clock = FakeClock()
    ctx = make_ctx(fs, clock=clock)
    ctx.states_informer.set_node(make_node(cpu="8"))
    ctx.states_informer.replace_pods(pods)
    ctx.states_informer.set_node_slo({"spec": {"cpuBurstStrategy": {"policy": node_policy}}})
    for meta in ctx.states_informer.get_all_pods():
        for rel in [meta.cgroup_dir] + [d for c in meta.containers if (d := meta.container_dir(fs.layout, c))]:
            fake.set_usage(rel)
            (fake.root / "cpu" / rel / "cpu.cfs_quota_us").write_text("100000")
            (fake.root / "cpu" / rel / "cpu.cfs_burst_us").write_text("0")
    plugin = cpuburst.CPUBurst()
    plugin.setup(ctx)
    return fake, ctx, plugin


def _burst_of(fake: FakeCgroups, ctx: object, name: str) -> str:
    meta = next(p for p in ctx.states_informer.get_all_pods() if p.name == name)  # type: ignore[attr-defined]
    rel = meta.container_dir(fake.fs().layout, meta.containers[0])
    assert rel is not None
    return (fake.root / "cpu" / rel / "cpu.cfs_burst_us").read_text().strip()


def _limited(name: str, n: int, kube_qos: str, label: str | None = None, annotation: str | None = None) -> object:
    b = pod(name, uid_for(n)).qos(kube_qos, label).container("c", f"containerd://{n:04d}", limits={"cpu": "1"})
    if annotation is not None:
        b.annotation("koordinator.sh/cpuBurst", annotation)
    return b.build()


@pytest.mark.parametrize(
    ("node_policy", "pod_args", "want"),
    [
        pytest.param("none", ("Burstable", "LS", '{"policy": "auto"}'), "1000000", id="annotation-auto-enables"),
        pytest.param("auto", ("Burstable", "LS", '{"policy": "none"}'), "0", id="annotation-none-disables"),
        pytest.param("cpuBurstOnly", ("Burstable", "LS", None), "1000000", id="configmap-cpuBurstOnly"),
        pytest.param(
            "none", ("Burstable", None, '{"policy": "cpuBurstOnly", "cpuBurstPercent": 200}'), "200000", id="pct"
        ),
        pytest.param("auto", ("Guaranteed", None, None), "1000000", id="unlabelled-guaranteed-is-burstable"),
        pytest.param("auto", ("Guaranteed", "LSR", None), "0", id="lsr-label-not-burstable"),
        pytest.param("auto", ("Burstable", "BE", None), "0", id="be-label-not-burstable"),
        pytest.param("auto", ("Burstable", "LS", "{bad"), "1000000", id="bad-annotation-node-config-applies"),
    ],
)
def test_cpu_burst_manual(
    tmp_path: Path, node_policy: str, pod_args: tuple[str, str | None, str | None], want: str
) -> None:
    """cfs_burst_us = limit (1 core) x cpuBurstPercent (1000 %) x period (100000 us)."""
    fake, ctx, plugin = _burst(tmp_path, node_policy, [_limited("web", 1, *pod_args)])  # type: ignore[list-item]
    plugin.tick()  # type: ignore[attr-defined]
    assert _burst_of(fake, ctx, "web") == want


def test_no_repeated_log_lines_after_an_eviction(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The evicted pod stays listed while it terminates and the pressure lasts: later ticks count it as
    pending and log nothing more (one line for the eviction itself)."""
    import logging

    clock, api = FakeClock(), ScriptedEvictionAPI()
    ctx = _memory_ctx(tmp_path, api, clock)
    plugin = memoryevict.BEMemoryEvict()
    plugin.setup(ctx)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO)
    for _ in range(10):
        _feed_memory(ctx, clock, 12.5)
        plugin.tick()
        clock.advance(5)
    assert api.evicted == ["be-pod-greedy"]
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.levelno >= logging.INFO] == [
        "evict default/be-pod-greedy (" + uid_for(2) + ") for BEMemoryEvict"
    ]
