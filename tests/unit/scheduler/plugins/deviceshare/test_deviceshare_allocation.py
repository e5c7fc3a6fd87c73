"""GPU choice and scoring (Koordinator ``deviceshare/scoring.go``, ``device_resources.go``
``sortDeviceResourcesByMinor``, ``devicehandler_gpu.go`` ``fillGPUTotalMem``)."""

from __future__ import annotations

import pytest

from apis.config.deviceshare_args import LEAST_ALLOCATED, MOST_ALLOCATED
from koord_scheduler.plugins.deviceshare.allocation import (
    GPUState,
    Scorer,
    allocate_gpus,
    can_allocate,
    fill_memory,
    score_node,
)
from koord_scheduler.plugins.deviceshare.request import GPURequest

CORE = "koordinator.sh/gpu-core"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"
GI = 1 << 30
WEIGHTS = {RATIO: 1, MEM: 1, "koordinator.sh/rdma": 1, "koordinator.sh/fpga": 1}
TOTAL = {CORE: 100, RATIO: 100, MEM: 16 * GI}


def gpu(minor: int, used_pct: int) -> GPUState:
    free = {CORE: 100 - used_pct, RATIO: 100 - used_pct, MEM: (100 - used_pct) * 16 * GI // 100}
    return GPUState(minor, TOTAL, free)


HALF = GPURequest({CORE: 50, RATIO: 50}, 1, True)
WHOLE = GPURequest({CORE: 100, RATIO: 100}, 1, False)
TWO = GPURequest({CORE: 100, RATIO: 100}, 2, False)


@pytest.mark.parametrize(
    "request_,gpus,strategy,minors",
    [
        pytest.param(HALF, [gpu(0, 0)], LEAST_ALLOCATED, [0], id="shared-fits-empty-gpu"),
        pytest.param(HALF, [gpu(0, 60), gpu(1, 0)], LEAST_ALLOCATED, [1], id="shared-skips-gpu-without-room"),
        pytest.param(HALF, [gpu(0, 50), gpu(1, 60)], LEAST_ALLOCATED, [0], id="shared-fits-exactly-half"),
        pytest.param(HALF, [gpu(0, 60), gpu(1, 70)], LEAST_ALLOCATED, None, id="shared-no-gpu-has-room"),
        pytest.param(WHOLE, [gpu(0, 10), gpu(1, 0)], LEAST_ALLOCATED, [1], id="whole-needs-untouched-gpu"),
        pytest.param(WHOLE, [gpu(0, 10), gpu(1, 1)], LEAST_ALLOCATED, None, id="whole-none-untouched"),
        pytest.param(TWO, [gpu(0, 0), gpu(1, 50), gpu(2, 0)], LEAST_ALLOCATED, [0, 2], id="two-whole-gpus"),
        pytest.param(TWO, [gpu(0, 0), gpu(1, 50)], LEAST_ALLOCATED, None, id="two-whole-only-one-free"),
        pytest.param(
            HALF, [gpu(0, 0), gpu(1, 25), gpu(2, 0)], LEAST_ALLOCATED, [0], id="least-allocated-spreads-to-emptiest"
        ),
        pytest.param(
            HALF, [gpu(0, 0), gpu(1, 25), gpu(2, 0)], MOST_ALLOCATED, [1], id="most-allocated-packs-avoiding-fragments"
        ),
        pytest.param(HALF, [gpu(3, 0), gpu(1, 0)], LEAST_ALLOCATED, [1], id="ties-broken-by-lowest-minor"),
    ],
)
def test_allocate(request_: GPURequest, gpus: list[GPUState], strategy: str, minors: list[int] | None) -> None:
    got = allocate_gpus(request_, gpus, Scorer(strategy, WEIGHTS))
    assert (None if got is None else [a.minor for a in got]) == minors
    assert can_allocate(request_, gpus) is (minors is not None), "Filter's check agrees with the allocator"


def test_most_allocated_keeps_a_whole_gpu_for_the_next_pod() -> None:
    """Two half pods then a whole pod on two GPUs: packing fits all three, spreading does not."""
    for strategy, whole_fits in ((MOST_ALLOCATED, True), (LEAST_ALLOCATED, False)):
        used = {0: 0, 1: 0}
        scorer = Scorer(strategy, WEIGHTS)
        for _ in range(2):
            got = allocate_gpus(HALF, [gpu(m, u) for m, u in used.items()], scorer)
            assert got is not None
            used[got[0].minor] += 50
        assert (allocate_gpus(WHOLE, [gpu(m, u) for m, u in used.items()], scorer) is not None) is whole_fits


@pytest.mark.parametrize(
    "strategy,used,expected",
    [
        # ratio: requested = used + 50 of 200; memory (not in the request): requested = used bytes.
        pytest.param(LEAST_ALLOCATED, [0, 0], (75 + 100) // 2, id="least-empty-node"),
        pytest.param(LEAST_ALLOCATED, [50, 50], (25 + 50) // 2, id="least-half-used-node"),
        pytest.param(MOST_ALLOCATED, [0, 0], (25 + 0) // 2, id="most-empty-node"),
        pytest.param(MOST_ALLOCATED, [50, 50], (75 + 50) // 2, id="most-half-used-node"),
    ],
)
def test_node_score(strategy: str, used: list[int], expected: int) -> None:
    gpus = [gpu(i, u) for i, u in enumerate(used)]
    assert score_node(HALF, gpus, Scorer(strategy, WEIGHTS)) == expected


@pytest.mark.parametrize(
    "request_,expected",
    [
        pytest.param({RATIO: 50}, {RATIO: 50, MEM: 8 * GI}, id="ratio-fills-bytes"),
        pytest.param({MEM: 4 * GI}, {MEM: 4 * GI, RATIO: 25}, id="bytes-fill-ratio"),
        pytest.param({MEM: 5 * GI}, {MEM: 5 * GI, RATIO: 31}, id="bytes-ratio-truncated"),
    ],
)
def test_fill_memory(request_: dict[str, int], expected: dict[str, int]) -> None:
    assert fill_memory(request_, TOTAL) == expected
