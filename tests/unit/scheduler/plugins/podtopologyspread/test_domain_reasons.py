"""The Filter criterion per topology value (``matchNum + selfMatch - globalMin > maxSkew``), table-tested."""

from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.plugins.podtopologyspread.policy import domain_reasons


@pytest.mark.parametrize(
    ("match_num", "self_match", "global_min", "max_skew", "expected"),
    [
        pytest.param([], 1, 0, 1, [1], id="no-domains-only-the-missing-key-slot"),
        pytest.param([0, 0, 0], 1, 0, 1, [1, 0, 0, 0], id="balanced-all-pass"),
        pytest.param([1, 0, 0], 1, 0, 1, [1, 2, 0, 0], id="one-domain-at-skew-fails"),
        pytest.param([1, 0, 0], 0, 0, 1, [1, 0, 0, 0], id="pod-not-matching-itself-passes"),
        pytest.param([5, 3, 4], 1, 3, 2, [1, 2, 0, 0], id="skew-measured-from-global-min"),
        pytest.param([7, 7], 1, 2**31 - 1, 1, [1, 0, 0], id="no-eligible-domain-min-is-maxint32"),
    ],
)
def test_domain_reasons(
    match_num: list[int], self_match: int, global_min: int, max_skew: int, expected: list[int]
) -> None:
    table = domain_reasons(np.array(match_num, dtype=np.int64), self_match, global_min, max_skew)
    assert table.tolist() == expected
