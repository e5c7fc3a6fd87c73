"""Property, on the simulator: in any mix of plain pods, gangs that can complete and gangs that cannot,
every pod that fits and is not in a gang that cannot complete gets bound.

Nodes have 4 cpu. The pods that must bind ask for at most 1 cpu each and together for at most
``nodes * 3`` cpu, so whatever order they are placed in, some node always has room for the next one (were
every node short of 1 cpu, more than ``nodes * 3`` would be placed): only a gang that holds capacity while
others are tried can keep one of them out. A gang that cannot complete has more members than the whole
cluster has room for, each of which fits alone; a gang short of members never starts.
"""

from __future__ import annotations

import asyncio
import math

from gang_harness import ANN, gang_pod, node, pod, pod_group, simulate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.scheduling import podgroup as pg

NODE_CPU = 4
SMALL = {"250m": 250, "500m": 500, "1": 1000}


@st.composite
def mixes(draw: st.DrawFn) -> tuple[int, list[str], set[str], set[str]]:
    """(nodes, objects in file order, pods that must bind, pods that must not)."""
    nodes = draw(st.integers(2, 4))
    budget = nodes * (NODE_CPU - 1) * 1000
    objects: list[str] = []
    must_bind: set[str] = set()
    must_not: set[str] = set()
    pods: list[str] = []
    serial = 0
    for _ in range(draw(st.integers(1, 8))):
        serial += 1
        kind = draw(st.sampled_from(["plain", "gang", "pod-group", "never", "short"]))
        cpu = draw(st.sampled_from(sorted(SMALL)))
        milli = SMALL[cpu]
        mode = draw(st.sampled_from(["Strict", "NonStrict"]))
        if kind == "never":
            size = math.floor(nodes * NODE_CPU * 1000 / milli) + 1
            names = [f"never{serial}-{i}" for i in range(size)]
            pods += [gang_pod(n, f"never{serial}", size, cpu=cpu, mode=mode) for n in names]
            must_not.update(names)
            continue
        if kind == "short":
            names = [f"short{serial}-{i}" for i in range(2)]
            pods += [gang_pod(n, f"short{serial}", 3, cpu=cpu, total_number="3") for n in names]
            must_not.update(names)
            continue
        size = 1 if kind == "plain" else draw(st.integers(1, 4))
        if size * milli > budget:
            continue
        budget -= size * milli
        if kind == "plain":
            names = [f"plain{serial}"]
            pods.append(pod(names[0], cpu=cpu))
        elif kind == "gang":
            names = [f"gang{serial}-{i}" for i in range(size)]
            pods += [gang_pod(n, f"gang{serial}", size, cpu=cpu, mode=mode) for n in names]
        else:
            names = [f"pg{serial}-{i}" for i in range(size)]
            objects.append(pod_group(f"pg{serial}", size, annotations={ANN + "mode": mode}))
            pods += [pod(n, cpu=cpu, labels={pg.LABEL_POD_GROUP: f"pg{serial}"}) for n in names]
        must_bind.update(names)
    order = draw(st.permutations(pods))
    return nodes, [*(node(f"n{i}") for i in range(nodes)), *objects, *order], must_bind, must_not


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(mixes())
def test_pods_that_fit_bind_whatever_gangs_cannot_complete(mix: tuple[int, list[str], set[str], set[str]]) -> None:
    nodes, objects, must_bind, must_not = mix
    run = asyncio.run(simulate(*objects))
    bound = run.bound()
    assert must_bind <= bound, {n: run.placements[n][1] for n in sorted(must_bind - bound)}
    assert not (must_not & bound)
    for allocation in run.result.after:
        assert allocation.requested.get("cpu", 0) <= NODE_CPU * 1000, allocation
    assert len(run.result.after) == nodes
