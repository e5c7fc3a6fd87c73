"""Koordinator's load anomaly detector (``pkg/descheduler/utils/anomaly/basic_detector.go``) and the per-node
bookkeeping LowNodeLoad does with it (``filterRealAbnormalNodes``, ``resetNodesAsNormal``,
``tryMarkNodesAsNormal``), with an injected clock.

A hot node counts once it has been seen hot more than ``consecutiveAbnormalities`` rounds in a row; it
stays abnormal until ``timeout`` passes or it is seen normal more than ``consecutiveNormalities`` times.
With ``consecutiveAbnormalities: 1`` every hot node counts at once (Koordinator's shortcut). Detectors
of nodes not seen for ``detectorCacheTimeout`` are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

OK: Final = "OK"
ANOMALY: Final = "Anomaly"


@dataclass(slots=True)
class Detector:
    abnormalities: int
    normalities: int
    timeout: float
    state: str = OK
    consecutive_abnormal: int = 0
    consecutive_normal: int = 0
    expiration: float | None = None

    def _clear(self, now: float) -> None:
        self.consecutive_abnormal = self.consecutive_normal = 0
        self.expiration = now + self.timeout if self.state == ANOMALY else None

    def _set(self, state: str, now: float) -> None:
        if self.state != state:
            self.state = state
            self._clear(now)

    def current(self, now: float) -> str:
        if self.state == OK and self.expiration is not None and self.expiration < now:
            self._clear(now)
        elif self.state == ANOMALY and (
            (self.expiration is not None and self.expiration < now) or self.consecutive_normal > self.normalities
        ):
            self._set(OK, now)
        return self.state

    def mark(self, normal: bool, now: float) -> str:
        state = self.current(now)
        if normal:
            self.consecutive_normal += 1
            self.consecutive_abnormal = 0
            if state == ANOMALY and self.consecutive_normal > self.normalities:
                self._set(OK, now)
        else:
            self.consecutive_abnormal += 1
            self.consecutive_normal = 0
            if state == OK and self.consecutive_abnormal > self.abnormalities:
                self._set(ANOMALY, now)
        return self.current(now)

    def reset(self, now: float) -> None:
        self._set(OK, now)


class Detectors:
    """One detector per node (for one pool's node or prod usage)."""

    def __init__(
        self, *, abnormalities: int, normalities: int, timeout: float, cache_timeout: float, clock: Callable[[], float]
    ) -> None:
        self.abnormalities = abnormalities
        self.normalities = normalities
        self.timeout = timeout
        self.cache_timeout = cache_timeout
        self.clock = clock
        self._by_node: dict[str, tuple[Detector, float]] = {}

    def _get(self, node: str, now: float) -> Detector | None:
        entry = self._by_node.get(node)
        if entry is None or now - entry[1] > self.cache_timeout:
            self._by_node.pop(node, None)
            return None
        return entry[0]

    def abnormal(self, nodes: Iterable[str]) -> list[str]:
        """``filterRealAbnormalNodes``: mark each hot node abnormal; those now in the anomaly state."""
        names = list(nodes)
        if self.abnormalities == 1:
            return names
        now = self.clock()
        out = []
        for name in names:
            detector = self._get(name, now) or Detector(self.abnormalities, self.normalities, self.timeout)
            if detector.mark(False, now) == ANOMALY:
                out.append(name)
            self._by_node[name] = (detector, now)
        return out

    def reset(self, nodes: Iterable[str]) -> None:
        """``resetNodesAsNormal``: nodes found cool (or no longer hot) start over."""
        now = self.clock()
        for name in nodes:
            detector = self._get(name, now)
            if detector is not None:
                detector.reset(now)

    def mark_normal(self, nodes: Iterable[str]) -> None:
        """``tryMarkNodesAsNormal``: after a round that acted on them."""
        now = self.clock()
        for name in nodes:
            detector = self._get(name, now)
            if detector is not None:
                detector.mark(True, now)
