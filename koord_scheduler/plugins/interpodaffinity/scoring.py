"""InterPodAffinity Score and NormalizeScore maths (``interpodaffinity/scoring.go``). Pure.

PreScore builds ``topologyScore``: per (topology key, value), the sum of
- +weight for each of the incoming pod's preferred affinity terms matched by a pod in that domain,
- -weight for each of its preferred anti-affinity terms matched likewise,
- +hardPodAffinityWeight for each existing pod's required affinity term the incoming pod matches,
- +/-weight for each existing pod's preferred (anti-)affinity term the incoming pod matches.
Score sums the node's values over the keys it carries; NormalizeScore is min-max to [0, 100].
"""

from __future__ import annotations

import numpy as np

from koord_scheduler.framework.snapshot import IntArray
from koord_scheduler.framework.types import MAX_NODE_SCORE


def normalize_min_max(scores: IntArray) -> None:
    """``int64(100 * (float64(s - min) / float64(max - min)))``, 0 everywhere when ``max == min``."""
    if len(scores) == 0:
        return
    low = int(scores.min())
    spread = int(scores.max()) - low
    if spread <= 0:
        scores.fill(0)
        return
    scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(spread))
    scores[:] = np.trunc(scaled).astype(np.int64)
