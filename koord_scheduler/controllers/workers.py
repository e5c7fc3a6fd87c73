"""Writing a controller's decisions with a bounded number of workers (``controllerWorkers``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def run_with_workers(items: Iterable[T], workers: int, work: Callable[[T], Awaitable[R]]) -> list[R]:
    """``work`` on every item, at most ``workers`` at a time, each item by one worker (so one object's
    writes keep their order); the results in the order the items finished. The workers end before this
    returns (nothing is left running for a caller that is cancelled or stops)."""
    queue = iter(items)
    done: list[R] = []

    async def worker() -> None:
        for item in queue:
            done.append(await work(item))

    await asyncio.gather(*(worker() for _ in range(max(1, workers))))
    return done
