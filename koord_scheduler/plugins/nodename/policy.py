"""NodeName's mask, as a pure function of positions."""

from __future__ import annotations

import numpy as np

from koord_scheduler.framework.snapshot import BoolArray, Positions


def node_name_mask(positions: Positions, requested: str, wanted_position: int | None) -> BoolArray:
    """Which of ``positions`` fit a pod requesting node ``requested`` (``""``: any node).

    ``wanted_position`` is the position of the node named ``requested``, or None when no such node exists
    (then nothing fits).
    """
    if not requested:
        return np.ones(len(positions), dtype=np.bool_)
    if wanted_position is None:
        return np.zeros(len(positions), dtype=np.bool_)
    return np.asarray(positions == wanted_position, dtype=np.bool_)
