"""Heap trimming after lists (kubeapi.heap) and what a reconnect reuses."""

from __future__ import annotations

import asyncio
import platform
from collections.abc import AsyncIterator

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


async def test_requests_in_a_burst_trim_once() -> None:
    counter = Counter()
    trimmer = HeapTrimmer(counter, delay=0.05)
    for _ in range(4):
        trimmer.request()
        await asyncio.sleep(0.005)
    assert counter.calls == 0
    await asyncio.sleep(0.1)
    assert counter.calls == 1
    assert trimmer.trims == 1
    trimmer.request()  # a list after the trim asks for the next one
    await asyncio.sleep(0.1)
    assert counter.calls == 2


async def test_requests_that_keep_coming_do_not_postpone_the_trim() -> None:
    """Lists every 20 ms for 200 ms (kube-apiserver restarted again and again): the trim still runs
    50 ms after the first, and again after the next requests."""
    counter = Counter()
    trimmer = HeapTrimmer(counter, delay=0.05)
    for _ in range(10):
        trimmer.request()
        await asyncio.sleep(0.02)
    assert counter.calls >= 2


def test_without_an_event_loop_the_trim_runs_at_once() -> None:
    counter = Counter()
    HeapTrimmer(counter, delay=60).request()
    assert counter.calls == 1


async def test_cancel_drops_the_pending_trim() -> None:
    counter = Counter()
    trimmer = HeapTrimmer(counter, delay=0.02)
    trimmer.request()
    trimmer.cancel()
    await asyncio.sleep(0.05)
    assert counter.calls == 0


async def test_no_trim_function_is_a_no_op() -> None:
    trimmer = HeapTrimmer(None, delay=0)
    trimmer.request()
    await asyncio.sleep(0.01)
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
