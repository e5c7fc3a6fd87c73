"""Randomized: 1,000 nodes, gangs of random sizes, modes and capacity. Invariant: at the end no gang is
partly bound (a gang has either nothing bound or at least min-available members bound), and no node is
over-committed."""

from __future__ import annotations

import random

import pytest
from gang_harness import gang_pod, node, simulate

NODES = 1000


def cluster(seed: int) -> tuple[list[str], dict[str, tuple[int, list[str]]]]:
    rng = random.Random(seed)
    objects = [node(f"n{i}", cpu=str(rng.choice([1, 1, 2, 4]))) for i in range(NODES)]
    capacity = 0
    gangs: dict[str, tuple[int, list[str]]] = {}
    g = 0
    # Ask for about 1.3 times the cluster's capacity so that some gangs cannot complete.
    total_cpu = sum(int(o.split('"cpu": "')[1].split('"')[0]) for o in objects)
    while capacity < total_cpu * 1.3:
        size = rng.randint(2, 40)
        min_available = rng.randint(1, size)
        cpu = rng.choice([1, 2, 4])
        mode = rng.choice(["Strict", "NonStrict"])
        names = [f"g{g}-{i}" for i in range(size)]
        objects += [gang_pod(n, f"g{g}", min_available, cpu=str(cpu), total_number=str(size), mode=mode) for n in names]
        gangs[f"g{g}"] = (min_available, names)
        capacity += size * cpu
        g += 1
    return objects, gangs


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in (1, 2, 3)])
async def test_no_gang_is_partly_bound(seed: int) -> None:
    objects, gangs = cluster(seed)
    run = await simulate(*objects)
    bound = run.bound()
    complete = 0
    for gang, (min_available, names) in gangs.items():
        placed = len(bound.intersection(names))
        assert placed == 0 or placed >= min_available, f"gang {gang}: {placed} bound, min {min_available}"
        complete += placed >= min_available
    assert 0 < complete < len(gangs), "the seed should give both complete and incomplete gangs"
    for allocation in run.result.after:
        assert allocation.requested.get("cpu", 0) <= allocation.allocatable["cpu"], allocation.name
