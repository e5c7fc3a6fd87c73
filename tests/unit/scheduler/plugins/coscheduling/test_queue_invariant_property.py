"""Property: after any sequence of cluster events and scheduling steps, every pending pod is in exactly one
place (activeQ, backoffQ, unschedulable, gated, or in flight with a binding cycle), and nothing else is
queued (:func:`koord_scheduler.scheduler.invariants.queue_violations`).

Hypothesis drives a scheduler with Coscheduling on the in-memory cluster: plain pods and gangs (Strict and
NonStrict, some that cannot complete, some short of members, some behind scheduling gates) are added,
updated, ungated and deleted; nodes come, change and go; the loop runs a few cycles at a time, yielding
or not; waiting members are rejected, bindings fail, the clock moves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from gang_harness import CONFIG, NOW, gang_pod, node, pod, pod_group
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from apis.config import parse_scheduler_config
from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_node, parse_pod
from apis.core.types import Pod
from apis.scheduling import podgroup as pg
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.invariants import queue_violations
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.source import EventType

CPUS = st.sampled_from(["500m", "1", "1", "2", "2", "3", "5"])


@dataclass(slots=True)
class FlakyCluster(MemoryCluster):
    """The in-memory cluster, whose next bind of a pod in ``fail_binds`` fails once."""

    fail_binds: set[str] = field(default_factory=set)

    async def bind(self, pod: Pod, node_name: str) -> None:
        if pod.key in self.fail_binds:
            self.fail_binds.discard(pod.key)
            raise ClusterError(f"injected bind failure for {pod.key}")
        await MemoryCluster.bind(self, pod, node_name)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = Clock()
        self.cluster = FlakyCluster()
        self.scheduler = build_scheduler(
            parse_scheduler_config(CONFIG), in_tree_registry(), self.cluster, clock=self.clock
        )
        self.cluster.load([parse_node(json.loads(node(f"n{i}"))) for i in range(3)], [])
        self.run(self.cluster.start(self.scheduler, list(self.scheduler.watched_kinds.values())))
        self.scheduler.warm_up()
        self.serial = 0
        self.nodes = 3
        self.pod_groups: dict[str, pg.PodGroupRecord] = {}

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(cancel_all())
        self.loop.close()

    # ----- the cluster -----

    def _add(self, text: str) -> None:
        new = parse_pod(json.loads(text))
        self.cluster.pods[new.key] = new
        self.scheduler.on_pod(EventType.ADDED, None, new)

    def _modify(self, old: Pod, new: Pod) -> None:
        self.cluster.pods[new.key] = new
        self.scheduler.on_pod(EventType.MODIFIED, old, new)

    def _pick(self, index: int, *, pending: bool) -> Pod | None:
        pods = sorted(
            (p for p in self.cluster.pods.values() if bool(p.node_name) != pending),
            key=lambda p: p.key,
        )
        return pods[index % len(pods)] if pods else None

    def _next(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    @rule(cpu=CPUS, gated=st.booleans())
    def add_plain(self, cpu: str, gated: bool) -> None:
        self._add(pod(self._next("p"), cpu=cpu, gates=("example.com/hold",) if gated else ()))

    @rule(
        size=st.integers(2, 5),
        short=st.integers(0, 4),
        cpu=CPUS,
        mode=st.sampled_from(["Strict", "NonStrict"]),
        gated=st.integers(0, 2),
        waiting_time=st.sampled_from(["1ms", "600s"]),
    )
    def add_gang(self, *, size: int, short: int, cpu: str, mode: str, gated: int, waiting_time: str) -> None:
        """``short`` > 2: one member fewer than min-available (the gang waits in PreEnqueue)."""
        gang = self._next("g")
        min_available = size + 1 if short > 2 else size - short % 2
        for i in range(size):
            text = gang_pod(
                f"{gang}-{i}",
                gang,
                min_available,
                cpu=cpu,
                mode=mode,
                total_number=str(max(size, min_available)),
                waiting_time=waiting_time,
            )
            if i < gated:
                raw = json.loads(text)
                raw["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
                text = json.dumps(raw)
            self._add(text)

    @rule(size=st.integers(1, 4), min_member=st.integers(1, 4), cpu=CPUS, group_first=st.booleans())
    def add_pod_group_gang(self, size: int, min_member: int, cpu: str, group_first: bool) -> None:
        name = self._next("pg")
        group = pg.parse_pod_group(json.loads(pod_group(name, min_member)))
        if group_first:
            self.scheduler.on_object(pg.KIND, EventType.ADDED, None, group)
        for i in range(size):
            self._add(pod(f"{name}-{i}", cpu=cpu, labels={pg.LABEL_POD_GROUP: name}))
        if not group_first:
            self.scheduler.on_object(pg.KIND, EventType.ADDED, None, group)
        self.pod_groups[name] = group

    @rule(index=st.integers(0, 20), min_member=st.integers(1, 4))
    def change_pod_group(self, index: int, min_member: int) -> None:
        if self.pod_groups:
            name = sorted(self.pod_groups)[index % len(self.pod_groups)]
            old = self.pod_groups[name]
            new = pg.parse_pod_group(json.loads(pod_group(name, min_member)))
            self.scheduler.on_object(pg.KIND, EventType.MODIFIED, old, new)
            self.pod_groups[name] = new

    @rule(index=st.integers(0, 20))
    def delete_pod_group(self, index: int) -> None:
        if self.pod_groups:
            name = sorted(self.pod_groups)[index % len(self.pod_groups)]
            old = self.pod_groups.pop(name)
            self.scheduler.on_object(pg.KIND, EventType.DELETED, old, None)

    @rule(index=st.integers(0, 50))
    def relist_pending(self, index: int) -> None:
        """A watch restart delivers a pending pod again as ADDED."""
        again = self._pick(index, pending=True)
        if again is not None:
            self.scheduler.on_pod(EventType.ADDED, None, again)

    @rule(index=st.integers(0, 50))
    def bound_by_someone_else(self, index: int) -> None:
        old = self._pick(index, pending=True)
        if old is not None and not self.scheduler.cache.is_assumed(old.key) and self.cluster.nodes:
            self._modify(old, replace(old, node_name=sorted(self.cluster.nodes)[0]))

    @rule(index=st.integers(0, 50))
    def relabel_pending(self, index: int) -> None:
        old = self._pick(index, pending=True)
        if old is not None:
            labels = FrozenDict({**old.labels, "touched": str(self.serial)})
            self.serial += 1
            self._modify(old, replace(old, meta=replace(old.meta, labels=labels)))

    @rule(index=st.integers(0, 50))
    def ungate(self, index: int) -> None:
        gated = sorted((p for p in self.cluster.pods.values() if p.scheduling_gates), key=lambda p: p.key)
        if gated:
            old = gated[index % len(gated)]
            self._modify(old, replace(old, scheduling_gates=()))

    @rule(index=st.integers(0, 50), bound=st.booleans())
    def delete_pod(self, index: int, bound: bool) -> None:
        victim = self._pick(index, pending=not bound)
        if victim is not None:
            self.run(self.cluster.delete_pod(victim, reason="test"))

    @rule(cpu=st.sampled_from(["2", "4", "8"]))
    def add_node(self, cpu: str) -> None:
        new = parse_node(json.loads(node(f"n{self.nodes}", cpu=cpu)))
        self.nodes += 1
        self.cluster.nodes[new.name] = new
        self.scheduler.on_node(EventType.ADDED, None, new)

    @rule(index=st.integers(0, 20))
    def relabel_node(self, index: int) -> None:
        names = sorted(self.cluster.nodes)
        if names:
            old = self.cluster.nodes[names[index % len(names)]]
            new = replace(old, meta=replace(old.meta, labels=FrozenDict({**old.labels, "touched": str(self.serial)})))
            self.serial += 1
            self.cluster.nodes[new.name] = new
            self.scheduler.on_node(EventType.MODIFIED, old, new)

    @precondition(lambda self: len(self.cluster.nodes) > 1)
    @rule(index=st.integers(0, 20))
    def remove_node(self, index: int) -> None:
        name = sorted(self.cluster.nodes)[index % len(self.cluster.nodes)]
        old = self.cluster.nodes.pop(name)
        self.scheduler.on_node(EventType.DELETED, old, None)

    # ----- the scheduler -----

    @rule(cycles=st.integers(1, 40), yield_every=st.integers(1, 16))
    def schedule(self, cycles: int, yield_every: int) -> None:
        async def go() -> None:
            for cycle in range(1, cycles + 1):
                if not self.scheduler.schedule_one():
                    break
                if cycle % yield_every == 0:
                    await asyncio.sleep(0)

        self.run(go())

    @rule(cycles=st.integers(1, 40), yield_every=st.integers(1, 16))
    def schedule_more(self, cycles: int, yield_every: int) -> None:
        self.schedule(cycles, yield_every)  # twice as likely as other rules: most steps schedule

    @rule(turns=st.integers(1, 6))
    def let_bindings_run(self, turns: int) -> None:
        async def go() -> None:
            for _ in range(turns):
                await asyncio.sleep(0)

        self.run(go())

    @rule(index=st.integers(0, 50))
    def reject_waiting(self, index: int) -> None:
        waiting = sorted(self.scheduler.waiting_pods, key=lambda w: w.pod.key)
        if waiting:
            waiting[index % len(waiting)].reject("Coscheduling", "rejected by the test")

    @rule()
    def permit_waits_run_out(self) -> None:
        """Gangs added with a 1 ms waiting time: let real time pass so their Permit waits time out."""

        async def go() -> None:
            await asyncio.sleep(0.002)
            for _ in range(3):
                await asyncio.sleep(0)

        self.run(go())

    @rule(index=st.integers(0, 50))
    def fail_next_bind(self, index: int) -> None:
        target = self._pick(index, pending=True)
        if target is not None:
            self.cluster.fail_binds.add(target.key)

    @rule(seconds=st.sampled_from([0.1, 0.5, 1.0, 3.0, 11.0, 400.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds
        self.scheduler.queue.flush()

    @invariant()
    def every_pending_pod_is_in_exactly_one_place(self) -> None:
        pending = [p for p in self.cluster.pods.values() if not p.node_name]
        assert queue_violations(self.scheduler, pending) == []


SchedulerMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
test_queue_invariant_holds_after_random_events = SchedulerMachine.TestCase


async def test_the_check_reports_a_lost_pod_and_a_stale_one() -> None:
    """The check itself: a pending pod the queue never got is lost; a queued pod the cluster no longer has
    as pending is stale (the informer events were withheld from the scheduler here)."""
    cluster = MemoryCluster()
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=lambda: NOW)
    queued = parse_pod(json.loads(pod("queued")))
    lost = parse_pod(json.loads(pod("lost")))
    scheduler.on_pod(EventType.ADDED, None, queued)
    assert queue_violations(scheduler, [queued]) == []
    assert queue_violations(scheduler, [queued, lost]) == ["pending pod default/lost is in 0 places: none"]
    assert queue_violations(scheduler, []) == ["pod default/queued is queued (active) but is not pending"]
