"""Decaying histograms: Koordinator's ``pkg/util/histogram`` test facts (options, percentiles, decay,
checkpoints)."""

from __future__ import annotations

import math

import pytest

from koordlet.prediction.histogram import (
    GO_ZERO_TIME,
    DecayingHistogram,
    ExponentialOptions,
    Histogram,
    HistogramCheckpoint,
    LinearOptions,
    go_round,
)

HOUR = 3600.0
START = 1234567890.0
OPTIONS = LinearOptions(10.0, 1.0, 1e-15)


def test_linear_options() -> None:
    o = LinearOptions(5.0, 0.3, 0.001)
    assert (o.epsilon, o.num_buckets, o.bucket_start(0), o.bucket_start(17)) == (0.001, 18, 0.0, 5.1)
    assert [o.find_bucket(v) for v in (-1.0, 0.0, 1.3, 100.0)] == [0, 0, 4, 17]


def test_exponential_options() -> None:
    o = ExponentialOptions(500.0, 40.0, 1.5, 0.001)
    assert o.num_buckets == 6
    assert [o.bucket_start(b) for b in range(6)] == [0.0, 40.0, 100.0, 190.0, 325.0, 527.5]
    assert [o.find_bucket(v) for v in (-1.0, 39.99, 40.0, 100.0, 900.0)] == [0, 0, 1, 2, 5]
    with pytest.raises(IndexError):
        o.bucket_start(6)
    with pytest.raises(ValueError, match=r"ratio must be > 1\.0"):
        ExponentialOptions(500.0, 40.0, 1.0, 0.001)


def test_empty_percentiles_are_zero() -> None:
    h = DecayingHistogram(OPTIONS, HOUR)
    assert [h.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


def test_percentiles_of_a_plain_histogram() -> None:
    h = Histogram(OPTIONS)
    for i in range(1, 5):
        h.add_sample(float(i), float(i))
    got = [h.percentile(p) for p in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)]
    assert got == [2, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5]


def test_simple_decay() -> None:
    """A heavy sample is almost entirely (not 100 %) decayed 20 half-lives later."""
    h = DecayingHistogram(OPTIONS, HOUR)
    h.add_sample(2, 1000, START)
    h.add_sample(1, 1, START + 20 * HOUR)
    assert (h.percentile(0.999), h.percentile(1.0)) == (2, 3)


def test_long_term_decay() -> None:
    """Past 2^100 the reference moves forward and the old sample vanishes."""
    h = DecayingHistogram(OPTIONS, HOUR)
    h.add_sample(2, 1, START)
    h.add_sample(1, 1, START + 101 * HOUR)
    assert h.percentile(1.0) == 2


def test_decaying_percentiles() -> None:
    h = DecayingHistogram(OPTIONS, HOUR)
    for i in range(1, 5):
        h.add_sample(float(i), float(i), START + (i - 1) * HOUR)
    got = [h.percentile(p) for p in (0.0, 0.02, 0.03, 0.10, 0.11, 0.34, 0.35, 1.0)]
    assert got == [2, 2, 3, 3, 4, 4, 5, 5]


def test_no_decay_at_a_fixed_time() -> None:
    h = DecayingHistogram(OPTIONS, HOUR)
    for i in range(1, 5):
        h.add_sample(float(i), float(i), START)
    got = [h.percentile(p / 10) for p in range(11)]
    assert got == [2, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5]


def test_first_sample_moves_the_reference_to_a_rounded_half_life() -> None:
    h = DecayingHistogram(OPTIONS, HOUR)
    assert h.reference == GO_ZERO_TIME
    h.add_sample(2, 1, START + 100 * HOUR)
    assert h.reference == go_round(START + 100 * HOUR, HOUR)
    assert h.reference % HOUR == 0  # hours since Go's zero time are hours since the epoch too


def test_checkpoint_round_trip_keeps_percentiles() -> None:
    h = DecayingHistogram(OPTIONS, HOUR)
    for i in range(1, 5):
        h.add_sample(float(i), float(i), START + (i - 1) * HOUR)
    saved = h.save()
    assert saved.reference_timestamp == h.reference
    assert max(saved.bucket_weights.values()) == 10000
    assert math.isclose(saved.total_weight, h.histogram.total_weight)
    restored = DecayingHistogram(OPTIONS, HOUR)
    restored.load(saved)
    assert [restored.percentile(p / 20) for p in range(21)] == [h.percentile(p / 20) for p in range(21)]


def test_load_checkpoint_fact() -> None:
    """Koordinator's ``TestDecayingHistogramLoadFromCheckpoint``: total 6 in bucket 0."""
    h = DecayingHistogram(OPTIONS, HOUR)
    h.load(HistogramCheckpoint(1514862245.0, {0: 1}, 6.0))
    assert h.reference == 1514862245.0
    assert h.histogram.weights[0] == 6.0 and h.histogram.total_weight == 6.0


@pytest.mark.parametrize(
    ("checkpoint", "want"),
    [
        pytest.param(HistogramCheckpoint(0.0, {99: 1}, 1.0), "beyond", id="bucket-beyond-the-histogram"),
        pytest.param(HistogramCheckpoint(0.0, {-1: 1}, 1.0), "negative", id="negative-bucket"),
        pytest.param(HistogramCheckpoint(0.0, {0: 1}, -1.0), "negative weight", id="negative-total"),
    ],
)
def test_bad_checkpoints_are_refused(checkpoint: HistogramCheckpoint, want: str) -> None:
    with pytest.raises(ValueError, match=want):
        DecayingHistogram(OPTIONS, HOUR).load(checkpoint)
