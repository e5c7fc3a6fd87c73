import numpy as np
import pytest

from koord_scheduler.plugins.reservation import policy


def a(*rows: list[int]) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


@pytest.mark.parametrize(
    ("request_", "free", "remainder", "allocatable", "restricted", "want"),
    [
        pytest.param([2000], a([0]), a([2000]), a([2000]), [False], [True], id="aligned-fits-in-reservation"),
        pytest.param([3000], a([1000]), a([2000]), a([2000]), [False], [True], id="aligned-takes-rest-from-node"),
        pytest.param(
            [3000],
            a([0], [0]),
            a([2000], [2000]),
            a([2000], [2000]),
            [False, False],
            [False, False],
            id="issue-2731-no-summing-two-reservations",
        ),
        pytest.param(
            [3000],
            a([1000]),
            a([2000]),
            a([2000]),
            [True],
            [False],
            id="restricted-cannot-take-reserved-resource-from-node",
        ),
        pytest.param(
            [2000, 1024],
            a([0, 4096]),
            a([2000, 0]),
            a([2000, 0]),
            [True],
            [True],
            id="restricted-unreserved-resource-from-node",
        ),
        pytest.param([1000], a([0]), a([500]), a([2000]), [False], [False], id="partly-allocated"),
    ],
)
def test_usable(  # noqa: PLR0917 (pytest passes parameters positionally)
    request_: list[int],
    free: np.ndarray,
    remainder: np.ndarray,
    allocatable: np.ndarray,
    restricted: list[bool],
    want: list[bool],
) -> None:
    got = policy.usable(
        np.array(request_, dtype=np.int64), free, remainder, allocatable, np.array(restricted, dtype=np.bool_)
    )
    assert got.tolist() == want


@pytest.mark.parametrize(
    ("request_", "remainder", "allocatable", "want"),
    [
        pytest.param([1000, 0], a([4000, 0]), a([4000, 0]), [25], id="quarter"),
        pytest.param([1000, 0], a([1000, 0]), a([4000, 0]), [100], id="tight-fit-after-allocations"),
        pytest.param([1000, 1024], a([2000, 2048]), a([2000, 4096]), [(50 + 75) // 2], id="two-resources"),
        pytest.param([3000, 0], a([2000, 0]), a([2000, 0]), [0], id="overflow-scores-zero"),
    ],
)
def test_most_allocated_scores(
    request_: list[int], remainder: np.ndarray, allocatable: np.ndarray, want: list[int]
) -> None:
    assert policy.most_allocated_scores(np.array(request_), remainder, allocatable).tolist() == want


@pytest.mark.parametrize(
    ("positions", "orders", "scores", "want"),
    [
        pytest.param([5, 5, 7], [0, 0, 0], [10, 90, 50], [1, 2], id="tightest-fit-wins"),
        pytest.param([5, 5], [3, 0], [10, 90], [0], id="order-label-beats-score"),
        pytest.param([5, 5], [3, 1], [10, 10], [1], id="lowest-order-wins"),
        pytest.param([5, 5], [0, 0], [40, 40], [0], id="tie-first-row"),
        pytest.param([], [], [], [], id="empty"),
    ],
)
def test_nominate_per_node(positions: list[int], orders: list[int], scores: list[int], want: list[int]) -> None:
    got = policy.nominate_per_node(
        np.array(positions, dtype=np.intp), np.array(orders, dtype=np.int64), np.array(scores, dtype=np.int64)
    )
    assert got.tolist() == want


def pos(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.intp)


@pytest.mark.parametrize(
    ("positions", "chosen", "orders", "scores", "want"),
    [
        pytest.param(pos(0, 1, 2), pos(), [], [], [0, 0, 0], id="no-reservation-node"),
        # Koordinator scoring.go: the lowest order scores 1000, the others their MostAllocated score, /1000*100.
        pytest.param(pos(0, 1, 2), pos(0, 2), [2000, 1000], [80, 40], [8, 0, 100], id="lowest-order-preferred"),
        pytest.param(pos(0, 1), pos(0, 1), [0, 5], [90, 10], [9, 100], id="any-order-beats-no-order"),
        pytest.param(pos(0, 1, 2), pos(1, 2), [0, 0], [50, 25], [0, 100, 50], id="no-orders-tightest-fit"),
        pytest.param(pos(0, 1), pos(0, 1), [7, 7], [10, 90], [100, 9], id="order-tie-first-node"),
        pytest.param(pos(0, 1), pos(0, 1), [0, 0], [0, 0], [0, 0], id="all-zero-stay-zero"),
        pytest.param(pos(1), pos(0, 1), [3, 9], [50, 50], [100], id="preferred-among-feasible-only"),
    ],
)
def test_node_scores(
    positions: np.ndarray, chosen: np.ndarray, orders: list[int], scores: list[int], want: list[int]
) -> None:
    got = policy.node_scores(
        positions,
        chosen,
        chosen_orders=np.array(orders, dtype=np.int64),
        chosen_scores=np.array(scores, dtype=np.int64),
    )
    assert got.tolist() == want
