"""Cyclic garbage collector settings for a long-running scheduler.

The scheduler keeps one object graph per node, pod, queue entry and plugin row, hundreds of thousands of
containers that live as long as the process. CPython's cyclic collector walks all of them on every full
collection (35-45 ms at 1,000 nodes and 6,000 pods, twice per 5,000 pods scheduled), and runs a
generation-0 pass every 700 container allocations, which parsing watch events and scheduling cycles
reach constantly. Reference counting already frees nearly all of the scheduler's garbage; the collector
is there for cycles only.

:class:`HeapSettler` does what long-running CPython services do once their caches are loaded: collect
once, move everything alive into the permanent generation (``gc.freeze``) so later collections skip it,
and raise the generation-0 threshold. While the caches load (:meth:`HeapSettler.loading`) it only raises
the thresholds and freezes what the imports left, without collecting: listing tens of thousands of pods
would otherwise run a full collection over the growing heap every time it grows by a quarter. The first
settle waits until the scheduler is first idle, so it is not paid before the first bind.

Frozen objects are never collected, so garbage cycles among them
(objects that were alive at the freeze and died later) would stay; :meth:`HeapSettler.idle` therefore
unfreezes, collects and freezes again, at most every ``resettle_seconds`` and only while the scheduler
has nothing to do.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

GEN0_THRESHOLD = 10_000
"""Container allocations between generation-0 passes (CPython's default is 700)."""
OLDER_THRESHOLDS = (20, 20)
"""Generation-1 and generation-2 thresholds (counted in passes of the younger generation)."""
RESETTLE_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class SettleResult:
    collected: int
    """Unreachable objects found by the collection before the freeze."""
    frozen: int
    """Objects in the permanent generation afterwards."""
    seconds: float


def settle() -> SettleResult:
    """Collect everything collectable, freeze what is left, and raise the thresholds."""
    started = time.perf_counter()
    gc.unfreeze()
    collected = gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, *OLDER_THRESHOLDS)
    return SettleResult(collected, gc.get_freeze_count(), time.perf_counter() - started)


def raise_thresholds() -> None:
    """Freeze what is alive (no collection: cheap) and raise the thresholds; for start-up, before the
    caches load."""
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, *OLDER_THRESHOLDS)


STARTUP_PAUSE_LIMIT = 60.0
"""Seconds after which cluster mode turns the collector back on even if the first lists are not in yet
(an API server that keeps failing): the pause is for start-up only."""


def pause_collector() -> None:
    """Start-up: no cyclic collection while modules load and the first lists are decoded and delivered.

    Decoding a page of 500 pods allocates some 50,000 containers; with the collector on, its passes over
    the young (and growing) heap took about two thirds of the decode time (36-52 ms a page against
    11-15 ms with it off; 17 ms with :data:`GEN0_THRESHOLD`). Nothing of that is garbage in cycles, so
    nothing is lost by not looking. :func:`resume_collector` turns it on again."""
    gc.disable()


def resume_collector(*, freeze: bool = False) -> None:
    """The end of :func:`pause_collector` (a no-op when the collector is on). With ``freeze``, what is
    alive moves to the permanent generation first (the caches just loaded): otherwise the first
    generation-0 pass after the pause walks every object allocated during it (1.5 CPU-s after 50,000
    pods), since none was collected. Only where something settles the heap later (:class:`HeapSettler`)."""
    if freeze:
        gc.freeze()
    gc.enable()


class HeapSettler:
    """Settles the heap when the scheduler is first idle, and again when idle every ``resettle_seconds``."""

    def __init__(self, *, resettle_seconds: float = RESETTLE_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.resettle_seconds = resettle_seconds
        self._clock = clock
        self._last: float | None = None
        self.settles = 0

    def start(self) -> SettleResult:
        return self._settle("start")

    def loading(self) -> None:
        """The caches are about to load: :func:`raise_thresholds`. The first :meth:`idle` settles."""
        raise_thresholds()

    def idle(self) -> SettleResult | None:
        """Settle if this is the first idle moment or the last settle is ``resettle_seconds`` old (call when
        there is no work)."""
        if self._last is not None and self._clock() - self._last < self.resettle_seconds:
            return None
        return self._settle("idle")

    def _settle(self, when: str) -> SettleResult:
        result = settle()
        self._last = self._clock()
        self.settles += 1
        log.debug(
            "heap settled (%s): %d unreachable collected, %d objects frozen, %.0f ms",
            when,
            result.collected,
            result.frozen,
            result.seconds * 1000,
        )
        return result
