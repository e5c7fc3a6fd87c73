"""BalancedAllocation maths (kube-scheduler noderesources/balanced_allocation.go), hand-computed rows."""

from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.plugins.balancedallocation.scoring import balanced_allocation

GI = 1024**3


@pytest.mark.parametrize(
    ("requested", "allocatable", "want"),
    [
        pytest.param([[3000, 2 * GI]], [[4000, 8 * GI]], [75], id="sheet-row-4-two-resources"),
        pytest.param([[1000, 4 * GI]], [[3000, 8 * GI]], [91], id="sheet-row-5-truncates-91.67"),
        pytest.param([[2, 1, 3]], [[4, 4, 4]], [79], id="sheet-row-6-three-resources-std"),
        pytest.param([[5000, 4 * GI]], [[4000, 8 * GI]], [75], id="sheet-row-7-fraction-clamped-to-1"),
        pytest.param([[1500, 3 * GI]], [[4000, 8 * GI]], [100], id="sheet-default-profile-equal-fractions"),
        pytest.param([[2, 7, 3]], [[4, 0, 4]], [87], id="three-configured-two-counted-uses-half-diff"),
        pytest.param([[2, 7, 3]], [[4, 0, 0]], [100], id="one-counted-std-0"),
        pytest.param([[2, 7]], [[0, 0]], [100], id="none-counted-std-0"),
        pytest.param([[2]], [[4]], [100], id="single-resource"),
        pytest.param(
            [[3000, 2 * GI], [1000, 4 * GI]],
            [[4000, 8 * GI], [3000, 8 * GI]],
            [75, 91],
            id="rows-independent",
        ),
    ],
)
def test_balanced_allocation(requested: list[list[int]], allocatable: list[list[int]], want: list[int]) -> None:
    got = balanced_allocation(np.array(requested, dtype=np.int64), np.array(allocatable, dtype=np.int64))

    assert got.tolist() == want
