"""PodTopologySpread Filter maths per topology value (domain sums, ``matchNum + selfMatch - globalMin > maxSkew``)."""

from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.plugins.podtopologyspread.policy import (
    bucket_sums,
    domain_match_counts,
    domain_reasons,
    eligible_buckets,
)


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


@pytest.mark.parametrize(
    ("value_ids", "node_counts", "eligible", "n_values", "expected"),
    [
        pytest.param([0, 1, 2, 0], [1, 2, 3, 4], [1, 1, 1, 1], 3, ([5, 2, 3], [1, 1, 1]), id="all-eligible"),
        pytest.param([0, 1, 2, 0], [1, 2, 3, 4], [1, 0, 1, 1], 3, ([5, 0, 3], [1, 0, 1]), id="ineligible-node-absent"),
        pytest.param([-1, 1, -1], [9, 2, 9], [0, 1, 0], 2, ([0, 2], [0, 1]), id="nodes-without-key"),
        pytest.param([], [], [], 0, ([], []), id="no-nodes"),
    ],
)
def test_bucket_sums_count_pods_per_domain(
    value_ids: list[int],
    node_counts: list[int],
    eligible: list[int],
    n_values: int,
    expected: tuple[list[int], list[int]],
) -> None:
    match_num, present = expected
    ids = np.array(value_ids, dtype=np.int64)
    mask = np.array(eligible, dtype=np.bool_)
    buckets, found = eligible_buckets(ids, mask, n_values)
    sums = bucket_sums(buckets, np.array(node_counts, dtype=np.int64), n_values)
    assert sums.tolist() == match_num
    assert found.tolist() == [bool(p) for p in present]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bucket_sums_equal_domain_match_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_values = int(rng.integers(1, 6))
    value_ids = rng.integers(-1, n_values, size=300)
    counts = rng.integers(0, 50, size=300)
    eligible = (rng.random(300) < 0.7) & (value_ids >= 0)
    buckets, present = eligible_buckets(value_ids, eligible, n_values)
    expected_num, expected_present = domain_match_counts(value_ids, counts, eligible, n_values)
    assert bucket_sums(buckets, counts, n_values).tolist() == expected_num.tolist()
    assert present.tolist() == expected_present.tolist()
