"""NUMA hint generation and the even split of a pod over its NUMA nodes (Koordinator resource_manager.go)."""

from __future__ import annotations

import pytest

from apis.extension.numa import NUMATopologyPolicy
from koord_scheduler.plugins.nodenumaresource.numa_hints import (
    CPUSplit,
    available_numa,
    distribute,
    generate_hints,
    iterate_masks,
    trim_cpu,
)

GI = 1 << 30
ZONES = {0: {"cpu": 8000, "memory": 32 * GI}, 1: {"cpu": 8000, "memory": 32 * GI}}


def test_masks_go_by_size_then_lexicographic() -> None:
    assert list(iterate_masks([0, 1, 2])) == [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize(
    ("requests", "available", "nodes", "split", "want"),
    [
        pytest.param(
            {"cpu": 4000, "memory": 8 * GI},
            ZONES,
            [0],
            CPUSplit(),
            ({0: {"cpu": 4000, "memory": 8 * GI}}, []),
            id="one-node",
        ),
        pytest.param(
            {"cpu": 12000},
            {0: {"cpu": 10000}, 1: {"cpu": 3000}},
            [0, 1],
            CPUSplit(),
            ({0: {"cpu": 9000}, 1: {"cpu": 3000}}, []),
            id="least-available-first-then-rest",
        ),
        pytest.param(
            {"cpu": 6000},
            ZONES,
            [0, 1],
            CPUSplit(True, True, 2),
            ({0: {"cpu": 2000}, 1: {"cpu": 4000}}, []),
            id="full-pcpus-whole-cores",
        ),
        pytest.param(
            {"cpu": 3500},
            ZONES,
            [0, 1],
            CPUSplit(),
            ({0: {"cpu": 1750}, 1: {"cpu": 1750}}, []),
            id="milli-cpu-halves",
        ),
        pytest.param(
            {"cpu": 20000, "ephemeral-storage": 5},
            ZONES,
            [0, 1],
            CPUSplit(),
            ({0: {"cpu": 8000}, 1: {"cpu": 8000}}, ["Insufficient NUMA cpu"]),
            id="not-enough-and-unknown-resource-ignored",
        ),
    ],
)
def test_distribute(
    requests: dict[str, int],
    available: dict[int, dict[str, int]],
    nodes: list[int],
    split: CPUSplit,
    want: tuple[dict[int, dict[str, int]], list[str]],
) -> None:
    assert distribute(requests, available, nodes, split) == want


def test_available_never_below_zero() -> None:
    assert available_numa({0: {"cpu": 4000}}, {0: {"cpu": 5000}}) == {0: {"cpu": 0}}


def test_trim_caps_cpu_at_bindable_cpus() -> None:
    assert trim_cpu(ZONES, {0: 2, 1: 8}) == {0: {"cpu": 2000, "memory": 32 * GI}, 1: {"cpu": 8000, "memory": 32 * GI}}


def _fits(requests: dict[str, int], available: dict[int, dict[str, int]]):
    def feasible(nodes: tuple[int, ...]) -> bool:
        return not distribute(requests, available, list(nodes))[1]

    return feasible


def _hints(requests: dict[str, int], available: dict[int, dict[str, int]], policy: NUMATopologyPolicy):
    out = generate_hints(
        [0, 1],
        ZONES,
        available,
        requests,
        policy=policy,
        feasible=_fits(requests, available),
        score=lambda used, total: sum(used.values()) % 97,
    )
    return {name: [(h.mask, h.preferred) for h in listed] for name, listed in out.items()}


@pytest.mark.parametrize(
    ("requests", "available", "policy", "want"),
    [
        pytest.param(
            {"cpu": 4000, "memory": GI},
            ZONES,
            NUMATopologyPolicy.SINGLE_NUMA_NODE,
            {"cpu": [(1, True), (2, True), (3, False)], "memory": [(1, True), (2, True), (3, False)]},
            id="fits-one-node",
        ),
        pytest.param(
            {"cpu": 12000},
            ZONES,
            NUMATopologyPolicy.SINGLE_NUMA_NODE,
            {"cpu": [(3, True)]},
            id="needs-both",
        ),
        pytest.param(
            {"cpu": 4000},
            ZONES,
            NUMATopologyPolicy.RESTRICTED,
            {"cpu": [(1, True), (2, True), (3, True)]},
            id="restricted-prefers-every-feasible",
        ),
        pytest.param(
            {"cpu": 4000},
            {0: {"cpu": 0, "memory": 32 * GI}, 1: {"cpu": 8000, "memory": 32 * GI}},
            NUMATopologyPolicy.SINGLE_NUMA_NODE,
            {"cpu": [(2, True)]},
            id="node-lacking-cpu-never-in-a-hint",
        ),
        pytest.param(
            {"cpu": 40000},
            ZONES,
            NUMATopologyPolicy.SINGLE_NUMA_NODE,
            {"cpu": []},
            id="no-set-fits-empty-list",
        ),
        pytest.param(
            {"nvidia.com/gpu": 1},
            ZONES,
            NUMATopologyPolicy.SINGLE_NUMA_NODE,
            {},
            id="resource-not-in-zones-no-hints",
        ),
    ],
)
def test_generate_hints(
    requests: dict[str, int],
    available: dict[int, dict[str, int]],
    policy: NUMATopologyPolicy,
    want: dict[str, list[tuple[int, bool]]],
) -> None:
    assert _hints(requests, available, policy) == want
