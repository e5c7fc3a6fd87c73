"""PodTopologySpread Score and NormalizeScore maths (``podtopologyspread/scoring.go``). Pure.

For each scored node: ``raw = math.Round(Σ_c cnt_c * ln(size_c + 2) + (maxSkew_c - 1))`` over the
constraints whose topology key the node carries, where ``cnt_c`` is the number of matching pods in the
node's domain (its own pods for the hostname key) and ``size_c`` the number of domains among the scored
nodes (the number of scored nodes for the hostname key). Nodes missing a required key are "ignored":
raw 0, and normalized to 0.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from koord_scheduler.framework.snapshot import BoolArray, IntArray
from koord_scheduler.framework.types import MAX_NODE_SCORE

FloatArray = npt.NDArray[np.float64]


def topology_normalizing_weight(size: int) -> float:
    """``topologyNormalizingWeight``: ``ln(size + 2)``, so that a domain with fewer values weighs less."""
    return math.log(size + 2)


def add_constraint_score(score: FloatArray, counts: IntArray, has_key: BoolArray, weight: float, max_skew: int) -> None:
    """``score += float64(cnt) * weight + float64(maxSkew - 1)`` where the node carries the key, in
    place and in the same float64 operation order as Go (``scoreForCount``)."""
    term = counts.astype(np.float64) * weight + float(max_skew - 1)
    score += np.where(has_key, term, 0.0)


def go_round(values: FloatArray) -> IntArray:
    """``int64(math.Round(x))``: half away from zero (numpy's ``round`` is half to even). ``x >= 0`` here."""
    whole = np.trunc(values)
    return (whole + (values - whole >= 0.5)).astype(np.int64)


def normalize_scores(scores: IntArray, ignored: BoolArray) -> None:
    """``NormalizeScore`` in place: ignored nodes -> 0; if the largest raw score (at least 0) is 0 every
    other node gets 100; else ``100 * (max + min - s) / max`` with integer division."""
    kept = ~ignored
    if not kept.any():
        scores.fill(0)
        return
    raw = scores[kept]
    top = max(int(raw.max()), 0)
    low = int(raw.min())
    if top == 0:
        scores[kept] = MAX_NODE_SCORE
    else:
        scores[kept] = MAX_NODE_SCORE * (top + low - raw) // top
    scores[ignored] = 0
