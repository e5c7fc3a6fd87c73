"""Gangs that cannot complete: they must not starve the pods that fit, nor be retried without backoff.

The cluster of both findings: three 4-cpu nodes; gang ``big`` of three 3-cpu pods (fits, one per node);
gang ``never`` of four 1-cpu pods with min-available 4 (3 cpu are left: it can never complete); a plain
1-cpu pod and a PodGroup gang ``small`` of two 500m pods (both fit in what ``never`` leaves). Every pod is
there before scheduling starts, as after a restart or a failover with a backlog.
"""

from __future__ import annotations

import asyncio
import json

from gang_harness import CONFIG, NOW, gang_pod, node, pod, pod_group, simulate

from apis.config import parse_scheduler_config
from apis.core.parse import parse_pod
from apis.scheduling import podgroup as pg
from koord_scheduler.app.cluster_file import parse_cluster_text
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler
from koord_scheduler.scheduler.source import EventType

BIG = [f"big-{i}" for i in range(3)]
NEVER = [f"never-{i}" for i in range(4)]
SMALL = ["small-0", "small-1"]


def backlog() -> list[str]:
    return [
        *(node(f"node-{i}") for i in range(1, 4)),
        *(gang_pod(name, "big", 3, cpu="3") for name in BIG),
        *(gang_pod(name, "never", 4, cpu="1") for name in NEVER),
        pod("plain", cpu="1"),
        pod_group("small", 2),
        *(pod(name, cpu="500m", labels={pg.LABEL_POD_GROUP: "small"}) for name in SMALL),
    ]


async def test_pods_that_fit_bind_although_a_gang_that_cannot_complete_is_tried_first() -> None:
    run = await simulate(*backlog())
    assert run.bound() == {*BIG, "plain", *SMALL}
    for name in NEVER:
        node_name, message = run.placements[name]
        assert node_name is None
        assert "Insufficient cpu" in message or 'GangGroup "default/never" gets rejected' in message, message
    # big 3 x 3 cpu, plain 1 cpu, small 2 x 500m; nothing of `never` is left assumed.
    assert sum(a.requested.get("cpu", 0) for a in run.result.after) == 11_000


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def start(objects: list[str], clock: Clock) -> tuple[Scheduler, MemoryCluster]:
    cluster = MemoryCluster()
    scheduler = build_scheduler(parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=clock)
    parsers = {k.kind: k.parse for k in scheduler.watched_kinds.values()}
    loaded = parse_cluster_text("\n---\n".join(objects), extra_kinds=parsers)
    cluster.load(loaded.nodes, loaded.pods, loaded.objects)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    scheduler.warm_up()
    return scheduler, cluster


async def tick(scheduler: Scheduler, *, max_cycles: int = 2000) -> None:
    """One pass of the scheduling loop as :meth:`Scheduler.run` makes it: flush the queue, schedule until
    nothing can be popped (bounded here, so a queue that never empties cannot hang the test), yielding
    to the bindings every ``yield_every`` cycles, then let the bindings run."""
    scheduler.queue.flush()
    for cycle in range(1, max_cycles + 1):
        if not scheduler.schedule_one():
            break
        if cycle % scheduler.options.yield_every == 0:
            await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_gang_that_cannot_complete_backs_off_as_a_group_and_binds_once_capacity_is_freed() -> None:
    clock = Clock(NOW)
    scheduler, cluster = await start(backlog(), clock)
    for _ in range(600):  # one simulated minute, in 100 ms steps
        await tick(scheduler)
        clock.now += 0.1
    bound = {p.name for p in cluster.pods.values() if p.node_name}
    assert bound == {*BIG, "plain", *SMALL}
    # Backoff doubles from 1 s to 10 s: about a dozen rounds in a minute, each trying the 4 members once.
    rounds = max(scheduler.outcomes[f"default/{n}"].attempts for n in NEVER)
    assert rounds <= 15, rounds
    # Every member is somewhere in the queue (none lost), and nothing of the gang is left assumed.
    for name in NEVER:
        assert f"default/{name}" in scheduler.queue
    assert scheduler.cache.counts()["assumed_pods"] == 0

    # Freeing capacity (two pods of `big` go away) binds the gang within its backoff, no restart needed.
    for name in ("big-0", "big-1"):
        await cluster.delete_pod(cluster.pods[f"default/{name}"], reason="test")
    for _ in range(150):
        await tick(scheduler)
        clock.now += 0.1
        if all(cluster.pods[f"default/{n}"].node_name for n in NEVER):
            break
    assert all(cluster.pods[f"default/{n}"].node_name for n in NEVER), scheduler.outcomes


async def test_cluster_churn_does_not_retry_a_gang_faster_than_its_backoff() -> None:
    """Every 500 ms a small pod on node-1 comes and goes: each deletion may help (NodeResourcesFit and
    Coscheduling registered for it), so it moves the gang's members out of the unschedulable pool. They
    still wait out their backoff together: at most one round per backoff (1, 2, 4, 8, then 10 s)."""
    clock = Clock(NOW)
    scheduler, cluster = await start(backlog(), clock)
    churn = parse_pod(json.loads(pod("churn", cpu="10m", node_name="node-1")))
    for step in range(600):
        if step % 5 == 0:
            if churn.key in cluster.pods:
                del cluster.pods[churn.key]
                scheduler.on_pod(EventType.DELETED, churn, None)
            else:
                cluster.pods[churn.key] = churn
                scheduler.on_pod(EventType.ADDED, None, churn)
        await tick(scheduler)
        clock.now += 0.1
    assert {p.name for p in cluster.pods.values() if p.node_name} - {"churn"} == {*BIG, "plain", *SMALL}
    rounds = max(scheduler.outcomes[f"default/{n}"].attempts for n in NEVER)
    assert rounds <= 12, rounds
