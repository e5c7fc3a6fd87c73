"""Heap trimming after lists (kubeapi.heap) and what a reconnect reuses."""

from __future__ import annotations

import asyncio
import platform
from collections.abc import AsyncIterator, Callable

import pytest
from fakeapi import FakeApi
from test_kube_source import FAST, RecordingSink, eventually

from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from kubeapi import heap
from kubeapi.events import EventOptions
from kubeapi.heap import HeapTrimmer, glibc_malloc_trim
from tests.builders import make_node


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


class FakeTimers:
    """``call_later`` on a clock the test moves: a callback runs in :meth:`advance` once its time is due."""

    class Handle:
        def __init__(self) -> None:
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.now = 0.0
        self.due: list[tuple[float, Callable[[], None], FakeTimers.Handle]] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimers.Handle:
        handle = FakeTimers.Handle()
        self.due.append((self.now + delay, callback, handle))
        return handle

    def advance(self, seconds: float) -> None:
        self.now += seconds
        ready = [entry for entry in self.due if entry[0] <= self.now + 1e-9]
        self.due = [entry for entry in self.due if entry not in ready]
        for _, callback, handle in ready:
            if not handle.cancelled:
                callback()


def test_requests_in_a_burst_trim_once() -> None:
    counter, timers = Counter(), FakeTimers()
    trimmer = HeapTrimmer(counter, delay=0.05, call_later=timers.call_later)
    for _ in range(4):
        trimmer.request()
        timers.advance(0.005)
    assert counter.calls == 0
    assert len(timers.due) == 1
    timers.advance(0.1)
    assert counter.calls == 1
    assert trimmer.trims == 1
    trimmer.request()  # a list after the trim asks for the next one
    timers.advance(0.1)
    assert counter.calls == 2


def test_requests_that_keep_coming_do_not_postpone_the_trim() -> None:
    """Lists every 20 ms for 200 ms (kube-apiserver restarted again and again): the trim still runs
    50 ms after the first request of each burst (due at 50, 110 and 170 ms, run at the next step)."""
    counter, timers = Counter(), FakeTimers()
    trimmer = HeapTrimmer(counter, delay=0.05, call_later=timers.call_later)
    ran_at = []
    for _ in range(10):
        trimmer.request()
        before = counter.calls
        timers.advance(0.02)
        if counter.calls > before:
            ran_at.append(round(timers.now, 2))
    assert ran_at == [0.06, 0.12, 0.18]


def test_without_an_event_loop_the_trim_runs_at_once() -> None:
    counter = Counter()
    HeapTrimmer(counter, delay=60).request()
    assert counter.calls == 1


async def test_on_the_running_loop_the_trim_waits_for_the_delay() -> None:
    counter = Counter()
    trimmer = HeapTrimmer(counter, delay=60)
    trimmer.request()
    await asyncio.sleep(0)
    assert counter.calls == 0
    trimmer.cancel()


def test_cancel_drops_the_pending_trim() -> None:
    counter, timers = Counter(), FakeTimers()
    trimmer = HeapTrimmer(counter, delay=0.02, call_later=timers.call_later)
    trimmer.request()
    trimmer.cancel()
    timers.advance(1)
    assert counter.calls == 0
    trimmer.request()  # a request after the cancel schedules a new trim
    timers.advance(1)
    assert counter.calls == 1


def test_no_trim_function_is_a_no_op() -> None:
    timers = FakeTimers()
    trimmer = HeapTrimmer(None, delay=0, call_later=timers.call_later)
    trimmer.request()
    assert timers.due == []
    assert not trimmer.enabled
    assert trimmer.trims == 0


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_trim_is_found_and_callable() -> None:
    trim = glibc_malloc_trim()
    assert trim is not None
    trim()  # returns nothing and does not raise


@pytest.fixture
def counted_trims(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """The process trimmer replaced by one that counts, with a short delay."""
    counter = Counter()
    monkeypatch.setattr(heap, "DEFAULT_TRIMMER", HeapTrimmer(counter, delay=0.02))
    return counter


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


def _source(api: FakeApi) -> KubeClusterSource:
    return KubeClusterSource(
        api.connection,
        options=KubeSourceOptions(qps=0, burst=1, reflector=FAST, events=EventOptions(hostname="test-host")),
    )


async def test_a_relist_after_gone_trims_the_heap(api: FakeApi, counted_trims: Counter) -> None:
    api.put("nodes", make_node("n1").obj())
    source = _source(api)
    try:
        await source.start(RecordingSink())
        await eventually(lambda: api.watcher_count("nodes") == 1)
        await eventually(lambda: counted_trims.calls == 1)  # the first lists, coalesced
        await asyncio.sleep(0.05)
        assert counted_trims.calls == 1

        api.put("nodes", make_node("n2").obj(), silent=True)
        api.expire_history()
        await api.drop_watches("nodes")
        await eventually(lambda: source.reflectors["Node"].relists == 2)
        await eventually(lambda: counted_trims.calls == 2)
    finally:
        await source.stop()


async def test_a_resumed_watch_does_not_trim(api: FakeApi, counted_trims: Counter) -> None:
    """Only a list frees a burst; a watch resumed from its resourceVersion asks for nothing."""
    api.put("nodes", make_node("n1").obj())
    source = _source(api)
    try:
        await source.start(RecordingSink())
        await eventually(lambda: counted_trims.calls == 1)
        for _ in range(3):
            await api.drop_watches("nodes")
            await eventually(lambda: api.watcher_count("nodes") == 1)
        await asyncio.sleep(0.05)
        assert source.reflectors["Node"].relists == 1
        assert counted_trims.calls == 1
    finally:
        await source.stop()


async def test_reconnects_reuse_one_session_and_pool(api: FakeApi, counted_trims: Counter) -> None:
    """Watches broken again and again (and re-listed) keep the one aiohttp session and the one
    connection pool: nothing per reconnect is left to accumulate."""
    api.put("nodes", make_node("n1").obj())
    source = _source(api)
    try:
        await source.start(RecordingSink())
        await eventually(lambda: api.watcher_count("nodes") == 1)
        session = source.http._session
        pool = source.http._pool
        assert session is not None
        for round_ in range(4):
            if round_ % 2:
                api.put("nodes", make_node(f"m{round_}").obj(), silent=True)
                api.expire_history()
            await api.drop_watches()
            await eventually(lambda: api.watcher_count("nodes") == 1)
        await eventually(lambda: source.reflectors["Node"].relists == 3)
        assert source.http._session is session
        assert source.http._pool is pool
    finally:
        await source.stop()
