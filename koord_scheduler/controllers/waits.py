"""How the leader-only controllers sleep: until woken by an event, stopped, or a timeout."""

from __future__ import annotations

import asyncio


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds``; True when ``stop`` was set meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def wake_or_stop(wake: asyncio.Event, stop: asyncio.Event, timeout: float) -> None:
    """Return when ``wake`` or ``stop`` is set, or after ``timeout`` seconds (``wake`` is not cleared)."""
    waiter = asyncio.ensure_future(wake.wait())
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in (waiter, stopper):
            f.cancel()
        await asyncio.gather(waiter, stopper, return_exceptions=True)
