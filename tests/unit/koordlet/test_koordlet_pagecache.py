"""Memory with page cache: the collector (node MemTotal - MemFree, pods anon + unevictable + file pages) and
NodeMetric reporting it when ``nodeMemoryCollectPolicy: usageWithPageCache`` says so."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups, make_raw_pod, write_proc

from apis.extension import KubeQOSClass
from apis.slo import ResolvedCollectPolicy, int_value
from koordlet.app.agent import Agent, AgentOptions
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor import AdvisorOptions, CacheUsageSource, MetricsAdvisor
from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates, QOSManager, QOSPluginRegistry
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.system import CgroupDriver, CgroupVersion, ProcFS
from koordlet.system.clock import FakeClock

UID = "11111111-2222-3333-4444-555555555555"
MiB = 1 << 20


def _setup(tmp_path: Path, version: CgroupVersion) -> tuple[StatesInformer, MetricsAdvisor, MetricCache, FakeClock]:
    fake = FakeCgroups(tmp_path / "cg", version, CgroupDriver.CGROUPFS)
    layout = fake.fs().layout
    informer = StatesInformer("node-1", layout)
    informer.replace_pods([make_raw_pod("web", UID, qos="Burstable", priority=9500)])
    fake.set_usage(layout.pod_dir(KubeQOSClass.BURSTABLE, UID), mem_anon=100 * MiB, mem_file=300 * MiB)
    # MemTotal 8 GiB, MemFree 1000 kB, MemAvailable 6 GiB
    write_proc(tmp_path / "proc", busy_ticks=0)
    clock = FakeClock(1000.0)
    cache = MetricCache(clock=clock)
    wanted = [True]
    advisor = MetricsAdvisor(
        fake.fs(), ProcFS(tmp_path / "proc", clock_ticks=100), cache, informer.get_all_pods, clock=clock,
        options=AdvisorOptions(page_cache=lambda: wanted[0]),
    )  # fmt: skip
    return informer, advisor, cache, clock


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2], ids=["v1", "v2"])
def test_page_cache_collector(tmp_path: Path, version: CgroupVersion) -> None:
    _informer, advisor, cache, _clock = _setup(tmp_path, version)
    advisor.collect_once()
    assert cache.last(MetricKind.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, "", 5) == 8 * 1024 * MiB - 1000 * 1024
    assert cache.last(MetricKind.NODE_MEMORY_USAGE, "", 5) == 2 * 1024 * MiB
    assert cache.last(MetricKind.POD_MEMORY_USAGE_WITH_PAGE_CACHE, UID, 5) == 400 * MiB
    assert cache.last(MetricKind.POD_MEMORY_USAGE, UID, 5) == 100 * MiB


@pytest.mark.parametrize(
    ("policy", "want_node", "want_pod"),
    [
        pytest.param("usageWithoutPageCache", 2 * 1024 * MiB, 100 * MiB, id="default-without"),
        pytest.param("usageWithPageCache", 8 * 1024 * MiB - 1000 * 1024, 400 * MiB, id="with-page-cache"),
        pytest.param("usageWithHotPageCache", 2 * 1024 * MiB, 100 * MiB, id="hot-page-cache-degrades"),
    ],
)
def test_node_metric_memory_follows_collect_policy(tmp_path: Path, policy: str, want_node: int, want_pod: int) -> None:
    informer, advisor, cache, clock = _setup(tmp_path, CgroupVersion.V1)
    for _ in range(3):
        advisor.collect_once()
        clock.advance(1)
    status = build_node_metric_status(
        CacheUsageSource(cache), informer.get_all_pods(), ResolvedCollectPolicy(node_memory_collect_policy=policy),
        clock(),
    )  # fmt: skip
    assert status.node_metric is not None and status.pods_metric
    node_usage = status.node_metric.node_usage
    assert node_usage is not None and node_usage.resources is not None
    assert int_value(node_usage.resources["memory"]) == want_node
    pod_usage = status.pods_metric[0].pod_usage
    assert pod_usage is not None and pod_usage.resources is not None
    assert int_value(pod_usage.resources["memory"]) == want_pod


def test_agent_collects_page_cache_when_node_metric_asks(tmp_path: Path) -> None:
    (tmp_path / "cg").mkdir()
    write_proc(tmp_path / "proc", busy_ticks=0)
    manager = QOSManager(QOSPluginRegistry())
    args = argparse.Namespace(enable_pagecache_collector=False)
    options = AgentOptions(
        node_name="node-1", cgroup_root=tmp_path / "cg", proc_root=tmp_path / "proc", standalone=True, args=args
    )
    agent = Agent(options, FeatureGates.resolve(KOORDLET_FEATURES), manager)
    assert not agent.page_cache_wanted()
    agent.informer.set_node_metric({"spec": {"metricCollectPolicy": {"nodeMemoryCollectPolicy": "usageWithPageCache"}}})
    assert agent.page_cache_wanted()
    agent.advisor.collect_once()
    assert agent.cache.last(MetricKind.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, "", 5) is not None
