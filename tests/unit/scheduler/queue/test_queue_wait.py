"""wait_for_pod: wakes on work, on backoff release, and cancels without leaving anything behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from queue_testing import FIT, NODE_ADD, T0, Harness, make_harness, make_pod

WAIT_LIMIT = 1.0
"""Real seconds a test waits before declaring the queue stuck; the happy paths take microseconds."""


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    """A queue on a fake clock; the test fails if it leaves asyncio tasks behind."""
    h = make_harness()
    yield h
    current = asyncio.current_task()
    leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert leftover == []


async def test_returns_at_once_when_a_pod_is_ready(harness: Harness) -> None:
    harness.queue.add(make_pod("p"))

    await asyncio.wait_for(harness.queue.wait_for_pod(), WAIT_LIMIT)


async def test_wakes_when_a_pod_is_added(harness: Harness) -> None:
    waiting = asyncio.ensure_future(harness.queue.wait_for_pod())
    await asyncio.sleep(0)
    assert not waiting.done()

    harness.queue.add(make_pod("p"))

    await asyncio.wait_for(waiting, WAIT_LIMIT)


async def test_wakes_when_an_event_moves_a_pod(harness: Harness) -> None:
    harness.queue.add(make_pod("p"))
    harness.fail(unschedulable=frozenset({FIT}))
    waiting = asyncio.ensure_future(harness.queue.wait_for_pod())
    await asyncio.sleep(0)
    assert not waiting.done()

    harness.queue.on_cluster_event(NODE_ADD, None, None)  # to backoffQ, which pop may take from

    await asyncio.wait_for(waiting, WAIT_LIMIT)
    assert harness.queue.pop() is not None


async def test_wakes_when_the_next_backoff_ends(harness: Harness) -> None:
    harness.queue.add(make_pod("p"))
    harness.fail(error=True)  # error backoff: pop cannot take it early
    # Failed at T0 = x.25 with a 1 s backoff: expiry x+1 (truncated), released when the window x+2 opens.
    # Stand 10 ms of real time before that.
    harness.clock.now = int(T0) + 2 - 0.01

    await asyncio.wait_for(harness.queue.wait_for_pod(), WAIT_LIMIT)
    harness.clock.now += 0.01

    assert harness.queue.pop() is not None


async def test_returns_at_once_when_a_backoff_is_already_over(harness: Harness) -> None:
    harness.queue.add(make_pod("p"))
    harness.fail(error=True)
    harness.clock.advance(5)

    await asyncio.wait_for(harness.queue.wait_for_pod(), WAIT_LIMIT)


async def test_cancel_leaves_nothing_behind(harness: Harness) -> None:
    waiters = [asyncio.ensure_future(harness.queue.wait_for_pod()) for _ in range(3)]
    await asyncio.sleep(0)

    for waiter in waiters:
        waiter.cancel()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    harness.queue.add(make_pod("p"))  # notifying after the waiters are gone must be harmless

    assert [type(r) for r in results] == [asyncio.CancelledError] * 3
    await asyncio.wait_for(harness.queue.wait_for_pod(), WAIT_LIMIT)


async def test_timeout_while_waiting_on_a_backoff_is_clean(harness: Harness) -> None:
    harness.queue.add(make_pod("p"))
    harness.fail(error=True)

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(harness.queue.wait_for_pod(), 0.01)
