"""One object that cannot be decoded or parsed, whatever it raises, costs that object only; a watch loop
that fails is started again and counted. Against the in-process fake API server over real HTTP."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fakeapi import FakeApi, RawObject
from test_kube_source import FAST, RecordingSink, eventually

from koord_scheduler.framework.types import ObjectKind
from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from koord_scheduler.scheduler.task_restarts import TaskRestarts
from kubeapi.events import EventOptions


def nested(depth: int) -> str:
    """JSON text nested ``depth`` levels: ``{"a":[{"a":[...]}]}``."""
    odd = depth % 2
    return "[" * odd + '{"a":[' * (depth // 2) + "1" + "]}" * (depth // 2) + "]" * odd


def widget(name: str, size: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"size": size}}


def deep_widget(name: str, depth: int) -> RawObject:
    """A Widget nested ``depth`` levels in all (its ``spec.template`` two less)."""
    meta = {"name": name, "uid": f"uid-{name}"}
    return RawObject(meta, f'"spec":{{"size":1,"template":{nested(depth - 2)}}}')


def parse_widget(obj: Any) -> Any:
    if not isinstance(obj.get("spec"), dict):
        raise ValueError("spec is required")
    return obj


WIDGETS = ObjectKind("Widget", "x.io", "v1", "widgets", namespaced=False, parse=parse_widget)


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def restarts() -> TaskRestarts:
    return TaskRestarts()


@pytest.fixture
async def source(api: FakeApi, restarts: TaskRestarts) -> AsyncIterator[KubeClusterSource]:
    src = KubeClusterSource(
        api.connection,
        options=KubeSourceOptions(qps=0, burst=1, reflector=FAST, events=EventOptions(hostname="test-host")),
        clock=lambda: 1_700_000_000.0,
        restarts=restarts,
    )
    yield src
    await src.stop()


def posted_events(api: FakeApi) -> list[dict[str, Any]]:
    return [r.body for r in api.requests if r.method == "POST" and "/events" in r.path]


async def test_a_list_with_one_object_nested_past_orjsons_limit_delivers_the_others(
    api: FakeApi, source: KubeClusterSource, caplog: pytest.LogCaptureFixture
) -> None:
    api.put("widgets", widget("w1"))
    api.put("widgets", deep_widget("deep", 1100))
    api.put("widgets", widget("w2"))
    sink = RecordingSink()

    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(source.start(sink, [WIDGETS]), 5)

    assert sorted(sink.objects) == ["w1", "w2"]
    assert sink.object_errors.count("Widget", "Invalid") == 1
    logged = [r.getMessage() for r in caplog.records if "deep" in r.getMessage()]
    assert len(logged) == 1
    assert "Widget deep ignored (Invalid): spec.template.a[0].a[0]…: nested deeper than 1024 levels" in logged[0]
    await source.events.flush()
    assert [
        (e["regarding"]["kind"], e["regarding"]["name"], e["regarding"]["uid"], e["reason"]) for e in posted_events(api)
    ] == [("Widget", "deep", "uid-deep", "InvalidObject")]


async def test_an_object_at_orjsons_limit_is_accepted_in_a_list_and_in_a_watch(
    api: FakeApi, source: KubeClusterSource
) -> None:
    # 1,024 levels is the bound for the object itself, wherever it arrives (a list adds two levels
    # around it and a watch event one: the whole document may be refused, the object is not).
    api.put("widgets", deep_widget("listed", 1024))
    sink = RecordingSink()
    await source.start(sink, [WIDGETS])
    api.put("widgets", deep_widget("watched", 1024))
    api.put("widgets", widget("marker"))
    await eventually(lambda: "marker" in sink.objects)

    assert sorted(sink.objects) == ["listed", "marker", "watched"]
    assert sink.object_errors.count("Widget", "Invalid") == 0
    api.put("widgets", deep_widget("watched", 1025))  # one level more: refused
    api.put("widgets", widget("marker-2"))
    await eventually(lambda: "marker-2" in sink.objects)
    assert "watched" not in sink.objects
    assert sink.object_errors.count("Widget", "Invalid") == 1


async def test_a_watched_object_nested_too_deep_is_taken_out_and_the_watch_goes_on(
    api: FakeApi, source: KubeClusterSource, restarts: TaskRestarts
) -> None:
    api.put("widgets", widget("w"))
    sink = RecordingSink()
    await source.start(sink, [WIDGETS])
    api.put("widgets", deep_widget("w", 5000))  # a new version of w, too deep
    api.put("widgets", widget("after"))
    await eventually(lambda: "after" in sink.objects)

    assert "w" not in sink.objects  # the version that parsed earlier is not kept in use
    assert ("Widget", "DELETED", "w") in sink.events
    assert sink.object_errors.count("Widget", "Invalid") == 1
    assert source.reflectors["Widget"].crashes == 0
    assert restarts.count("watch-widgets") == 0
    api.put("widgets", widget("w", size=2))  # fixed
    await eventually(lambda: "w" in sink.objects)


def raising(exc: BaseException) -> Callable[[Any], Any]:
    def parse(obj: Any) -> Any:
        if obj["metadata"]["name"] == "bad":
            raise exc
        return obj

    return parse


@pytest.mark.parametrize(
    ("exc", "want"),
    [
        pytest.param(
            RecursionError("maximum recursion depth exceeded"),
            "RecursionError: maximum recursion depth exceeded",
            id="recursion",
        ),
        pytest.param(
            OverflowError("cannot convert float infinity to integer"),
            "OverflowError: cannot convert float infinity to integer",
            id="overflow",
        ),
        pytest.param(MemoryError(), "MemoryError", id="memory"),
        pytest.param(
            UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte",
            id="unicode",
        ),
        pytest.param(KeyError("spec"), "KeyError: 'spec'", id="key-error"),
    ],
)
async def test_whatever_a_parser_raises_costs_that_object_only(
    api: FakeApi, source: KubeClusterSource, exc: BaseException, want: str
) -> None:
    kind = ObjectKind("Widget", "x.io", "v1", "widgets", namespaced=False, parse=raising(exc))
    api.put("widgets", widget("bad"))
    api.put("widgets", widget("good"))
    sink = RecordingSink()
    await source.start(sink, [kind])
    api.put("widgets", widget("bad", size=2))  # the watch: the same again
    api.put("widgets", widget("later"))
    await eventually(lambda: "later" in sink.objects)

    assert sorted(sink.objects) == ["good", "later"]
    assert sink.object_errors.count("Widget", "Invalid") == 2  # the listed version and the watched one
    assert source.reflectors["Widget"].crashes == 0
    await source.events.flush()
    notes = [e["note"] for e in posted_events(api) if e["regarding"]["name"] == "bad"]
    assert notes and all(note == f"ignored by the scheduler: {want}" for note in notes), notes


async def test_a_failed_watch_loop_is_restarted_and_counted(
    api: FakeApi, source: KubeClusterSource, restarts: TaskRestarts, caplog: pytest.LogCaptureFixture
) -> None:
    sink = RecordingSink()
    await source.start(sink, [WIDGETS])
    reflector = source.reflectors["Widget"]
    failures = [RuntimeError("a bug in the watch loop")]
    real_watch_once = reflector.watch_once

    async def watch_once() -> int:
        if failures:
            raise failures.pop()
        return await real_watch_once()

    reflector.watch_once = watch_once  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        await api.drop_watches("widgets")  # the running watch ends; the next one fails
        api.put("widgets", widget("after"))
        await eventually(lambda: "after" in sink.objects)

    assert reflector.crashes == 1
    assert restarts.count("watch-widgets") == 1
    lines = [r.getMessage() for r in caplog.records if "watch-widgets" in r.getMessage()]
    assert lines == ["watch-widgets failed and is restarted: RuntimeError: a bug in the watch loop"]
