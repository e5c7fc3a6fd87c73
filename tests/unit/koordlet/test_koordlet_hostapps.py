"""Host applications: where their cgroups are, their usage collected, taken out of the system usage,
and reported in ``hostApplicationMetric`` (Koordinator's hostapplication collector and reporter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups, write_proc

from apis.slo import ResolvedCollectPolicy
from apis.slo.nodeslo import CgroupPath, HostApplicationSpec
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor import CacheUsageSource, MetricsAdvisor
from koordlet.metricsadvisor.advisor import AdvisorOptions
from koordlet.metricsadvisor.hostapps import host_app_cgroup_dir
from koordlet.statesinformer import build_node_metric_status
from koordlet.system import CgroupDriver, CgroupLayout, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock

CGROUPFS = CgroupLayout.for_driver(CgroupDriver.CGROUPFS)
SYSTEMD = CgroupLayout.for_driver(CgroupDriver.SYSTEMD)
NGINX = HostApplicationSpec(
    name="nginx",
    priority="koord-prod",
    qos="LS",
    cgroup_path=CgroupPath(base="CgroupRoot", parent_dir="host-latency-sensitive/", relative_path="nginx/"),
)


@pytest.mark.parametrize(
    ("app", "layout", "want"),
    [
        pytest.param(NGINX, CGROUPFS, "host-latency-sensitive/nginx", id="cgroup-root"),
        pytest.param(HostApplicationSpec(name="a", qos="LS"), CGROUPFS, "host-latency-sensitive/a", id="ls-default"),
        pytest.param(HostApplicationSpec(name="b", qos="BE"), CGROUPFS, "host-best-effort/b", id="be-default"),
        pytest.param(HostApplicationSpec(name="c"), CGROUPFS, "c", id="no-qos-default"),
        pytest.param(
            HostApplicationSpec(name="d", cgroup_path=CgroupPath(base="KubepodsBesteffort", relative_path="yarn")),
            CGROUPFS,
            "kubepods/besteffort/yarn",
            id="besteffort-base-cgroupfs",
        ),
        pytest.param(
            HostApplicationSpec(name="d", cgroup_path=CgroupPath(base="KubepodsBurstable", relative_path="yarn")),
            SYSTEMD,
            "kubepods.slice/kubepods-burstable.slice/yarn",
            id="burstable-base-systemd",
        ),
        pytest.param(
            HostApplicationSpec(name="e", cgroup_path=CgroupPath(base="Kubepods", parent_dir="x", relative_path="y")),
            CGROUPFS,
            "kubepods/x/y",
            id="kubepods-base",
        ),
    ],
)
def test_cgroup_dir(app: HostApplicationSpec, layout: CgroupLayout, want: str) -> None:
    assert host_app_cgroup_dir(app, layout) == want


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(CgroupPath(relative_path="../../etc"), id="dot-dot"),
        pytest.param(CgroupPath(parent_dir="/etc"), id="absolute"),
        pytest.param(CgroupPath(), id="empty-path"),
    ],
)
def test_paths_leaving_the_mount_are_refused(path: CgroupPath) -> None:
    with pytest.raises(ValueError, match="host application 'x'"):
        host_app_cgroup_dir(HostApplicationSpec(name="x", cgroup_path=path), CGROUPFS)


def test_usage_collected_reported_and_taken_out_of_the_system(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = fake.fs()
    clock = FakeClock(1000.0)
    proc = tmp_path / "proc"
    apps = [NGINX, HostApplicationSpec(name="missing", qos="BE")]

    def write(t: int) -> None:
        fake.set_usage("host-latency-sensitive/nginx", cpu_ns=t * 500_000_000, mem_anon=200 << 20)
        write_proc(proc, busy_ticks=t * 200, mem_total_kb=4 << 20, mem_available_kb=3 << 20)

    cache = MetricCache(clock=clock)
    advisor = MetricsAdvisor(
        fs,
        ProcFS(proc, clock_ticks=100),
        cache,
        list,
        clock=clock,
        options=AdvisorOptions(host_applications=lambda: apps),
    )
    for t in range(4):
        write(t)
        advisor.collect_once()
        clock.advance(1.0)
    assert cache.last(MetricKind.HOST_APP_CPU_USAGE, "nginx", max_age=2.0) == pytest.approx(0.5)
    # node 2 cores and 1 GiB, no pods: the system is what nginx does not use
    assert cache.last(MetricKind.SYS_CPU_USAGE, "", max_age=2.0) == pytest.approx(1.5)
    assert cache.last(MetricKind.SYS_MEMORY_USAGE, "", max_age=2.0) == pytest.approx(float((1 << 30) - (200 << 20)))
    usage = CacheUsageSource(cache)
    status = build_node_metric_status(
        usage, [], ResolvedCollectPolicy(), clock(), host_apps=apps, host_usage=usage
    ).to_wire()
    assert status["hostApplicationMetric"] == [
        {
            "name": "nginx",
            "priority": "koord-prod",
            "qos": "LS",
            "usage": {"resources": {"cpu": "500m", "memory": "200Mi"}},
        }
    ]
    assert advisor.errors == 0
