"""Decaying histograms: Koordinator's ``pkg/util/histogram`` (itself the Kubernetes VPA recommender's).

A histogram keeps a weight per bucket; :meth:`Histogram.percentile` returns the **end** of the bucket in
which the cumulative weight first reaches ``p * total`` (the start of the next bucket), so it never
under-estimates. Buckets are linear (tests) or exponential: bucket ``i > 0`` starts at
``first * (ratio^i - 1) / (ratio - 1)``.

:class:`DecayingHistogram` weighs a sample taken at ``t`` by ``2^((t - reference) / halfLife)``: every
half-life the new samples count twice as much as the old ones. The reference timestamp starts at Go's
zero time and jumps forward (rounded to a multiple of the half-life since Go's zero time, all weights
scaled down to match) whenever a sample would need a factor above ``2^100``.

Checkpoints (:class:`HistogramCheckpoint`) store the weights scaled so the largest bucket is 10000,
as integers, plus the total weight and the reference timestamp; loading one adds its weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

MAX_CHECKPOINT_WEIGHT = 10000
MAX_DECAY_EXPONENT = 100
GO_ZERO_TIME = -62135596800.0
"""Go's zero ``time.Time`` (0001-01-01T00:00:00Z) in seconds since the Unix epoch."""


class HistogramOptions(Protocol):
    @property
    def num_buckets(self) -> int: ...
    @property
    def epsilon(self) -> float: ...
    def find_bucket(self, value: float) -> int: ...
    def bucket_start(self, bucket: int) -> float: ...


@dataclass(frozen=True, slots=True)
class LinearOptions:
    """Buckets of ``bucket_size`` from 0 to ``max_value``."""

    max_value: float
    bucket_size: float
    epsilon: float

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.bucket_size <= 0 or self.epsilon <= 0:
            raise ValueError("maxValue, bucketSize and epsilon must be positive")

    @property
    def num_buckets(self) -> int:
        return math.ceil(self.max_value / self.bucket_size) + 1

    def find_bucket(self, value: float) -> int:
        return min(max(int(value / self.bucket_size), 0), self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        _check_bucket(bucket, self.num_buckets)
        return bucket * self.bucket_size


@dataclass(frozen=True, slots=True)
class ExponentialOptions:
    """Buckets growing by ``ratio`` from ``first_bucket_size`` up to ``max_value``."""

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float
    num_buckets: int = field(init=False)

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.first_bucket_size <= 0 or self.ratio <= 1 or self.epsilon <= 0:
            raise ValueError("maxValue, firstBucketSize and epsilon must be > 0.0, ratio must be > 1.0")
        count = math.ceil(_log(self.ratio, self.max_value * (self.ratio - 1) / self.first_bucket_size + 1)) + 1
        object.__setattr__(self, "num_buckets", count)

    def find_bucket(self, value: float) -> int:
        if value < self.first_bucket_size:
            return 0
        return min(int(_log(self.ratio, value * (self.ratio - 1) / self.first_bucket_size + 1)), self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        _check_bucket(bucket, self.num_buckets)
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (self.ratio**bucket - 1) / (self.ratio - 1)


def _log(base: float, x: float) -> float:
    return math.log(x) / math.log(base)


def _check_bucket(bucket: int, count: int) -> None:
    if not 0 <= bucket < count:
        raise IndexError(f"index {bucket} out of range [0..{count - 1}]")


@dataclass(frozen=True, slots=True)
class HistogramCheckpoint:
    """``histogram.HistogramCheckpoint``: ``reference_timestamp`` in seconds since the epoch."""

    reference_timestamp: float
    bucket_weights: dict[int, int]
    total_weight: float


class Histogram:
    """Weights per bucket (``histogram.histogram``); not thread-safe."""

    __slots__ = ("_max", "_min", "options", "total_weight", "weights")

    def __init__(self, options: HistogramOptions) -> None:
        self.options = options
        self.weights = [0.0] * options.num_buckets
        self.total_weight = 0.0
        self._min = options.num_buckets - 1
        self._max = 0

    def add_sample(self, value: float, weight: float) -> None:
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        bucket = self.options.find_bucket(value)
        self.weights[bucket] += weight
        self.total_weight += weight
        if bucket < self._min and self.weights[bucket] >= self.options.epsilon:
            self._min = bucket
        if bucket > self._max and self.weights[bucket] >= self.options.epsilon:
            self._max = bucket

    def is_empty(self) -> bool:
        return self.weights[self._min] < self.options.epsilon

    def percentile(self, p: float) -> float:
        """The end of the bucket where the cumulative weight reaches ``p`` of the total; 0 when empty."""
        if self.is_empty():
            return 0.0
        partial = 0.0
        threshold = p * self.total_weight
        bucket = self._min
        while bucket < self._max:
            partial += self.weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.options.num_buckets - 1:
            return self.options.bucket_start(bucket + 1)
        return self.options.bucket_start(bucket)

    def scale(self, factor: float) -> None:
        if factor < 0:
            raise ValueError("scale factor must be non-negative")
        for bucket in range(self._min, self._max + 1):
            self.weights[bucket] *= factor
        self.total_weight *= factor
        self._update_min_max()

    def _update_min_max(self) -> None:
        epsilon, last = self.options.epsilon, self.options.num_buckets - 1
        while self.weights[self._min] < epsilon and self._min < last:
            self._min += 1
        while self.weights[self._max] < epsilon and self._max > 0:
            self._max -= 1

    def save(self) -> tuple[dict[int, int], float]:
        """The scaled integer weights (largest bucket = 10000) and the total weight."""
        largest = max(self.weights[self._min : self._max + 1], default=0.0)
        weights: dict[int, int] = {}
        if largest > 0:
            ratio = MAX_CHECKPOINT_WEIGHT / largest
            for bucket in range(self._min, self._max + 1):
                scaled = math.floor(self.weights[bucket] * ratio + 0.5)
                if scaled > 0:
                    weights[bucket] = scaled
        return weights, self.total_weight

    def load(self, weights: dict[int, int], total_weight: float) -> None:
        """Add the weights of a checkpoint. Raises ``ValueError`` for a malformed one."""
        if total_weight < 0:
            raise ValueError(f"cannot load checkpoint with negative weight {total_weight}")
        for bucket, weight in weights.items():
            if bucket >= self.options.num_buckets:
                raise ValueError(f"checkpoint has bucket {bucket} beyond the histogram's {self.options.num_buckets}")
            if bucket < 0 or weight < 0:
                raise ValueError(f"checkpoint has a negative bucket or weight at {bucket}")
        total = sum(weights.values())
        if total == 0:
            return
        ratio = total_weight / total
        for bucket, weight in weights.items():
            self._min = min(self._min, bucket)
            self._max = max(self._max, bucket)
            self.weights[bucket] += weight * ratio
        self.total_weight += total_weight


def go_round(t: float, step: float) -> float:
    """Go's ``Time.Round(step)``: the nearest multiple of ``step`` since Go's zero time, halves up."""
    since = t - GO_ZERO_TIME
    return GO_ZERO_TIME + math.floor(since / step + 0.5) * step


class DecayingHistogram:
    """A :class:`Histogram` whose samples lose half their weight every ``half_life`` seconds."""

    __slots__ = ("half_life", "histogram", "reference")

    def __init__(self, options: HistogramOptions, half_life: float) -> None:
        if half_life <= 0:
            raise ValueError("half life must be positive")
        self.histogram = Histogram(options)
        self.half_life = half_life
        self.reference = GO_ZERO_TIME

    def add_sample(self, value: float, weight: float, t: float) -> None:
        self.histogram.add_sample(value, weight * self._decay_factor(t))

    def percentile(self, p: float) -> float:
        return self.histogram.percentile(p)

    def is_empty(self) -> bool:
        return self.histogram.is_empty()

    def _shift_reference(self, new_reference: float) -> None:
        new_reference = go_round(new_reference, self.half_life)
        exponent = math.floor((self.reference - new_reference) / self.half_life + 0.5)
        self.histogram.scale(math.ldexp(1.0, max(exponent, -2000)))
        self.reference = new_reference

    def _decay_factor(self, t: float) -> float:
        if t > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            self._shift_reference(t)
        return float(2 ** ((t - self.reference) / self.half_life))

    def save(self) -> HistogramCheckpoint:
        weights, total = self.histogram.save()
        return HistogramCheckpoint(self.reference, weights, total)

    def load(self, checkpoint: HistogramCheckpoint) -> None:
        self.histogram.load(checkpoint.bucket_weights, checkpoint.total_weight)
        self.reference = checkpoint.reference_timestamp
