"""Which ``oom_score_adj`` a container gets (Koordinator ``runtimehooks/hooks/oomscoreadj/helper.go``
``getOOMScoreAdjForContainer``), as a pure function.

``koordinator.sh/oom-score-adj-spec`` is a JSON object of container name → integer and wins for the
containers it names; ``koordinator.sh/oom-score-adj`` (an integer string) is the pod's default. Values must
be in [-1000, 1000]. The sandbox (pause) container is never touched: the runtime owns its score.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

NAME = "OOMScoreAdj"
ANNOTATION_OOM_SCORE_ADJ = "koordinator.sh/oom-score-adj"
ANNOTATION_OOM_SCORE_ADJ_SPEC = "koordinator.sh/oom-score-adj-spec"
OOM_SCORE_ADJ_RANGE = (-1000, 1000)


class OOMScoreAdjError(ValueError):
    """The pod's annotation is malformed or out of range; the message names it."""


def oom_score_adj(annotations: Mapping[str, str], container: str) -> int | None:
    """The value for ``container``; ``None`` when neither annotation sets one."""
    value: int | None = None
    spec = annotations.get(ANNOTATION_OOM_SCORE_ADJ_SPEC)
    where = f"annotation {ANNOTATION_OOM_SCORE_ADJ_SPEC}"
    if spec:
        try:
            by_container = json.loads(spec)
        except ValueError as err:
            raise OOMScoreAdjError(f"{where}: not JSON: {err}") from None
        if not isinstance(by_container, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in by_container.values()
        ):
            raise OOMScoreAdjError(f"{where}: want an object of container name to integer")
        value = by_container.get(container)
    if value is None and annotations.get(ANNOTATION_OOM_SCORE_ADJ):
        where = f"annotation {ANNOTATION_OOM_SCORE_ADJ}"
        raw = annotations[ANNOTATION_OOM_SCORE_ADJ]
        try:
            value = int(raw.strip())
        except ValueError:
            raise OOMScoreAdjError(f"{where}: {raw!r} is not an integer") from None
    low, high = OOM_SCORE_ADJ_RANGE
    if value is not None and not low <= value <= high:
        raise OOMScoreAdjError(f"{where}: {value} for container {container!r} is outside [{low}, {high}]")
    return value
