"""koordlet's heap trimming after lists (koordlet.system.heap) and the list+watch loop's request for it."""

from __future__ import annotations

import json
import platform
import threading
import time
from typing import Any

import pytest

from koordlet.statesinformer.informer import StatesInformer
from koordlet.statesinformer.kube import KubeSource
from koordlet.system.heap import HeapTrimmer, glibc_malloc_trim
from koordlet.system.layout import CgroupDriver, CgroupLayout


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.calls += 1


def _wait(check: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def test_requests_from_several_threads_in_a_burst_trim_once() -> None:
    counter = Counter()
    trimmer = HeapTrimmer(counter, delay=0.1)
    threads = [threading.Thread(target=trimmer.request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.calls == 0
    _wait(lambda: counter.calls == 1)
    time.sleep(0.15)
    assert counter.calls == 1
    trimmer.request()  # a list after the trim asks for the next one
    _wait(lambda: counter.calls == 2)
    assert trimmer.trims == 2


def test_cancel_drops_the_pending_trim() -> None:
    counter = Counter()
    trimmer = HeapTrimmer(counter, delay=0.05)
    trimmer.request()
    trimmer.cancel()
    time.sleep(0.1)
    assert counter.calls == 0


def test_no_trim_function_is_a_no_op() -> None:
    trimmer = HeapTrimmer(None, delay=0)
    trimmer.request()
    time.sleep(0.02)
    assert trimmer.trims == 0


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_trim_is_found_and_callable() -> None:
    trim = glibc_malloc_trim()
    assert trim is not None
    trim()


class _Listing:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.data = json.dumps({"metadata": {"resourceVersion": "7"}, "items": items}).encode()


class _EmptyStream:
    def stream(self, *_: Any, **__: Any) -> list[bytes]:
        return []

    def release_conn(self) -> None:
        pass


def test_each_list_asks_for_a_trim_and_a_resumed_watch_does_not() -> None:
    informer = StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.CGROUPFS))
    counter = Counter()
    source = KubeSource(None, informer, watch_pods=False, on_listed=counter)
    calls: list[str] = []

    def list_call(**kw: Any) -> Any:
        if not kw.get("watch"):
            calls.append("list")
            if len(calls) > 2:  # a list after two watch failures: the source is stopped from here on
                source.stop()
            return _Listing([])
        calls.append("watch")
        if calls.count("watch") in (2, 3):  # the second and third watches fail: listed again once
            raise OSError("connection refused")
        return _EmptyStream()  # a watch that ends normally: resumed without a list

    source._list_watch("nodeslos", list_call, lambda items: None, lambda kind, obj: None)

    lists = calls.count("list")
    assert lists >= 2
    assert counter.calls == lists
    assert calls.count("watch") >= 2
