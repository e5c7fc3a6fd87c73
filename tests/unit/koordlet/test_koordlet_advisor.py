import logging
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups, make_raw_pod, write_proc

from apis.extension import KubeQOSClass
from apis.slo import ResolvedCollectPolicy
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor import BE_REAL_LIMIT, BE_REQUEST, BE_USAGE, CacheUsageSource, MetricsAdvisor
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.system import CgroupDriver, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock

UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


@pytest.fixture(
    params=[
        (CgroupVersion.V1, CgroupDriver.CGROUPFS),
        (CgroupVersion.V2, CgroupDriver.CGROUPFS),
        (CgroupVersion.V1, CgroupDriver.SYSTEMD),
        (CgroupVersion.V2, CgroupDriver.SYSTEMD),
    ],
    ids=["v1-cgroupfs", "v2-cgroupfs", "v1-systemd", "v2-systemd"],
)
def fake(request: pytest.FixtureRequest, tmp_path: Path) -> FakeCgroups:
    version, driver = request.param
    return FakeCgroups(tmp_path / "cgroup", version, driver)


def test_collect_pod_node_system_be(fake: FakeCgroups, tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    fs = fake.fs()
    layout = fs.layout
    proc = tmp_path / "proc"
    informer = StatesInformer("node-1", layout)
    informer.replace_pods(
        [
            make_raw_pod("busy", UID_A, qos="Burstable", priority=9500, containers=[("c", "containerd://c1")]),
            make_raw_pod(
                "batch",
                UID_B,
                qos="BestEffort",
                labels={"koordinator.sh/qosClass": "BE"},  # BE request counts labelled pods (Koordinator)
                requests={"kubernetes.io/batch-cpu": "500"},
            ),
        ]
    )
    pod_a = layout.pod_dir(KubeQOSClass.BURSTABLE, UID_A)
    container_a = informer.get_pod(UID_A).container_dir(layout, informer.get_pod(UID_A).containers[0])  # type: ignore[union-attr]
    pod_b = layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID_B)
    be_dir = layout.qos_dir(KubeQOSClass.BEST_EFFORT)
    assert container_a is not None

    def write(t: int) -> None:
        fake.set_usage(
            pod_a,
            cpu_ns=t * 1_000_000_000,
            mem_anon=100 << 20,
            mem_file=300 << 20,
            periods=t * 10,
            throttled=t * 2,
        )
        fake.set_usage(container_a, cpu_ns=t * 900_000_000, mem_anon=90 << 20)
        fake.set_usage(pod_b, cpu_ns=t * 250_000_000, mem_anon=50 << 20)
        fake.set_usage(be_dir, cpu_ns=t * 250_000_000)
        write_proc(proc, busy_ticks=t * 200, mem_total_kb=4 << 20, mem_available_kb=3 << 20)

    cache = MetricCache(clock=clock)
    advisor = MetricsAdvisor(fs, ProcFS(proc, clock_ticks=100), cache, informer.get_all_pods, clock=clock)
    write(0)
    advisor.collect_once()
    assert cache.query(MetricKind.POD_CPU_USAGE, UID_A, 0, 1e12) is None  # first sample dropped
    for t in (1, 2, 3):
        clock.advance(1.0)
        write(t)
        advisor.collect_once()

    def last(kind: MetricKind, key: str) -> float | None:
        return cache.last(kind, key, max_age=2.0)

    got = {
        "pod_a_cpu": last(MetricKind.POD_CPU_USAGE, UID_A),
        "pod_a_mem": last(MetricKind.POD_MEMORY_USAGE, UID_A),
        "pod_a_throttled": last(MetricKind.POD_CPU_THROTTLED, UID_A),
        "container_cpu": last(MetricKind.CONTAINER_CPU_USAGE, "c1"),
        "pod_b_cpu": last(MetricKind.POD_CPU_USAGE, UID_B),
        "node_cpu": last(MetricKind.NODE_CPU_USAGE, ""),
        "node_mem": last(MetricKind.NODE_MEMORY_USAGE, ""),
        "sys_cpu": last(MetricKind.SYS_CPU_USAGE, ""),
        "sys_mem": last(MetricKind.SYS_MEMORY_USAGE, ""),
        "be_usage": last(MetricKind.NODE_BE, BE_USAGE),
        "be_request": last(MetricKind.NODE_BE, BE_REQUEST),
    }
    assert got == pytest.approx(
        {
            "pod_a_cpu": 1.0,
            "pod_a_mem": float(100 << 20),  # page cache left out
            "pod_a_throttled": 0.2,
            "container_cpu": 0.9,
            "pod_b_cpu": 0.25,
            "node_cpu": 2.0,
            "node_mem": float(1 << 30),
            "sys_cpu": 0.75,
            "sys_mem": float((1 << 30) - (150 << 20)),
            "be_usage": 250.0,
            "be_request": 500.0,
        }
    )
    assert last(MetricKind.NODE_BE, BE_REAL_LIMIT) is not None
    assert advisor.errors == 0


def test_pod_gone_is_quiet(fake: FakeCgroups, tmp_path: Path) -> None:
    clock = FakeClock()
    informer = StatesInformer("node-1", fake.fs().layout)
    informer.replace_pods([make_raw_pod("ghost", UID_A)])
    write_proc(tmp_path / "proc", busy_ticks=1)
    cache = MetricCache(clock=clock)
    advisor = MetricsAdvisor(fake.fs(), ProcFS(tmp_path / "proc"), cache, informer.get_all_pods, clock=clock)
    for _ in range(3):
        advisor.collect_once()
        clock.advance(1.0)
    assert advisor.errors == 0
    assert cache.keys(MetricKind.POD_CPU_USAGE) == []


def test_counter_reset_restarts_delta(tmp_path: Path) -> None:
    clock = FakeClock()
    fake = FakeCgroups(tmp_path / "cg", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    informer = StatesInformer("node-1", fake.fs().layout)
    informer.replace_pods([make_raw_pod("p", UID_A)])
    rel = fake.fs().layout.pod_dir(KubeQOSClass.BURSTABLE, UID_A)
    write_proc(tmp_path / "proc", busy_ticks=1)
    cache = MetricCache(clock=clock)
    advisor = MetricsAdvisor(fake.fs(), ProcFS(tmp_path / "proc"), cache, informer.get_all_pods, clock=clock)
    for cpu_ns in (5_000_000_000, 1_000_000_000, 1_500_000_000):
        fake.set_usage(rel, cpu_ns=cpu_ns)
        advisor.collect_once()
        clock.advance(1.0)
    stats = cache.query(MetricKind.POD_CPU_USAGE, UID_A, 0, 1e12)
    assert stats is not None and (stats.count, stats.last) == (1, 0.5)


def test_one_pods_malformed_cgroup_file_costs_that_pod_only(
    fake: FakeCgroups, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(1000.0)
    fs = fake.fs()
    layout = fs.layout
    informer = StatesInformer("node-1", layout)
    informer.replace_pods([make_raw_pod("broken", UID_A), make_raw_pod("fine", UID_B)])  # broken one first
    broken = layout.pod_dir(KubeQOSClass.BURSTABLE, UID_A)
    fine = layout.pod_dir(KubeQOSClass.BURSTABLE, UID_B)
    memory_stat = fake.root / ("memory" if fake.version is CgroupVersion.V1 else "") / broken / "memory.stat"
    cache = MetricCache(clock=clock)
    advisor = MetricsAdvisor(fs, ProcFS(tmp_path / "proc", clock_ticks=100), cache, informer.get_all_pods, clock=clock)
    with caplog.at_level(logging.WARNING):
        for t in range(4):
            fake.set_usage(broken, cpu_ns=t * 500_000_000, mem_anon=10 << 20)
            memory_stat.write_bytes(b"\xff\xfe not a memory.stat \x00")
            fake.set_usage(fine, cpu_ns=t * 250_000_000, mem_anon=50 << 20)
            write_proc(tmp_path / "proc", busy_ticks=t * 100, mem_total_kb=4 << 20, mem_available_kb=3 << 20)
            advisor.collect_once()
            clock.advance(1.0)

    assert cache.last(MetricKind.POD_CPU_USAGE, UID_B, max_age=2.0) == pytest.approx(0.25)
    assert cache.last(MetricKind.POD_MEMORY_USAGE, UID_B, max_age=2.0) == pytest.approx(float(50 << 20))
    assert cache.last(MetricKind.POD_MEMORY_USAGE, UID_A, max_age=2.0) is None
    assert advisor.errors == 4  # one per tick, for the broken pod only
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines  # logged once a minute at most
    assert lines[0].startswith(f"PodResourceCollector for pod default/broken ({UID_A}) failed: UnicodeDecodeError")
    status = build_node_metric_status(
        CacheUsageSource(cache),
        informer.get_all_pods(),
        ResolvedCollectPolicy(aggregate_duration_seconds=60),
        clock(),
    )
    assert [p.name for p in status.pods_metric or ()] == ["fine"]
