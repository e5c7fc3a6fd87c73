"""The room index (LowNodeLoad's nodeFit fast path) plans exactly what the linear scan plans."""

from __future__ import annotations

import random

import pytest

from apis.extension import PriorityClass
from koord_scheduler.descheduler.lownodeload.balance import PoolOptions, assess_pool, plan_evictions
from koord_scheduler.descheduler.lownodeload.policy import NodeLoad, PodLoad, fill_thresholds
from koord_scheduler.descheduler.lownodeload.room_index import INF, RoomIndex


def _pool(rng: random.Random) -> list[NodeLoad]:
    nodes = []
    for i in range(rng.randint(2, 40)):
        pods = tuple(
            PodLoad(
                "default",
                f"p{i}-{j}",
                {"cpu": rng.randint(100, 3000), "memory": rng.randint(1, 8) << 30},
                priority_class=rng.choice([PriorityClass.PROD, PriorityClass.BATCH]),
                priority=rng.randint(0, 3),
                creation_timestamp=float(rng.randint(0, 5)),
            )
            for j in range(rng.randint(0, 8))
        )
        usage = {
            "cpu": sum(p.usage["cpu"] for p in pods if p.usage),
            "memory": sum(p.usage["memory"] for p in pods if p.usage),
            "pods": len(pods),
        }
        prod = [p for p in pods if p.prod]
        prod_usage = {
            "cpu": sum(p.usage["cpu"] for p in prod if p.usage),
            "memory": sum(p.usage["memory"] for p in prod if p.usage),
            "pods": len(prod),
        }
        nodes.append(
            NodeLoad(
                f"n{i}",
                {"cpu": 16000, "memory": 64 << 30, "pods": 110},
                usage,
                prod_usage,
                pods,
                unschedulable=rng.random() < 0.1,
            )
        )
    return nodes


@pytest.mark.parametrize("seed", range(40))
def test_room_index_plans_what_the_linear_scan_plans(seed: int) -> None:
    rng = random.Random(seed)
    nodes = _pool(rng)
    thresholds = fill_thresholds(
        {"cpu": rng.choice([20, 30, 45]), "memory": 50},
        {"cpu": 60, "memory": 80},
        {"cpu": 20} if rng.random() < 0.5 else {},
        {"cpu": 40} if rng.random() < 0.5 else {},
        use_deviation=rng.random() < 0.3,
    )
    banned = {f"n{i}" for i in range(len(nodes)) if rng.random() < 0.2}  # the scheduler's node fit says no

    def plan(room_index: bool) -> list[tuple[str, str, str]]:
        options = PoolOptions(thresholds, use_deviation=False, room_index=room_index)
        assessment = assess_pool(nodes, options)
        planned = plan_evictions(
            assessment,
            options,
            abnormal=assessment.classified.high,
            abnormal_prod=assessment.classified.prod_high,
            fits=lambda pod, node: node not in banned,
        )
        return [(e.pod.key, e.node, e.target) for e in planned]

    assert plan(True) == plan(False)


def test_first_fit_is_leftmost_and_respects_the_predicate() -> None:
    index = RoomIndex([[1, 5], [5, 5], [5, INF], [9, 9]])
    assert index.first_fit([4, 4], lambda i: True) == 1
    assert index.first_fit([4, 4], lambda i: i != 1) == 2
    assert index.first_fit([10, 1], lambda i: True) is None
    index.update(1, [0, 0])
    assert index.first_fit([4, 4], lambda i: True) == 2
