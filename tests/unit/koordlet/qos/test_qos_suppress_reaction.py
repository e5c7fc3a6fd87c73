"""CPUSuppress reaction time: the quota write follows the collection that shows a load, not a free timer.

Fake clock for the metrics, a temp cgroup tree and /proc, the real ``MetricsAdvisor`` and the plugin's real
``run`` loop. The load starts just before a collection, so the first sample that sees it covers only a
tenth of an interval (the slow case of the benchmark): the quota must still reflect the full load within
two collect intervals of the load appearing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from koordlet_fakes import FakeCgroups, write_proc
from qos_helpers import make_ctx, make_node, pod, threshold_slo

from apis.extension import KubeQOSClass
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import AdvisorOptions, MetricsAdvisor
from koordlet.qosmanager.plugins.cpusuppress.plugin import CPUSuppress
from koordlet.system import CgroupDriver, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock

UID_BE = "11111111-2222-4333-8444-555555555555"
UID_LS = "66666666-7777-4888-9999-aaaaaaaaaaaa"
COLLECT = 1.0
START = 1_700_000_000.0


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_metric_cache_collected_signal_subscribe_and_unsubscribe() -> None:
    cache = MetricCache(clock=FakeClock())
    seen: list[float] = []

    def boom(_t: float) -> None:
        raise RuntimeError("consumer bug")

    unsubscribe = cache.subscribe_collected(seen.append)
    cache.subscribe_collected(boom)
    cache.notify_collected(1.0)  # the raising subscriber does not stop the others (or the collector)
    unsubscribe()
    cache.notify_collected(2.0)
    assert seen == [1.0]


async def test_suppress_quota_written_within_two_collect_intervals_of_the_load(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = fake.fs()
    layout = fs.layout
    be_qos = layout.qos_dir(KubeQOSClass.BEST_EFFORT)
    be_pod = layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_BE)
    ls_pod = layout.pod_dir(KubeQOSClass.BURSTABLE, UID_LS)
    proc = tmp_path / "proc"
    clock = FakeClock(START)
    ctx = make_ctx(fs, clock=clock, args={"cpu_suppress_interval_seconds": COLLECT})
    ctx.states_informer.set_node(make_node(cpu="2"))
    ctx.states_informer.replace_pods([pod("be", UID_BE).be().build(), pod("ls", UID_LS).build()])
    ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota", cpuSuppressThresholdPercent=90))
    advisor = MetricsAdvisor(
        fs,
        ProcFS(proc, clock_ticks=100),
        ctx.metric_cache,
        ctx.states_informer.get_all_pods,
        options=AdvisorOptions(collect_interval_seconds=COLLECT),
        clock=clock,
    )
    load_at = START + 3.9  # 0.1 s before the collection at +4: that sample sees a tenth of the load
    be_cores, ls_cores = 1.0, 1.0

    def write_counters() -> None:
        t = clock() - START
        ls_seconds = max(clock() - load_at, 0.0) * ls_cores
        be_seconds = t * be_cores
        fake.set_usage(be_qos, cpu_ns=int(be_seconds * 1e9))
        fake.set_usage(be_pod, cpu_ns=int(be_seconds * 1e9))
        fake.set_usage(ls_pod, cpu_ns=int(ls_seconds * 1e9))
        write_proc(proc, busy_ticks=int((be_seconds + ls_seconds) * 100), cpus=2)

    def quota() -> int:
        got = fs.cfs_quota(be_qos)
        assert got is not None
        return got[0]

    plugin = CPUSuppress()
    plugin.setup(ctx)
    stop = asyncio.Event()
    task = asyncio.create_task(plugin.run(stop))
    await settle()
    assert plugin.ticks == 1  # the first tick runs at once (nothing collected yet: no decision)
    # BE may use 2 x 90 % minus the rest; the LS load (1 core) leaves it 0.8 core = 80000 us per 100 ms.
    want_loaded = 80_000
    reacted_at: float | None = None
    collections = 0
    try:
        while clock() <= START + 8:
            write_counters()
            advisor.collect_once()
            collections += 1
            await settle()
            # the tick ran on the collected signal: no real time passed, so no timer could have fired
            assert plugin.ticks == collections + 1
            if clock() < load_at:
                assert quota() in (-1, 180_000)
            elif reacted_at is None and abs(quota() - want_loaded) <= 2_000:
                reacted_at = clock()
            clock.advance(COLLECT)
    finally:
        stop.set()
        await task
    assert reacted_at is not None, f"quota never reflected the load (last {quota()})"
    assert reacted_at - load_at <= 2 * COLLECT, reacted_at - load_at
    assert quota() == -1  # stopping recovers


async def test_suppress_ticks_at_most_once_per_interval_when_collections_are_faster(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    clock = FakeClock(START)
    ctx = make_ctx(fake.fs(), clock=clock, args={"cpu_suppress_interval_seconds": 30.0})
    plugin = CPUSuppress()
    plugin.setup(ctx)
    stop = asyncio.Event()
    task = asyncio.create_task(plugin.run(stop))
    await settle()
    for _ in range(4):
        ctx.metric_cache.notify_collected(clock.advance(COLLECT))
        await settle()
    assert plugin.ticks == 2  # start-up tick, first collection; the rest are within the 30 s interval
    ctx.metric_cache.notify_collected(clock.advance(30.0))
    await settle()
    stop.set()
    await task
    assert plugin.ticks == 3
