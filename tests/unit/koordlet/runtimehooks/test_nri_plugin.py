"""koordlet's NRI plugin against a runtime speaking NRI's protocol on a real unix socket: registration, the
event mask, split synchronization, adjustments at creation, pod-level values at sandbox creation, updates,
fail-open on errors and timeouts (with the metric and one log line per pod), reconnection."""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakeruntime import FakeRuntime
from koordlet_fakes import FakeCgroups
from prometheus_client import CollectorRegistry
from qos_helpers import NODE, make_node, pod

from apis.extension import KubeQOSClass
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS, CPUSharedPool
from koordlet.qosmanager import ResourceExecutor
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES, FeatureGates
from koordlet.qosmanager.plugins.batchresource.policy import ANNOTATION_EXTENDED_RESOURCE_SPEC
from koordlet.qosmanager.plugins.cpuset.policy import CPUSetRule
from koordlet.runtimehooks.hooks import HookRules
from koordlet.runtimehooks.nri.handlers import HookHandlers
from koordlet.runtimehooks.nri.plugin import SUBSCRIBED_EVENTS, HookMetrics, NRIOptions, NRIPlugin, event_mask
from koordlet.runtimehooks.nri.proto import api_pb2
from koordlet.runtimehooks.nri.ttrpc import CODE_UNKNOWN, RPCError
from koordlet.runtimehooks.rules import HookRuleSource
from koordlet.statesinformer import StatesInformer
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

BE_UID = "aaaaaaaa-0000-4000-8000-000000000001"
LSR_UID = "aaaaaaaa-0000-4000-8000-000000000002"
CPU, MEM = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
GiB = 1 << 30


@dataclass
class Setup:
    runtime: FakeRuntime
    plugin: NRIPlugin
    informer: StatesInformer
    cgroups: FakeCgroups
    registry: CollectorRegistry

    def failures(self, event: str, reason: str) -> float:
        value = self.registry.get_sample_value(
            "koordlet_runtime_hook_failures_total", {"node": NODE, "event": event, "reason": reason}
        )
        return value or 0.0


def sandbox(
    uid: str,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    parent: str = "/kubepods/besteffort",
) -> api_pb2.PodSandbox:
    box = api_pb2.PodSandbox(
        id=f"sb-{name}", name=name, uid=uid, namespace="default", labels=labels or {}, annotations=annotations or {}
    )
    box.linux.cgroup_parent = f"{parent}/pod{uid}"
    return box


def container(name: str, cid: str = "c1", *, quota: int | None = None) -> api_pb2.Container:
    c = api_pb2.Container(id=cid, pod_sandbox_id="sb", name=name)
    c.linux.resources.cpu.shares.value = 2
    if quota is not None:
        c.linux.resources.cpu.quota.value = quota
    return c


def start(
    tmp_path: Path, *, rules: object = None, budget: float = 1.0, failure_policy: str = "Ignore"
) -> Iterator[Setup]:
    cgroups = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fs = cgroups.fs()
    informer = StatesInformer(NODE, fs.layout)
    informer.set_node(make_node())
    gates = FeatureGates.resolve(KOORDLET_FEATURES, {"CPUNormalization": True})
    registry = CollectorRegistry()
    source = rules if rules is not None else HookRuleSource(informer, gates)
    handlers = HookHandlers(informer, source, ResourceExecutor(fs, clock=FakeClock()))  # type: ignore[arg-type]
    options = NRIOptions(
        tmp_path / "nri.sock",
        request_budget=budget,
        backoff_initial=0.05,
        backoff_max=0.2,
        connect_timeout=5.0,
        failure_policy=failure_policy,
    )
    runtime = FakeRuntime(options.socket_path)
    plugin = NRIPlugin(options, handlers, metrics=HookMetrics(registry, NODE))
    thread = threading.Thread(target=plugin.run, daemon=True)
    thread.start()
    try:
        yield Setup(runtime, plugin, informer, cgroups, registry)
    finally:
        plugin.stop()
        runtime.close()
        thread.join(5)
        assert not thread.is_alive(), "the plugin did not stop"


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    yield from start(tmp_path)


def test_registers_as_koordlet_nri_00_and_subscribes_to_the_lifecycle_events(setup: Setup) -> None:
    configured = setup.runtime.accept()
    assert setup.runtime.registration is not None
    assert (setup.runtime.registration.plugin_name, setup.runtime.registration.plugin_idx) == ("koordlet_nri", "00")
    # RunPodSandbox(1), RemovePodSandbox(3), CreateContainer(4), UpdateContainer(8), StopContainer(10)
    assert configured.events == event_mask(SUBSCRIBED_EVENTS) == 0b1010001101
    assert setup.plugin.configured.is_set()


def test_split_synchronize_is_collected_and_touches_no_container(setup: Setup) -> None:
    setup.runtime.accept()
    pods = [sandbox(BE_UID, "a"), sandbox(LSR_UID, "b")]
    setup.runtime.synchronize(pods, [container("x", "c1"), container("y", "c2"), container("z", "c3")])
    assert setup.plugin.synchronized.wait(2)
    assert setup.plugin.stats.synchronized_containers == 3


def test_be_container_from_the_informer_gets_batch_resource_values_at_creation(setup: Setup) -> None:
    setup.informer.replace_pods(
        [
            pod("be", BE_UID)
            .be()
            .container("main", requests={CPU: "500", MEM: "1Gi"}, limits={CPU: "2000", MEM: "2Gi"})
            .build()
        ]
    )
    setup.runtime.accept()
    got = setup.runtime.create_container(
        sandbox(BE_UID, "be", labels={"koordinator.sh/qosClass": "BE"}), container("main")
    )
    resources = got.adjust.linux.resources
    assert resources.cpu.shares.value == 500 * 1024 // 1000
    assert resources.cpu.quota.value == 200000
    assert resources.memory.limit.value == 2 * GiB
    assert not resources.cpu.HasField("period") and resources.cpu.cpus == ""


def test_be_pod_unknown_to_the_informer_is_decided_from_its_sandbox_annotation(setup: Setup) -> None:
    spec = {"containers": {"main": {"requests": {CPU: "500"}, "limits": {CPU: "500", MEM: "2Gi"}}}}
    box = sandbox(
        BE_UID,
        "be",
        labels={"koordinator.sh/qosClass": "BE"},
        annotations={ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
    )
    setup.runtime.accept()
    resources = setup.runtime.create_container(box, container("main")).adjust.linux.resources
    assert (resources.cpu.shares.value, resources.cpu.quota.value, resources.memory.limit.value) == (
        512,
        50000,
        2 * GiB,
    )
    # another container of the pod, not in the annotation: left as the kubelet made it
    assert not setup.runtime.create_container(box, container("sidecar", "c2")).HasField("adjust") or (
        not setup.runtime.create_container(box, container("sidecar", "c3")).adjust.HasField("linux")
    )


def test_run_pod_sandbox_writes_the_be_pod_cgroup_before_its_containers(setup: Setup) -> None:
    setup.informer.replace_pods(
        [
            pod("be", BE_UID)
            .be()
            .container("a", requests={CPU: "500"}, limits={CPU: "1000", MEM: "1Gi"})
            .container("b", requests={CPU: "500"}, limits={CPU: "1000", MEM: "1Gi"})
            .build()
        ]
    )
    pod_dir = setup.informer.layout.pod_dir(KubeQOSClass.BEST_EFFORT, BE_UID)
    setup.cgroups.make_dir(pod_dir)
    root = setup.cgroups.root
    for controller, name, kubelet_value in (
        ("cpu", "cpu.shares", "2"),
        ("cpu", "cpu.cfs_quota_us", "-1"),
        ("memory", "memory.limit_in_bytes", "9223372036854771712"),
    ):
        (root / controller / pod_dir / name).write_text(kubelet_value + "\n")
    setup.runtime.accept()
    setup.runtime.run_pod_sandbox(sandbox(BE_UID, "be", labels={"koordinator.sh/qosClass": "BE"}))
    assert (root / "cpu" / pod_dir / "cpu.shares").read_text().strip() == str(1000 * 1024 // 1000)
    assert (root / "cpu" / pod_dir / "cpu.cfs_quota_us").read_text().strip() == "200000"
    assert (root / "memory" / pod_dir / "memory.limit_in_bytes").read_text().strip() == str(2 * GiB)


def test_update_container_names_the_container_it_updates(setup: Setup) -> None:
    setup.informer.replace_pods(
        [pod("be", BE_UID).be().container("main", requests={CPU: "1000"}, limits={CPU: "1000"}).build()]
    )
    setup.runtime.accept()
    kubelet = api_pb2.LinuxResources()
    kubelet.cpu.shares.value = 2
    got = setup.runtime.update_container(sandbox(BE_UID, "be"), container("main", "ctr-7"), kubelet)
    assert [u.container_id for u in got.update] == ["ctr-7"]
    assert got.update[0].linux.resources.cpu.quota.value == 100000
    assert got.update[0].ignore_failure


def test_a_decision_that_fails_gives_no_adjustment_is_counted_and_logged_once_per_pod(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    box = sandbox(
        BE_UID,
        "broken",
        labels={"koordinator.sh/qosClass": "BE"},
        annotations={ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"},
    )
    setup.runtime.accept()
    with caplog.at_level(logging.WARNING, logger="koordlet.nri"):
        first = setup.runtime.create_container(box, container("a", "c1"))
        second = setup.runtime.create_container(box, container("b", "c2"))
    assert not first.adjust.HasField("linux") and not second.adjust.HasField("linux")
    assert setup.failures("CreateContainer", "error") == 2
    lines = [r.getMessage() for r in caplog.records if "default/broken" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "extended-resource-spec" in lines[0] and "reconciler" in lines[0]


def test_a_decision_past_the_budget_gives_no_adjustment_in_time(tmp_path: Path) -> None:
    release = threading.Event()

    def slow_rules() -> HookRules:
        release.wait(5)
        return HookRules(FeatureGates.resolve(KOORDLET_FEATURES))

    for s in start(tmp_path, rules=slow_rules, budget=0.2):
        s.runtime.accept()
        started = time.monotonic()
        got = s.runtime.create_container(sandbox(BE_UID, "slow"), container("main"))
        elapsed = time.monotonic() - started
        release.set()
        assert not got.adjust.HasField("linux")
        assert elapsed < 1.5, elapsed
        assert s.failures("CreateContainer", "timeout") == 1


BROKEN_BE = {"labels": {"koordinator.sh/qosClass": "BE"}, "annotations": {ANNOTATION_EXTENDED_RESOURCE_SPEC: "{x"}}


def test_fail_policy_fails_the_creation_with_the_error_and_counts_it(tmp_path: Path) -> None:
    """Koordinator's NRI server under ``--runtime-hooks-plugin-failure-policy=Fail`` returns the hook's error,
    so the runtime fails the request; a good pod is still adjusted."""
    for s in start(tmp_path, failure_policy="Fail"):
        s.runtime.accept()
        box = sandbox(BE_UID, "broken", **BROKEN_BE)  # type: ignore[arg-type]
        with pytest.raises(RPCError) as create:
            s.runtime.create_container(box, container("main"))
        assert create.value.code == CODE_UNKNOWN
        assert create.value.message.startswith(
            "koordlet: CreateContainer of pod default/broken: error: BatchResource: annotation "
        )
        assert ANNOTATION_EXTENDED_RESOURCE_SPEC in create.value.message
        with pytest.raises(RPCError, match="RunPodSandbox of pod default/broken: error"):
            s.runtime.run_pod_sandbox(box)
        with pytest.raises(RPCError, match="UpdateContainer of pod default/broken"):
            s.runtime.update_container(box, container("main"), api_pb2.LinuxResources())
        assert s.failures("CreateContainer", "error") == 1 and s.failures("RunPodSandbox", "error") == 1
        spec = {"containers": {"main": {"requests": {CPU: "500"}, "limits": {CPU: "500"}}}}
        good = sandbox(
            LSR_UID,
            "good",
            labels={"koordinator.sh/qosClass": "BE"},
            annotations={ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
        )
        assert s.runtime.create_container(good, container("main")).adjust.linux.resources.cpu.shares.value == 512


def test_ignore_policy_creates_the_container_without_adjustment(tmp_path: Path) -> None:
    for s in start(tmp_path, failure_policy="Ignore"):
        s.runtime.accept()
        box = sandbox(BE_UID, "broken", **BROKEN_BE)  # type: ignore[arg-type]
        s.runtime.run_pod_sandbox(box)
        assert not s.runtime.create_container(box, container("main")).adjust.HasField("linux")
        assert s.failures("CreateContainer", "error") == 1 and s.failures("RunPodSandbox", "error") == 1


def test_fail_policy_fails_on_a_timeout_and_on_one_failing_gate(tmp_path: Path) -> None:
    """Under Fail, one failing gate fails the whole request (Koordinator's ``RunHooks`` stops at the first
    error), and so does a decision past the budget."""
    gates = FeatureGates.resolve(KOORDLET_FEATURES, {"OOMScoreAdj": True})
    release = threading.Event()

    def rules() -> HookRules:
        if not release.is_set():
            release.wait(5)
        return HookRules(gates)

    spec = {"containers": {"main": {"requests": {CPU: "500"}, "limits": {CPU: "500"}}}}
    annotations = {ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec), "koordinator.sh/oom-score-adj": "oops"}
    box = sandbox(BE_UID, "half", labels={"koordinator.sh/qosClass": "BE"}, annotations=annotations)
    for s in start(tmp_path, rules=rules, budget=0.2, failure_policy="Fail"):
        s.runtime.accept()
        with pytest.raises(RPCError, match=r"CreateContainer of pod default/half: timeout: no decision within 0\.2s"):
            s.runtime.create_container(box, container("main"))
        release.set()
        with pytest.raises(RPCError, match=r"error: OOMScoreAdj: annotation koordinator\.sh/oom-score-adj"):
            s.runtime.create_container(box, container("main", "c2"))
        assert s.failures("CreateContainer", "timeout") == 1 and s.failures("CreateContainer", "error") == 1


def test_lsr_pod_runs_on_its_bound_cpuset_without_a_cfs_quota(tmp_path: Path) -> None:
    def rules() -> HookRules:
        pools = (CPUSharedPool(socket=0, node=0, cpuset="2-7"),)
        return HookRules(FeatureGates.resolve(KOORDLET_FEATURES), cpuset=CPUSetRule(pools))

    status = json.dumps({"cpuset": "0-1"})
    box = sandbox(
        LSR_UID,
        "lsr",
        labels={"koordinator.sh/qosClass": "LSR"},
        annotations={ANNOTATION_RESOURCE_STATUS: status},
        parent="/kubepods",
    )
    ls_box = sandbox(BE_UID, "ls", labels={"koordinator.sh/qosClass": "LS"}, parent="/kubepods/burstable")
    for s in start(tmp_path, rules=rules):
        s.runtime.accept()
        lsr = s.runtime.create_container(box, container("main", quota=200000)).adjust.linux.resources
        assert (lsr.cpu.cpus, lsr.cpu.quota.value) == ("0-1", -1)
        ls = s.runtime.create_container(ls_box, container("main", "c2", quota=50000)).adjust.linux.resources
        assert ls.cpu.cpus == "2-7" and not ls.cpu.HasField("quota")


def test_reconnects_after_the_runtime_drops_the_connection(setup: Setup) -> None:
    setup.runtime.accept()
    setup.runtime.drop()
    setup.runtime.accept()  # registers and is configured again
    deadline = time.monotonic() + 5
    while setup.plugin.stats.connections < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # counted by the plugin's thread once it sees itself configured
    assert setup.plugin.stats.connections == 2


def test_without_a_socket_koordlet_says_so_once_and_connects_when_it_appears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from koordlet.runtimehooks.service import announce

    socket_path = tmp_path / "nri.sock"
    options = NRIOptions(socket_path, backoff_initial=0.05, backoff_max=0.1)
    with caplog.at_level(logging.INFO, logger="koordlet.nri"):
        announce(options, 10.0)
        informer = StatesInformer(NODE, FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS).fs().layout)
        gates = FeatureGates.resolve(KOORDLET_FEATURES)
        handlers = HookHandlers(
            informer,
            HookRuleSource(informer, gates),
            ResourceExecutor(FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS).fs(), clock=FakeClock()),
        )
        plugin = NRIPlugin(options, handlers)
        thread = threading.Thread(target=plugin.run, daemon=True)
        thread.start()
        time.sleep(0.5)  # several retries' worth of backoff with no socket
        runtime = FakeRuntime(socket_path)
        try:
            runtime.accept()
        finally:
            plugin.stop()
            runtime.close()
            thread.join(5)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("no NRI socket" in line for line in lines) == 1, lines
    assert "reconcile (every 10s)" in next(line for line in lines if "no NRI socket" in line)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], lines
    assert any("registered as 00-koordlet_nri" in line for line in lines)


def test_announce_says_which_path_applies_the_values(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from koordlet.runtimehooks.service import announce, nri_options, nri_socket_path

    args = argparse.Namespace(var_run_root_dir=tmp_path, runtime_hooks_nri_socket_path="nri/nri.sock")
    assert nri_socket_path(args) == tmp_path / "nri" / "nri.sock"
    assert nri_options(argparse.Namespace(enable_nri_runtime_hook=False)) is None
    assert nri_options(args) is not None and nri_options(args).failure_policy == "Ignore"  # type: ignore[union-attr]
    failing = argparse.Namespace(**vars(args), runtime_hooks_plugin_failure_policy="Fail")
    assert nri_options(failing).failure_policy == "Fail"  # type: ignore[union-attr]
    with caplog.at_level(logging.INFO, logger="koordlet.nri"):
        announce(None, 10.0)
    assert "NRI off (--enable-nri-runtime-hook=false)" in caplog.records[-1].getMessage()
