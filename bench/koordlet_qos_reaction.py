"""QoS strategies: reaction time on real cgroups, and CPU cost with all strategies on and 100 pods.

    .venv/bin/python bench/koordlet_qos_reaction.py            (root, cgroup v1)

1. Reaction: the metrics advisor (real /proc and cgroups, 1 s collect interval) and CPUSuppress (which ticks
   on the metric cache's "collected" signal, at most once per 1 s) run as asyncio tasks, as in the agent.
   A BE pod burns 2 CPUs; at t0 an LS pod in the same test hierarchy starts burning 1 CPU (the load
   suppress reacts to: BE is capped by what non-BE pods leave). We time t0 → the besteffort quota change,
   and compare it with two collect intervals.
2. Cost: every strategy ticks over 100 pods (with containers) on a temp cgroup tree; CPU seconds per tick.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(REPO),
    str(REPO / "tests" / "cgroup"),
    str(REPO / "tests" / "unit" / "koordlet"),
    str(REPO / "tests" / "unit" / "koordlet" / "qos"),
]

from koordlet_fakes import FakeCgroups  # noqa: E402
from koordlet_real_cgroups import BURN, ROOT, real_pods  # noqa: E402
from qos_helpers import make_ctx, make_node, pod, threshold_slo  # noqa: E402

from apis.extension import KubeQOSClass  # noqa: E402
from koordlet.metriccache import MetricKind  # noqa: E402
from koordlet.metricsadvisor import AdvisorOptions, MetricsAdvisor  # noqa: E402
from koordlet.qosmanager.evictor import PodEvictor  # noqa: E402
from koordlet.qosmanager.plugins.cgreconcile.plugin import CgroupReconcile  # noqa: E402
from koordlet.qosmanager.plugins.cpuburst.plugin import CPUBurst  # noqa: E402
from koordlet.qosmanager.plugins.cpuevict.plugin import BECPUEvict, CPUEvict  # noqa: E402
from koordlet.qosmanager.plugins.cpusuppress.plugin import CPUSuppress  # noqa: E402
from koordlet.qosmanager.plugins.memoryevict.plugin import BEMemoryEvict, MemoryEvict  # noqa: E402
from koordlet.system import CgroupDriver, CgroupVersion, ProcFS  # noqa: E402
from koordlet.system.clock import FakeClock  # noqa: E402

UID_BE = "0b0b0b0b-1111-4222-8333-444444444444"
UID_LS = "0c0c0c0c-1111-4222-8333-444444444444"
COLLECT = 1.0


async def reaction_once() -> float:
    with real_pods() as pods:
        fs = pods.cgroupfs()
        (ROOT / "cpu" / pods.base).mkdir(exist_ok=True)
        be_qos = fs.layout.qos_dir(KubeQOSClass.BEST_EFFORT)
        be_pod = fs.layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_BE)
        ls_pod = fs.layout.pod_dir(KubeQOSClass.BURSTABLE, UID_LS)
        pods.make(be_pod)
        pods.make(ls_pod)
        (ROOT / "cpu" / pods.base / "cpu.shares").write_text("262144")
        for _ in range(2):
            pods.spawn(be_pod, BURN)
        ctx = make_ctx(fs, clock=time.time)
        ctx.states_informer.set_node(make_node(cpu="2"))
        ctx.states_informer.replace_pods([pod("be", UID_BE).be().build(), pod("ls", UID_LS).build()])
        ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota", cpuSuppressThresholdPercent=90))
        advisor = MetricsAdvisor(
            fs,
            ProcFS(),
            ctx.metric_cache,
            ctx.states_informer.get_all_pods,
            options=AdvisorOptions(collect_interval_seconds=COLLECT),
        )
        plugin = CPUSuppress()
        plugin.setup(ctx)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(advisor.run(stop)), asyncio.create_task(plugin.run(stop))]
        await asyncio.sleep(4)  # settle: BE gets 2 x 90 % minus the rest
        before = fs.cfs_quota(be_qos)
        t0 = time.monotonic()
        pods.spawn(ls_pod, BURN)
        reaction = float("nan")
        while time.monotonic() - t0 < 6:
            now_quota = fs.cfs_quota(be_qos)
            if before is not None and now_quota is not None and now_quota[0] < before[0] - 20000:
                reaction = time.monotonic() - t0
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*tasks)
        return reaction


def cost(pods_n: int = 100, ticks: int = 50) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeCgroups(Path(tmp), CgroupVersion.V1, CgroupDriver.CGROUPFS)
        fs = fake.fs()
        clock = FakeClock()
        ctx = make_ctx(
            fs,
            clock=clock,
            evictor=PodEvictor(None, node_name="node-1", clock=clock, dry_run=True),
            args={"sysfs_root": Path(tmp) / "sys"},
        )
        raws = []
        for i in range(pods_n):
            uid = f"{i:08d}-0000-4000-8000-000000000000"
            b = pod(f"p{i}", uid)
            if i % 2:
                b = (
                    b.be()
                    .priority(5000)
                    .container(
                        "c",
                        f"containerd://c{i:06d}",
                        requests={"kubernetes.io/batch-cpu": "500"},
                        limits={"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"},
                    )
                )
            else:
                b = b.priority(9000).container(
                    "c", f"containerd://c{i:06d}", requests={"cpu": "500m"}, limits={"cpu": "1"}
                )
            raws.append(b.build())
        for layout_dir in ("kubepods", "kubepods/besteffort", "kubepods/burstable"):
            fake.set_usage(layout_dir)
        ctx.states_informer.replace_pods(raws)
        for meta in ctx.states_informer.get_all_pods():
            fake.set_usage(meta.cgroup_dir)
            for c in meta.containers:
                rel = meta.container_dir(fs.layout, c)
                if rel:
                    fake.set_usage(rel)
        ctx.states_informer.set_node(make_node(cpu="64", memory="256Gi"))
        ctx.states_informer.set_node_slo(
            {
                "spec": {
                    "resourceUsedThresholdWithBE": {
                        "enable": True,
                        "cpuSuppressPolicy": "cfsQuota",
                        "cpuEvictBESatisfactionLowerPercent": 40,
                        "cpuEvictBESatisfactionUpperPercent": 60,
                        "cpuEvictThresholdPercent": 90,
                        "evictEnabledPriorityThreshold": 5999,
                    },
                    "cpuBurstStrategy": {"policy": "auto"},
                }
            }
        )
        plugins = [
            CPUSuppress(),
            CPUBurst(),
            CgroupReconcile(),
            BEMemoryEvict(),
            MemoryEvict(),
            BECPUEvict(),
            CPUEvict(),
        ]
        for p in plugins:
            p.setup(ctx)
        per_plugin = {type(p).__name__: 0.0 for p in plugins}
        for _ in range(ticks):
            clock.advance(1)
            now = clock()
            ctx.metric_cache.append(MetricKind.NODE_CPU_USAGE, "", now, 20.0)
            ctx.metric_cache.append(MetricKind.NODE_MEMORY_USAGE, "", now, 100 * 2**30)
            for meta in ctx.states_informer.get_all_pods():
                ctx.metric_cache.append(MetricKind.POD_CPU_USAGE, meta.uid, now, 0.3)
                ctx.metric_cache.append(MetricKind.POD_MEMORY_USAGE, meta.uid, now, 2**30)
            for p in plugins:
                t = time.process_time()
                p.tick()
                per_plugin[type(p).__name__] += time.process_time() - t
        total = sum(per_plugin.values()) / ticks
        return {
            "cpu_ms_per_tick_all_strategies": total * 1000,
            **{f"{k}_ms": v / ticks * 1000 for k, v in per_plugin.items()},
            "cpu_percent_of_one_core_at_1s": total * 100,
        }


def main() -> None:
    reactions = [asyncio.run(reaction_once()) for _ in range(3)]
    result = {
        "reaction_seconds": reactions,
        "reaction_median_seconds": statistics.median(reactions),
        "budget_seconds": 2 * COLLECT,
        "cost_100_pods": cost(),
    }
    print(json.dumps(result, indent=2))
    out = REPO / "bench" / "results" / "koordlet_qos_reaction.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
