"""What keeps koordlet's NRI answer fast: the node-wide rules are kept between events while what they are made
of is unchanged, a container event is then answered on the connection's thread without reading a file or
hopping to the worker pool, and the GIL switch interval is short."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from fakeruntime import FakeRuntime
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, make_node, pod

from koordlet.qosmanager import ResourceExecutor
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES, FeatureGates
from koordlet.qosmanager.plugins.cpuset.plugin import CPUSetAllocator
from koordlet.runtimehooks.nri.handlers import HookHandlers
from koordlet.runtimehooks.nri.plugin import DURATION_BUCKETS, NRIOptions, NRIPlugin
from koordlet.runtimehooks.nri.proto import api_pb2
from koordlet.runtimehooks.rules import HookRuleSource
from koordlet.runtimehooks.service import GIL_SWITCH_INTERVAL_S, answer_promptly
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock
from tests.unit.koordlet.topology.sysfs_tree import write_sysfs

GATES = FeatureGates.resolve(KOORDLET_FEATURES)
LS_UID = "cccccccc-0000-4000-8000-000000000001"
STATIC_UID = "cccccccc-0000-4000-8000-000000000002"


def checkpoint(path: Path, entries: dict[str, dict[str, str]]) -> None:
    path.write_text(json.dumps({"policyName": "static", "defaultCpuSet": "", "entries": entries}))


def source(tmp_path: Path) -> tuple[HookRuleSource, CPUSetAllocator, Path]:
    fs = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS).fs()
    sysfs = write_sysfs(tmp_path / "sys", sockets=1, nodes_per_socket=1, cores_per_node=4, threads=1)
    state = tmp_path / "cpu_manager_state"
    checkpoint(state, {})
    ctx = make_ctx(fs, clock=FakeClock(), args={"sysfs_root": sysfs, "kubelet_cpu_manager_state": state})
    ctx.states_informer.set_node(make_node())
    ctx.states_informer.replace_pods([pod("ls", LS_UID).qos("Burstable", "LS").build()])
    allocator = CPUSetAllocator()
    allocator.setup(ctx)
    return HookRuleSource.of(ctx.states_informer, GATES, [allocator]), allocator, state


def ls_pool(rules: object) -> str:
    return rules.cpuset.ls_pools[0].cpuset  # type: ignore[attr-defined,no-any-return]


def test_rules_are_kept_until_the_pods_node_slo_or_checkpoint_change(tmp_path: Path) -> None:
    rules, allocator, state = source(tmp_path)
    informer = allocator.ctx.states_informer
    assert rules.current() is None  # nothing computed yet
    first = rules()
    assert ls_pool(first) == "0-3"
    assert rules.current() is first and rules.current() is first
    informer.replace_pod_metas(informer.get_all_pods())  # the same pod objects: still current
    assert rules.current() is first
    informer.replace_pods([pod("ls", LS_UID).qos("Burstable", "LS").build()])
    assert rules.current() is None  # a new pod object
    second = rules()
    assert rules.current() is second
    informer.set_node(make_node())
    assert rules.current() is None
    rules()
    informer.set_node_slo({"spec": {"resourceUsedThresholdWithBE": {"enable": True}}})
    assert rules.current() is None
    third = rules()
    assert rules.current() is third
    # The static CPU manager gives CPUs 2-3 to a Guaranteed pod just before creating its container.
    checkpoint(state, {STATIC_UID: {"main": "2-3"}})
    assert rules.current() is None
    assert ls_pool(rules()) == "0-1"


def test_a_container_event_skips_the_pool_once_the_rules_are_kept(tmp_path: Path) -> None:
    rules, allocator, _ = source(tmp_path)
    informer = allocator.ctx.states_informer
    pool_calls: list[str] = []

    class CountingHandlers(HookHandlers):
        def decide(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            pool_calls.append(threading.current_thread().name)
            return super().decide(*args, **kwargs)  # type: ignore[arg-type]

    handlers = CountingHandlers(informer, rules, ResourceExecutor(allocator.ctx.executor.cgroupfs, clock=FakeClock()))
    options = NRIOptions(tmp_path / "nri.sock", connect_timeout=5.0)
    runtime = FakeRuntime(options.socket_path)
    plugin = NRIPlugin(options, handlers)
    thread = threading.Thread(target=plugin.run, daemon=True)
    thread.start()
    try:
        runtime.accept()
        box = api_pb2.PodSandbox(id="sb", name="ls", uid=LS_UID, namespace="default")
        box.linux.cgroup_parent = f"/kubepods/burstable/pod{LS_UID}"
        answers = [
            runtime.create_container(box, api_pb2.Container(id=f"c{i}", name="main")).adjust.linux.resources.cpu.cpus
            for i in range(3)
        ]
        assert answers == ["0-3", "0-3", "0-3"]
        assert len(pool_calls) == 1 and pool_calls[0].startswith("nri-hook"), pool_calls
        informer.replace_pods([pod("ls", LS_UID).qos("Burstable", "LS").build()])
        assert runtime.create_container(box, api_pb2.Container(id="c9", name="main")).adjust.linux.resources.cpu.cpus
        assert len(pool_calls) == 2  # the pods changed: decided again in the pool, under the budget
    finally:
        plugin.stop()
        runtime.close()
        thread.join(5)


def test_koordlet_lowers_the_gil_switch_interval_and_never_raises_it() -> None:
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        assert answer_promptly() == pytest.approx(0.005)
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S) == 0.0005
        sys.setswitchinterval(0.0001)
        answer_promptly()
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(before)


def test_answer_time_buckets_resolve_a_20_ms_p99() -> None:
    assert {0.001, 0.002, 0.005, 0.01, 0.02, 0.05} <= set(DURATION_BUCKETS)
    assert list(DURATION_BUCKETS) == sorted(DURATION_BUCKETS) and DURATION_BUCKETS[-1] >= 2.0
