from __future__ import annotations

import pytest

from koord_scheduler.scheduler.algorithm import num_feasible_nodes_to_find


@pytest.mark.parametrize(
    ("percentage", "num_nodes", "want"),
    [
        pytest.param(None, 50, 50, id="under-100-nodes-all"),
        pytest.param(0, 99, 99, id="99-nodes-all"),
        pytest.param(0, 100, 100, id="adaptive-100-nodes-floor-100"),
        pytest.param(0, 1000, 420, id="adaptive-1000-is-42pct"),
        pytest.param(0, 5000, 500, id="adaptive-5000-is-10pct"),
        pytest.param(0, 6000, 300, id="adaptive-floor-5pct"),
        pytest.param(10, 500, 100, id="explicit-10pct-floor-100"),
        pytest.param(50, 5000, 2500, id="explicit-50pct"),
        pytest.param(100, 5000, 5000, id="all-nodes-selectable"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, num_nodes: int, want: int) -> None:
    assert num_feasible_nodes_to_find(percentage, num_nodes) == want
