"""FastHistogram exposes what prometheus_client's Histogram exposes for the same observations (bucket
edges included: a value equal to a bound counts in that bound's bucket), minus the ``_created`` series."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import generate_latest

from koord_scheduler.scheduler.fast_histogram import FastHistogram

BUCKETS = [0.001, 0.002, 0.004, 0.008]
VALUES = [0.0, 0.0005, 0.001, 0.0010001, 0.002, 0.003, 0.008, 0.0081, 5.0, -1.0]


def _exposition(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return sorted(line for line in text.splitlines() if line and "_created" not in line)


@pytest.mark.parametrize("labelnames", [(), ("result", "profile")], ids=["unlabelled", "labelled"])
def test_same_exposition_as_prometheus_client(labelnames: tuple[str, ...]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = FastHistogram("x_seconds", "help text", labelnames, buckets=BUCKETS, registry=ours)
    slow = Histogram("x_seconds", "help text", labelnames, buckets=BUCKETS, registry=theirs)
    for i, v in enumerate(VALUES):
        if labelnames:
            labels = ("scheduled" if i % 3 else "error", "default-scheduler")
            fast.labels(*labels).observe(v)
            slow.labels(*labels).observe(v)
        else:
            fast.observe(v)
            slow.observe(v)
    got = _exposition(ours)
    assert got == _exposition(theirs)
    series = 2 if labelnames else 1
    assert sum("x_seconds_bucket{" in line for line in got) == series * (len(BUCKETS) + 1)


def test_counts_and_sum_read_back() -> None:
    registry = CollectorRegistry()
    hist = FastHistogram("y", "h", ["point"], buckets=[1, 2], registry=registry)
    series = hist.labels("Filter")
    assert hist.labels("Filter") is series
    for v in (0.5, 1, 1.5, 2, 3):
        series.observe(v)
    bucket = {le: registry.get_sample_value("y_bucket", {"point": "Filter", "le": le}) for le in ("1.0", "2.0", "+Inf")}
    assert bucket == {"1.0": 2.0, "2.0": 4.0, "+Inf": 5.0}
    assert registry.get_sample_value("y_count", {"point": "Filter"}) == 5.0
    assert registry.get_sample_value("y_sum", {"point": "Filter"}) == 8.0
    assert registry.get_sample_value("y_count", {"point": "Score"}) is None, "a series appears once used"


def test_misuse_is_refused() -> None:
    hist = FastHistogram("z", "h", ["a"], buckets=[1.0])
    with pytest.raises(ValueError, match="expected 1 label values"):
        hist.labels()
    with pytest.raises(ValueError, match="observe through labels"):
        hist.observe(1.0)
    with pytest.raises(ValueError, match="sorted"):
        FastHistogram("w", "h", buckets=[2.0, 1.0])
    assert FastHistogram("v", "h", buckets=[1.0, math.inf])._bounds == [1.0, math.inf]


def test_duplicate_name_in_a_registry_is_refused() -> None:
    registry = CollectorRegistry()
    FastHistogram("dup_seconds", "h", buckets=[1.0], registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        Histogram("dup_seconds", "h", buckets=[1.0], registry=registry)
