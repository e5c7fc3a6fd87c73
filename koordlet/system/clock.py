"""Time, injected: everything that asks "what time is it" takes a :data:`Clock` (seconds since the epoch)."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def wall_clock() -> float:
    return time.time()


class FakeClock:
    """A clock tests move by hand: ``clock.advance(1.0)``."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
