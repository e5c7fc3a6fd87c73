"""koordlet's states informer fed through kubeapi's reflectors (KubeSource) and the ApiLoop bridge, against
an in-process fake API server over real HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from koordlet_fakes import make_raw_pod

from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.statesinformer.informer import RegisterType, StatesInformer
from koordlet.statesinformer.kube import KubeSource
from koordlet.system.layout import CgroupDriver, CgroupLayout
from kubeapi.http import ApiError, ApiHttp
from kubeapi.ratelimit import TokenBucket
from kubeapi.reflector import ReflectorOptions
from tests.unit.kubeapi.fakeapi import FakeApi, RawObject

FAST = ReflectorOptions(initial_backoff=0.01, max_backoff=0.05, min_watch_timeout=60)
UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
UID_C = "cccccccc-bbbb-cccc-dddd-eeeeeeeeeeee"


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def deep_pod(name: str, uid: str, depth: int) -> RawObject:
    """A pod with a field ``x`` nested ``depth`` levels: no Python ``json`` can encode it."""
    raw = make_raw_pod(name, uid)
    rest = json.dumps({k: v for k, v in raw.items() if k != "metadata"})[1:-1]
    return RawObject(raw["metadata"], rest + ', "x": ' + '{"a":' * depth + "1" + "}" * depth)


def broken_pod(name: str, uid: str) -> dict[str, Any]:
    raw = make_raw_pod(name, uid)
    raw["spec"] = {"containers": ["not an object"]}
    return raw


class Source:
    """A KubeSource's pod reflector run on the test's loop."""

    def __init__(self, api: FakeApi, informer: StatesInformer) -> None:
        self.listed = 0
        self.source = KubeSource(None, informer, on_listed=self.count, options=FAST)
        self.http = ApiHttp(api.connection, TokenBucket(0, 1))
        self.source.reflectors = self.source.reflectors_for(self.http)
        self.tasks = [asyncio.ensure_future(r.run()) for r in self.source.reflectors if r.kind.plural == "pods"]

    def count(self) -> None:
        self.listed += 1

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.http.close()


def informer() -> StatesInformer:
    return StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.CGROUPFS))


async def test_a_list_is_one_notification_and_bad_objects_cost_themselves(
    api: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    states = informer()
    notified: list[int] = []
    states.register_callback(RegisterType.ALL_PODS, "count", lambda kind, s: notified.append(len(s.get_all_pods())))
    api.put("pods", make_raw_pod("a", UID_A))
    api.put("pods", deep_pod("deep", UID_B, 1100))
    api.put("pods", make_raw_pod("c", UID_C))
    source = Source(api, states)
    try:
        with caplog.at_level(logging.WARNING):
            await until(lambda: source.listed == 1)
            assert notified == [2]  # one notification for the list, the undecodable pod left out
            api.put("pods", broken_pod("c", UID_C))  # the informer keeps the version it had
            api.delete("pods", "default/a")
            await until(lambda: len(states.get_all_pods()) == 1)
    finally:
        await source.close()
    assert [p.name for p in states.get_all_pods()] == ["c"]
    assert states.rejected == 2
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "pods default/deep ignored" in messages and "nested deeper than 1024" in messages
    assert "pods default/c ignored: reading it failed" in messages


async def test_each_list_asks_for_a_trim_and_a_resumed_watch_does_not(api: FakeApi) -> None:
    source = Source(api, informer())
    try:
        await until(lambda: source.listed == 1 and api.watcher_count("pods") == 1)
        await api.drop_watches("pods")  # the server's timeout: resumed from the resourceVersion
        await until(lambda: api.watcher_count("pods") == 1)
        assert source.listed == 1
        api.put("pods", make_raw_pod("a", UID_A), silent=True)  # changed while the watch was away...
        api.expire_history()  # ...and compacted: 410 Gone, listed again
        await api.drop_watches("pods")
        await until(lambda: source.listed == 2)
    finally:
        await source.close()


async def test_the_api_loop_serves_blocking_callers_and_stops(api: FakeApi) -> None:
    api.put("nodes", {"metadata": {"name": "node-1"}})
    loop = ApiLoop(api.connection)
    loop.start()
    results: list[Any] = []

    def worker() -> None:  # a koordlet thread (a collector, a writer)
        results.append(loop.call(lambda http: http.request_json("GET", "/api/v1/nodes")))
        try:
            loop.call(lambda http: http.request("GET", "/api/v1/nothing"))
        except ApiError as err:
            results.append(err.status)

    thread = threading.Thread(target=worker)
    thread.start()
    await until(lambda: not thread.is_alive())
    await asyncio.to_thread(loop.stop)
    assert [item["metadata"]["name"] for item in results[0]["items"]] == ["node-1"]
    assert results[1] == 404
    assert not loop.loop.is_running()
