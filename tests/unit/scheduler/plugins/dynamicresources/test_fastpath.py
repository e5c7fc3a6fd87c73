"""Equivalence of DynamicResources' fast paths with the plain computation, on random clusters:

- Filter by counting free matching devices (:mod:`...dynamicresources.fastpath`) finds the same feasible
  nodes, node by node, as the full search, before and after devices are allocated;
- a selector's outcome shared between devices that look the same to it (``read_key``) equals the outcome
  evaluated on each device.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest

from apis.core.types import Node
from apis.resource import DeviceId, ResourceClaim, parse_device_class, parse_resource_claim, parse_resource_slice
from koord_scheduler.plugins.dynamicresources.allocator import AllocationError, Allocator, Features
from koord_scheduler.plugins.dynamicresources.cel import Selector, device_value, read_key
from koord_scheduler.plugins.dynamicresources.claims import ClaimTracker
from koord_scheduler.plugins.dynamicresources.fastpath import CountIndex, count_need
from koord_scheduler.plugins.dynamicresources.pools import NodePoolCache, SliceIndex
from koord_scheduler.plugins.dynamicresources.selector_cache import SelectorCache
from tests import dra_builders as dra
from tests.builders import make_node

D = dra.DRIVER
SELECTORS = (
    (),
    (f'device.attributes["{D}"].model == "a"',),
    (f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) >= 0',),
    (f'device.attributes["{D}"].numa == 1', 'device.driver == "gpu.example.com"'),
)


def random_cluster(rng: random.Random) -> tuple[list[Node], SliceIndex]:
    nodes = [make_node(f"n{i}").build() for i in range(12)]
    index = SliceIndex()
    for node in nodes:
        if rng.random() < 0.15:
            continue
        devices = [
            dra.device(
                f"gpu-{d}",
                capacity={"memory": rng.choice(("24Gi", "40Gi", "80Gi"))},
                model=rng.choice("abc"),
                numa=rng.randint(0, 1),
            )
            for d in range(rng.randint(0, 6))
        ]
        count = 2 if rng.random() < 0.1 else 1  # an incomplete pool now and then
        index.upsert(parse_resource_slice(dra.resource_slice(f"{node.name}-gpus", node.name, devices, count=count)))
    if rng.random() < 0.5:  # a pool shared by every node: counted per node by the slow walk
        index.upsert(
            parse_resource_slice(
                dra.resource_slice(
                    "shared",
                    devices=[dra.device(f"net-{d}", model="a", numa=0) for d in range(3)],
                    all_nodes=True,
                    pool="shared",
                )
            )
        )
    return nodes, index


def feasible_by_search(allocator: Allocator, node: Node, claim: ResourceClaim) -> bool:
    return allocator.allocate(node, [claim]) is not None


def feasible_by_count(answer: Callable[[Node], bool | None], node: Node) -> bool:
    return bool(answer(node))


def outcome(decide: Callable[[], bool]) -> bool | str:
    """True/False, or the error (a CEL error both paths must raise at the same device)."""
    try:
        return decide()
    except AllocationError as err:
        return str(err)


@pytest.mark.parametrize("seed", range(25))
def test_counting_finds_the_nodes_the_search_finds(seed: int) -> None:
    rng = random.Random(seed)
    nodes, index = random_cluster(rng)
    classes = {c.name: c for c in [parse_device_class(dra.device_class())]}
    tracker = ClaimTracker()
    pools = NodePoolCache(index, partitionable_devices=False)
    counts = CountIndex(tracker)
    for step in range(6):
        requests = [
            dra.request(f"r{i}", D, *rng.choice(SELECTORS), count=rng.randint(1, 3)) for i in range(rng.randint(1, 2))
        ]
        if len(requests) == 2:
            requests[1]["exactly"]["selectors"] = requests[0]["exactly"].get("selectors", [])
        claim = parse_resource_claim(dra.claim(f"c{step}", *requests))
        need = count_need([claim], classes, device_taints=False)
        assert need is not None
        allocator = Allocator(pools, classes, tracker, features=Features(), selectors=SelectorCache())
        answer = counts.answerer(allocator, need)
        searched = {n.name: outcome(partial(feasible_by_search, allocator, n, claim)) for n in nodes}
        counted = {n.name: outcome(partial(feasible_by_count, answer, n)) for n in nodes}
        assert counted == searched, f"step {step}"
        # Allocate on a feasible node, as Reserve would, and go on with the devices taken.
        fits = [n for n in nodes if searched[n.name] is True]
        if fits:
            results = allocator.allocate(rng.choice(fits), [claim])
            assert results is not None
            done = parse_resource_claim(
                {
                    **dra.claim(f"c{step}", *requests),
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                                    for r in results[0].results
                                ]
                            }
                        }
                    },
                }
            )
            tracker.on_watched(None, done)


def test_multiple_shapes_and_constraints_take_the_search() -> None:
    classes = {c.name: c for c in [parse_device_class(dra.device_class())]}
    mixed = parse_resource_claim(dra.claim("c", dra.request("a", D), dra.request("b", D, SELECTORS[1][0])))
    constrained = parse_resource_claim(
        dra.claim("c", dra.request(count=2), constraints=[{"matchAttribute": f"{D}/numa"}])
    )
    prioritized = parse_resource_claim(dra.claim("c", dra.first_available("g", dra.request("x", D))))
    for claim in (mixed, constrained, prioritized):
        assert count_need([claim], classes, device_taints=False) is None
    plain = parse_resource_claim(dra.claim("c", dra.request(count=2)))
    assert count_need([plain], classes, device_taints=True) is None
    need = count_need([plain], classes, device_taints=False)
    assert need is not None and need.count == 2


@pytest.mark.parametrize(
    "expression",
    [
        'device.driver == "gpu.example.com"',
        f'device.attributes["{D}"].model == "a" && device.attributes["{D}"].numa == 1',
        f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) >= 0',
        'device.attributes["other.example.com"].model == "a"',
        f'"model" in device.attributes["{D}"]',
    ],
)
def test_outcomes_shared_by_read_key_equal_each_devices_own(expression: str) -> None:
    rng = random.Random(7)
    selector = Selector(expression)
    devices = parse_resource_slice(
        dra.resource_slice(
            "s",
            "n1",
            [
                dra.device(
                    f"d{i}",
                    capacity={"memory": rng.choice(("24Gi", "40Gi"))},
                    model=rng.choice("ab"),
                    numa=rng.randint(0, 1),
                    uuid=f"u{i}",
                )
                for i in range(30)
            ],
        )
    ).devices
    by_key: dict[object, object] = {}
    for device in devices:
        try:
            outcome: object = selector.matches(device_value(D, device))
        except Exception as err:
            outcome = str(err)
        if selector.reads is None:
            continue
        key = read_key(selector.reads, D, device)
        assert by_key.setdefault(key, outcome) == outcome
    if selector.reads is not None:
        assert len(by_key) < len(devices)  # the uuid differs, and does not matter
    assert DeviceId(D, "n1", "d0") != DeviceId(D, "n1", "d1")
