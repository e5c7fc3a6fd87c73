"""The scheduling and binding cycles, through MemoryCluster + build_scheduler with test plugins."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.registry import PluginSpec, Registry
from koord_scheduler.framework.status import Code, Status, error, unschedulable
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod

NOW = 1_700_000_000.0


@dataclass
class Recorder:
    """Shared log of what the test plugins saw."""

    calls: list[str] = field(default_factory=list)
    fail_bind: set[str] = field(default_factory=set)
    fail_reserve: set[str] = field(default_factory=set)
    permit: dict[str, tuple[Status, float]] = field(default_factory=dict)
    replace_pod_cpu: int | None = None
    transformer_status: Status = field(default_factory=Status)
    handle: Any = None
    warm_up_error: bool = False


class Probe:
    """Reserve + Permit + Bind + PostBind, driven by a Recorder."""

    name = "Probe"

    def __init__(self, rec: Recorder, handle: Any) -> None:
        self.rec = rec
        rec.handle = handle

    def warm_up(self) -> None:
        self.rec.calls.append(f"warm_up:{self.rec.handle.snapshot.num_nodes}-nodes")
        if self.rec.warm_up_error:
            raise RuntimeError("warm-up broke")

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        self.rec.calls.append(f"reserve:{pod.name}:{node}")
        return unschedulable("reserve says no") if pod.name in self.rec.fail_reserve else Status()

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        self.rec.calls.append(f"unreserve:{pod.name}")

    def permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status, float]:
        return self.rec.permit.get(pod.name, (Status(), 0.0))

    async def bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        if pod.name in self.rec.fail_bind:
            self.rec.calls.append(f"bind-failed:{pod.name}")
            return error("apiserver said no")
        return Status(Code.SKIP)  # let DefaultBinder bind

    def post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        self.rec.calls.append(f"postbind:{pod.name}:{node}")


class Transformer:
    """BeforePreFilter that can replace the pod's cpu request or fail."""

    name = "Transformer"

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Any) -> tuple[None, Status]:
        self.rec.calls.append(f"prefilter-saw-cpu:{pod.requests.get('cpu', 0)}")
        return None, Status()

    def pre_filter_extensions(self) -> None:
        return None

    def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Pod | None, Status]:
        if self.rec.replace_pod_cpu is None:
            return None, self.rec.transformer_status
        requests = dict(pod.requests)
        requests["cpu"] = self.rec.replace_pod_cpu
        return replace(pod, requests=requests), self.rec.transformer_status

    def after_pre_filter(self, state: CycleState, pod: Pod, result: Any) -> Status:
        self.rec.calls.append("after-prefilter")
        return Status()


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {enabled: [{name: Transformer}]}
    reserve: {enabled: [{name: Probe}]}
    permit: {enabled: [{name: Probe}]}
    bind: {enabled: [{name: Probe}], disabled: [{name: '*'}]}
    postBind: {enabled: [{name: Probe}]}
"""
# bind: Probe first, then DefaultBinder again after it
CONFIG = CONFIG.replace(
    "bind: {enabled: [{name: Probe}], disabled: [{name: '*'}]}",
    "bind: {enabled: [{name: Probe}, {name: DefaultBinder}], disabled: [{name: '*'}]}",
)


def build(rec: Recorder, nodes: list[Any], pods: list[Pod]) -> tuple[Scheduler, MemoryCluster]:
    registry = in_tree_registry().merge(
        Registry(
            [
                PluginSpec("Probe", lambda args, handle: Probe(rec, handle)),
                PluginSpec("Transformer", lambda args, handle: Transformer(rec)),
            ]
        )
    )
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), registry, cluster, clock=lambda: NOW)
    return scheduler, cluster


async def run(scheduler: Scheduler, cluster: MemoryCluster) -> None:
    await cluster.start(scheduler)
    await scheduler.run_until_idle()


NODES = [make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).build()]


async def test_success_runs_reserve_bind_postbind_and_reports() -> None:
    rec = Recorder()
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    await run(scheduler, cluster)
    assert cluster.pods["default/a"].node_name == "n1"
    assert "reserve:a:n1" in rec.calls and "postbind:a:n1" in rec.calls
    assert cluster.events[-1].reason == "Scheduled"
    assert cluster.events[-1].message == "Successfully assigned default/a to n1"
    assert scheduler.cache.get_pod("default/a") is not None and not scheduler.cache.is_assumed("default/a")


async def test_bind_failure_unreserves_forgets_and_requeues() -> None:
    rec = Recorder(fail_bind={"a"})
    forgotten: list[str] = []
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    scheduler.cache.register_forget_pod_handler(lambda p: forgotten.append(p.key))
    await run(scheduler, cluster)
    assert cluster.pods["default/a"].node_name == ""
    assert rec.calls.index("bind-failed:a") < rec.calls.index("unreserve:a")
    assert forgotten == ["default/a"]
    assert scheduler.cache.get_pod("default/a") is None
    assert scheduler.queue.pending_counts()["backoff"] == 1, "an Error goes to the error backoff queue"
    assert cluster.conditions["default/a"][0] == "SchedulerError"


async def test_reserve_rejection_unreserves_every_plugin_and_reports_unschedulable() -> None:
    rec = Recorder(fail_reserve={"a"})
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    await run(scheduler, cluster)
    assert "unreserve:a" in rec.calls
    reason, message = cluster.conditions["default/a"]
    assert reason == "Unschedulable"
    assert message == "0/1 nodes are available: 1 reserve says no."
    assert scheduler.cache.get_pod("default/a") is None


async def test_permit_wait_is_allowed_by_another_plugin() -> None:
    rec = Recorder(permit={"a": (Status(Code.WAIT), 30.0)})
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    await cluster.start(scheduler)
    assert scheduler.schedule_one()
    await asyncio.sleep(0)
    waiting = rec.handle.waiting_pod("default/a")
    assert waiting is not None and cluster.pods["default/a"].node_name == ""
    waiting.allow("Probe")
    await scheduler.drain()
    assert cluster.pods["default/a"].node_name == "n1"


async def test_permit_timeout_rejects_and_unreserves() -> None:
    rec = Recorder(permit={"a": (Status(Code.WAIT), 0.01)})
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    await run(scheduler, cluster)
    assert cluster.pods["default/a"].node_name == ""
    assert "unreserve:a" in rec.calls
    assert "rejected due to timeout after waiting 0.01s at plugin Probe" in cluster.conditions["default/a"][1]


async def test_pre_error_filter_takes_over_the_failure() -> None:
    rec = Recorder()
    big = make_pod("big").req(cpu="64").build()
    scheduler, cluster = build(rec, NODES, [big])
    seen: list[tuple[str, str]] = []

    def takeover(qpi: Any, status: Status) -> bool:
        seen.append((qpi.pod.name, status.message))
        return True

    post_calls: list[str] = []
    rec.handle.register_error_handler_filters(takeover, lambda qpi, st: post_calls.append(qpi.pod.name) or False)
    await run(scheduler, cluster)
    assert seen == [
        (
            "big",
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        )
    ]
    assert "default/big" not in cluster.conditions, "the default handler must be skipped"
    assert post_calls == ["big"], "post filters run after the failure"


async def test_before_pre_filter_transformer_replaces_the_pod_for_the_cycle() -> None:
    rec = Recorder(replace_pod_cpu=100)
    pod = make_pod("a").req(cpu="64").build()  # does not fit as written; fits as transformed
    scheduler, cluster = build(rec, NODES, [pod])
    await run(scheduler, cluster)
    assert "prefilter-saw-cpu:100" in rec.calls and "after-prefilter" in rec.calls
    assert cluster.pods["default/a"].node_name == "n1"


async def test_failing_transformer_aborts_the_cycle_naming_the_plugin() -> None:
    rec = Recorder(transformer_status=error("transformer broke"))
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    await run(scheduler, cluster)
    reason, message = cluster.conditions["default/a"]
    assert reason == "SchedulerError"
    assert message == "transformer broke"
    outcome = scheduler.outcomes["default/a"]
    assert outcome.node is None


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param(
            [make_pod("p1").req(cpu="3").build(), make_pod("p2").req(cpu="3").build()],
            {"default/p1": "n1", "default/p2": None},
            id="second-pod-sees-first-pods-assumed-resources",
        ),
        pytest.param(
            [make_pod("low").req(cpu="3").build(), make_pod("high").req(cpu="3").priority(100).build()],
            {"default/high": "n1", "default/low": None},
            id="priority-sort-schedules-high-first",
        ),
    ],
)
async def test_queue_order_and_assumed_accounting(pods: list[Pod], want: dict[str, str | None]) -> None:
    scheduler, cluster = build(Recorder(), NODES, pods)
    await run(scheduler, cluster)
    got = {key: (cluster.pods[key].node_name or None) for key in want}
    assert got == want


async def test_plugins_see_every_pod_event_after_the_cache() -> None:
    rec = Recorder()
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    seen: list[tuple[str, str, bool]] = []

    def handler(event: Any, old: Any, new: Any) -> None:
        pod = new or old
        seen.append((str(event), pod.name, scheduler.cache.get_pod(pod.key) is not None))

    rec.handle.watch_pods(handler)
    await run(scheduler, cluster)
    await cluster.delete_pod(cluster.pods["default/a"], reason="test")
    assert seen == [("ADDED", "a", False), ("MODIFIED", "a", True), ("DELETED", "a", False)]


async def test_object_events_reach_the_queue_after_plugin_handlers() -> None:
    from koord_scheduler.framework.types import ClusterEvent, EventResource, EventType, ObjectKind

    rec = Recorder()
    scheduler, _ = build(rec, NODES, [])
    order: list[str] = []
    kind = ObjectKind("NodeMetric", "slo.koordinator.sh", "v1alpha1", "nodemetrics", False, lambda raw: raw)
    rec.handle.watch(kind, lambda ev, old, new: order.append("plugin"))
    original = scheduler.queue.on_cluster_event

    def spy(event: ClusterEvent, old: object, new: object) -> None:
        order.append(f"queue:{event.resource.value}:{int(event.action)}")
        original(event, old, new)

    scheduler.queue.on_cluster_event = spy  # type: ignore[method-assign]
    scheduler.on_object("NodeMetric", EventType.MODIFIED, {"a": 1}, {"a": 2})
    scheduler.on_object("SomethingElse", EventType.ADDED, None, {})
    assert order == ["plugin", f"queue:{EventResource.NODE_METRIC.value}:1024"]


@pytest.mark.parametrize("warm_up_error", [False, True], ids=["warm-up-ok", "warm-up-raises-is-logged"])
async def test_plugins_warm_up_once_after_the_listing_before_the_first_cycle(warm_up_error: bool) -> None:
    rec = Recorder(warm_up_error=warm_up_error)
    scheduler, cluster = build(rec, NODES, [make_pod("a").req(cpu="1").build()])
    await run(scheduler, cluster)
    assert rec.calls[:2] == ["warm_up:1-nodes", "prefilter-saw-cpu:1000"]
    await scheduler.run_until_idle()
    assert [c for c in rec.calls if c.startswith("warm_up")] == ["warm_up:1-nodes"]
    assert {o.pod_key: o.node for o in scheduler.outcomes.values()} == {"default/a": "n1"}


async def test_a_deleted_pods_outcome_is_forgotten() -> None:
    """A long run keeps one outcome per existing pod, not one per pod ever seen."""
    scheduler, cluster = build(
        Recorder(), NODES, [make_pod("a").req(cpu="1").build(), make_pod("b").req(cpu="1").build()]
    )
    await run(scheduler, cluster)
    assert set(scheduler.outcomes) == {"default/a", "default/b"}
    await cluster.delete_pod(cluster.pods["default/a"], reason="test")
    assert set(scheduler.outcomes) == {"default/b"}
