"""CPICollector, ColdPageCollector and HugePageReport: what each collects, where it goes (metric cache,
gauges, NodeMetric, NodeResourceTopology), and that each runs only with its gate.

``koord:`` cases are transcribed from Koordinator v1.8.0 ``pkg/koordlet/util/system/kidled_util_test.go``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups, make_raw_pod, write_proc
from prometheus_client import CollectorRegistry

from apis.slo import format_binary, resolve_collect_policy
from apis.slo.nodemetric import NodeMetricSpec
from koordlet.app.collectors import CollectorDeps, gated_collectors
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor import CacheUsageSource
from koordlet.metricsadvisor.coldpage import ColdPageCollector
from koordlet.metricsadvisor.cpi import CYCLES, INSTRUCTIONS, CPICollector
from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.statesinformer.nodetopology import topology_zones
from koordlet.system import CgroupDriver, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock
from koordlet.system.cputopology import CPUTopology, LogicalCPU, NUMANode
from koordlet.system.hugepages import read_numa_hugepages
from koordlet.system.kidled import IdlePageStatsError, Kidled, cold_page_bytes, parse_idle_page_stats

UID = "66666666-7777-4888-9999-aaaaaaaaaaaa"
GiB = 1 << 30

IDLE_STATS = """# version: 1.0
# page_scans: 24
# slab_scans: 0
# scan_period_in_seconds: 120
# use_hierarchy: 1
# buckets: 1,2,5,15,30,60,120,240
#
# ||||| [1,2) [2,5) [5,15) [15,30) [30,60) [60,120) [120,240) [240,+inf)
  csei 2613248 4657152 18182144 293683200 0 0 0 0
  dsei 2568192 5140480 15306752 48648192 52834304 52834304 0 0
  cfei 2633728 4640768 66531328 340172800 52834304 52834304 0 0
  dfei 0 0 4096 0 0 0 0 0
  csui 0 0 0 0 0 0 0 0
  dsui 0 0 0 0 0 0 0 0
  cfui 0 0 0 0 0 0 0 0
  dfui 0 0 0 0 0 0 0 0
  slab 0 0 0 0 0 0 0 0
"""


def test_cold_page_bytes_from_idle_page_stats() -> None:
    """koord: Test_GetColdPageTotalBytes (cfei, dfei, cfui, dfui from bucket 5 on)."""
    assert cold_page_bytes(parse_idle_page_stats(IDLE_STATS)) == 52834304


@pytest.mark.parametrize("text", ["", "  cfei 1 2 x\n", "# version: 1.0\n  csei 1 2\n"])
def test_malformed_idle_page_stats(text: str) -> None:
    with pytest.raises(IdlePageStatsError):
        parse_idle_page_stats(text)


def _cold_tree(tmp_path: Path) -> tuple[FakeCgroups, StatesInformer, str]:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    layout = fake.fs().layout
    raw = make_raw_pod("p", UID, containers=[("c1", "containerd://c1")])
    informer = StatesInformer("n1", layout)
    informer.replace_pods([raw])
    pod = informer.get_all_pods()[0]
    container = pod.container_dir(layout, pod.containers[0])
    assert container is not None
    for rel in ("", pod.cgroup_dir, container):
        fake.make_dir(rel)
        (fake.root / "memory" / rel / "memory.idle_page_stats").write_text(IDLE_STATS)
    fake.set_usage(pod.cgroup_dir, mem_anon=100 << 20, mem_file=200 << 20)
    fake.set_usage(container, mem_anon=100 << 20, mem_file=200 << 20)
    return fake, informer, container


def test_cold_page_collector_feeds_the_node_metric_under_usage_with_hot_page_cache(tmp_path: Path) -> None:
    fake, informer, _ = _cold_tree(tmp_path)
    write_proc(tmp_path / "proc", busy_ticks=0, mem_total_kb=8 << 20, mem_available_kb=6 << 20)
    clock = FakeClock()
    cache = MetricCache(clock=clock)
    sysfs = tmp_path / "sys"
    (sysfs / "kernel/mm/kidled").mkdir(parents=True)
    for name in ("scan_period_in_seconds", "use_hierarchy"):
        (sysfs / "kernel/mm/kidled" / name).write_text("0")
    collector = ColdPageCollector(
        fake.fs(), ProcFS(tmp_path / "proc"), cache, informer.get_all_pods, kidled=Kidled(sysfs), clock=clock
    )
    collector.kidled.start()
    assert (sysfs / "kernel/mm/kidled/scan_period_in_seconds").read_text() == "5"
    assert collector.collect_once() == 3  # node, pod, container
    cold = 52834304
    node_hot = (8 << 30) - 1000 * 1024 - cold  # MemTotal - MemFree - cold (write_proc's MemFree is 1000 kB)
    pod_hot = (300 << 20) - 0 - cold  # usage with page cache - cold
    assert cache.last(MetricKind.NODE_COLD_PAGE_SIZE, "", 10) == cold
    assert cache.last(MetricKind.NODE_MEMORY_WITH_HOT_PAGE, "", 10) == node_hot
    assert cache.last(MetricKind.POD_MEMORY_WITH_HOT_PAGE, UID, 10) == max(pod_hot, 0)
    assert cache.last(MetricKind.CONTAINER_COLD_PAGE_SIZE, "c1", 10) == cold
    cache.append(MetricKind.NODE_MEMORY_USAGE, "", clock(), 1.0)  # the default memory, different on purpose
    policy = resolve_collect_policy(
        NodeMetricSpec.model_validate({"metricCollectPolicy": {"nodeMemoryCollectPolicy": "usageWithHotPageCache"}})
    )
    status = build_node_metric_status(CacheUsageSource(cache), informer.get_all_pods(), policy, clock() + 1)
    assert status.node_metric is not None and status.node_metric.node_usage is not None
    assert (status.node_metric.node_usage.resources or {}).get("memory") == format_binary(node_hot)


def test_hot_page_policy_falls_back_to_memory_without_the_collector() -> None:
    clock = FakeClock()
    cache = MetricCache(clock=clock)
    cache.append(MetricKind.NODE_MEMORY_USAGE, "", clock(), 4096.0)
    assert CacheUsageSource(cache).node_usage("memoryWithHotPage", clock() - 10, clock() + 1) is not None


class FakeCounters:
    def __init__(self, values: dict[tuple[int, int], float]) -> None:
        self.values = values
        self.started = self.closed = False

    def start(self) -> None:
        self.started = True

    def read(self) -> dict[tuple[int, int], float]:
        return self.values

    def close(self) -> None:
        self.closed = True


async def test_cpi_collector_counts_each_container_and_closes_its_counters(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    informer = StatesInformer("n1", fake.fs().layout)
    informer.replace_pods(
        [
            make_raw_pod("p", UID, containers=[("c1", "containerd://aaa"), ("c2", "containerd://gone")]),
        ]
    )
    opened: dict[str, FakeCounters] = {}
    seen_cpus: list[Sequence[int]] = []

    def opener(cgroup_dir: Path, cpus: Sequence[int]) -> FakeCounters:
        seen_cpus.append(cpus)
        if cgroup_dir.name == "gone":
            raise FileNotFoundError(cgroup_dir)
        assert cgroup_dir.parts[-4:] == ("perf_event", "kubepods", "burstable", f"pod{UID}") or "aaa" in str(cgroup_dir)
        opened[cgroup_dir.name] = FakeCounters({CYCLES: 3e9, INSTRUCTIONS: 1.5e9})
        return opened[cgroup_dir.name]

    clock = FakeClock()
    cache = MetricCache(clock=clock)
    registry = CollectorRegistry()
    collector = CPICollector(
        fake.fs(), cache, registry, informer.get_all_pods, node="n1", clock=clock, cpus=[0, 1], opener=opener
    )
    assert await collector.collect_once(window=0) == 1
    assert collector.skipped == 1
    assert opened["aaa"].started and opened["aaa"].closed
    assert seen_cpus[0] == [0, 1]
    assert cache.last(MetricKind.CONTAINER_CPI, "aaa/cycles", 10) == 3e9
    labels = {"node": "n1", "container_id": "aaa", "container_name": "c1", "pod_uid": UID, "pod_name": "p"}
    labels |= {"pod_namespace": "default", "cpi_field": "instructions"}
    assert registry.get_sample_value("koordlet_container_cpi", labels) == 1.5e9


def test_zones_with_hugepages_take_them_out_of_memory(tmp_path: Path) -> None:
    node = tmp_path / "devices/system/node/node0/hugepages"
    for size, pages in (("2048", 512), ("1048576", 2)):
        (node / f"hugepages-{size}kB").mkdir(parents=True)
        (node / f"hugepages-{size}kB" / "nr_hugepages").write_text(f"{pages}\n")
    (node / "hugepages-64kB").mkdir()  # other sizes are not reported (as Koordinator)
    hugepages = read_numa_hugepages(tmp_path)
    assert hugepages == {0: {2048: 512, 1048576: 2}}
    topo = CPUTopology((LogicalCPU(0, 0, 0, 0),), (NUMANode(0, frozenset({0}), 8 * GiB),))
    zone = topology_zones(topo, hugepages=hugepages)[0]
    got = {r["name"]: r["capacity"] for r in zone["resources"]}
    assert got == {
        "cpu": "1",
        "memory": str(8 * GiB - GiB - 2 * GiB),
        "hugepages-2Mi": str(GiB),
        "hugepages-1Gi": str(2 * GiB),
    }
    assert [r["name"] for r in topology_zones(topo)[0]["resources"]] == ["cpu", "memory"]  # the gate off


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        pytest.param({}, [], id="all-off"),
        pytest.param({"ResctrlCollector": True}, ["ResctrlCollector"], id="resctrl"),
        pytest.param({"CPICollector": True}, ["CPICollector"], id="cpi"),
        pytest.param({"ColdPageCollector": True}, ["ColdPageCollector"], id="coldpage"),
    ],
)
def test_each_collector_runs_only_with_its_gate(tmp_path: Path, gates: dict[str, bool], want: list[str]) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    write_proc(tmp_path / "proc", busy_ticks=0)
    deps = CollectorDeps(
        fake.fs(),
        ProcFS(tmp_path / "proc"),
        MetricCache(clock=FakeClock()),
        CollectorRegistry(),
        StatesInformer("n1", fake.fs().layout),
    )
    resolved = FeatureGates.resolve(KOORDLET_FEATURES, gates)
    built = gated_collectors(resolved, argparse.Namespace(), deps, node="n1", clock=FakeClock())
    assert [c.name for c in built] == want


async def test_cold_page_collector_run_stops(tmp_path: Path) -> None:
    fake, informer, _ = _cold_tree(tmp_path)
    write_proc(tmp_path / "proc", busy_ticks=0)
    clock = FakeClock()
    collector = ColdPageCollector(
        fake.fs(),
        ProcFS(tmp_path / "proc"),
        MetricCache(clock=clock),
        informer.get_all_pods,
        kidled=Kidled(tmp_path / "no-sys"),
        clock=clock,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(collector.run(stop, interval=0.01))
    await asyncio.sleep(0.05)
    stop.set()
    await task
    assert collector.errors == 0


@pytest.mark.parametrize(
    ("gate_on", "want"), [(True, ["cpu", "memory", "hugepages-2Mi", "hugepages-1Gi"]), (False, ["cpu", "memory"])]
)
def test_node_topology_reports_hugepages_only_with_the_gate(tmp_path: Path, gate_on: bool, want: list[str]) -> None:
    import dataclasses

    from koordlet.qosmanager.plugins.nodetopology.plugin import NodeTopologyReport
    from tests.unit.koordlet.qos.qos_helpers import make_ctx
    from tests.unit.koordlet.topology.sysfs_tree import write_sysfs

    sysfs = write_sysfs(tmp_path / "sys", sockets=1, nodes_per_socket=1, cores_per_node=2, threads=1)
    pages = sysfs / "devices/system/node/node0/hugepages/hugepages-2048kB"
    pages.mkdir(parents=True)
    (pages / "nr_hugepages").write_text("0\n")
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx = make_ctx(
        fake.fs(), clock=FakeClock(), args={"sysfs_root": sysfs, "kubelet_cpu_manager_state": tmp_path / "none"}
    )
    ctx = dataclasses.replace(ctx, gates=FeatureGates.resolve(KOORDLET_FEATURES, {"HugePageReport": gate_on}))
    plugin = NodeTopologyReport()
    plugin.setup(ctx)
    zone = plugin.desired()["zones"][0]
    assert [r["name"] for r in zone["resources"]] == want
