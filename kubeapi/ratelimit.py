"""Client-side request rate limiting: client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``).

``clientConnection.qps`` tokens are added per second up to ``burst``; every API request takes one.
A ``qps`` of zero or less, or at least :data:`UNLIMITED_QPS`, means no limit at all (benchmarks lift the
limits by setting a huge qps; not even a clock read is paid then).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

UNLIMITED_QPS = 1e6
"""At or above this many requests per second the limiter is a no-op."""


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; :meth:`acquire` waits for one.

    Waiters are served in arrival order: each reserves the next token time, so a burst of callers is
    spread evenly instead of thundering after every refill. ``clock`` and ``sleep`` are injectable for
    tests (monotonic seconds / an awaitable sleep).
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.unlimited = qps <= 0 or qps >= UNLIMITED_QPS
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take one token now; return how many seconds the caller must wait before using it."""
        if self.unlimited:
            return 0.0
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)


class YieldingBucket(TokenBucket):
    """A controller's own token bucket that gives way to the scheduler's binds: each request takes a token
    from this bucket (``qps``/``burst``, as :class:`TokenBucket`), and, while ``busy()`` says the scheduler
    has requests in flight (a backlog is being bound), one more from ``while_busy``, a slower bucket every
    controller shares. So a newly elected leader's controllers, which may have a write for every node to
    make, do not halve the API server's bind capacity while pods wait; they go at full speed once the
    backlog is bound, and at ``while_busy``'s rate under steady scheduling, never stopped."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        busy: Callable[[], bool],
        while_busy: TokenBucket,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(qps, burst, clock=clock, sleep=sleep)
        self.busy = busy
        self.while_busy = while_busy

    async def acquire(self) -> None:
        await super().acquire()
        if self.busy():
            await self.while_busy.acquire()
