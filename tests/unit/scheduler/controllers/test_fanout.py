"""FanoutSink: the scheduler gets every event at once; held controllers get the same events, in the same
order, only when released, and from then on directly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apis.core.types import Node, Pod
from koord_scheduler.controllers.fanout import FanoutSink
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors
from tests.builders import make_node, make_pod


class Recorder:
    def __init__(self, *, fail_on: str = "") -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.fail_on = fail_on

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        node = new or old
        assert node is not None
        self.seen.append(("Node", event.value, node.name))

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        assert pod is not None
        if pod.name == self.fail_on:
            raise RuntimeError("boom")
        self.seen.append(("Pod", event.value, pod.name))

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        self.seen.append((kind, event.value, str(new or old)))

    def on_invalid_object(self, *_: Any, **__: Any) -> bool:
        return True


def _feed(sink: FanoutSink, names: list[str]) -> None:
    sink.on_node(EventType.ADDED, None, make_node("n1").build())
    for name in names:
        sink.on_pod(EventType.ADDED, None, make_pod(name).build())
    sink.on_object("ElasticQuota", EventType.ADDED, None, "q1")


def test_without_holding_every_sink_gets_each_event_at_once() -> None:
    scheduler, controller = Recorder(), Recorder()
    sink = FanoutSink(scheduler, controller, object_errors=ObjectErrors())
    _feed(sink, ["a"])
    assert (
        controller.seen
        == scheduler.seen
        == [("Node", "ADDED", "n1"), ("Pod", "ADDED", "a"), ("ElasticQuota", "ADDED", "q1")]
    )
    assert sink.holding == 0
    asyncio.run(sink.release())  # a no-op
    assert len(controller.seen) == 3


def test_held_controllers_get_the_same_events_in_order_when_released() -> None:
    scheduler, first, second = Recorder(), Recorder(), Recorder()
    sink = FanoutSink(scheduler, first, second, object_errors=ObjectErrors(), hold_controllers=True)
    names = [f"p{i}" for i in range(25)]
    _feed(sink, names)
    assert len(scheduler.seen) == 27  # the scheduler at once
    assert first.seen == [] and second.seen == [] and sink.holding == 27

    async def release_while_events_come() -> None:
        releasing = asyncio.ensure_future(sink.release(batch=10))
        await asyncio.sleep(0)  # the first batch is replayed
        assert len(first.seen) == 10
        sink.on_pod(EventType.ADDED, None, make_pod("late").build())  # queues behind the held ones
        assert first.seen[-1] != ("Pod", "ADDED", "late")
        await releasing

    asyncio.run(release_while_events_come())
    assert first.seen == second.seen == [*scheduler.seen[:27], ("Pod", "ADDED", "late")]
    assert sink.holding == 0
    sink.on_pod(EventType.DELETED, make_pod("a").build(), None)  # released: delivered directly
    assert first.seen[-1] == ("Pod", "DELETED", "a") == scheduler.seen[-1]


def test_scheduling_off_holds_nothing() -> None:
    controller = Recorder()
    sink = FanoutSink(None, controller, object_errors=ObjectErrors(), hold_controllers=True)
    sink2 = FanoutSink(None, object_errors=ObjectErrors(), hold_controllers=True)
    _feed(sink2, ["a"])
    assert sink2.holding == 0
    # with controllers it holds (serve_run only asks for it with scheduling on)
    _feed(sink, ["a"])
    assert sink.holding == 3 and controller.seen == []


def test_a_controller_that_raises_on_a_held_event_does_not_stop_the_replay(caplog: pytest.LogCaptureFixture) -> None:
    failing, other = Recorder(fail_on="bad"), Recorder()
    sink = FanoutSink(Recorder(), failing, other, object_errors=ObjectErrors(), hold_controllers=True)
    _feed(sink, ["a", "bad", "b"])
    asyncio.run(sink.release())
    assert [n for _, _, n in failing.seen] == ["n1", "a", "b", "q1"]
    assert [n for _, _, n in other.seen] == ["n1", "a", "bad", "b", "q1"]
    assert "failed on a held event" in caplog.text


def test_serve_starts_the_controllers_after_the_first_pass_and_the_replay() -> None:
    from koord_scheduler.app.serve_run import _start_after_first_pass

    class FirstPass:
        def __init__(self) -> None:
            self.first_pass_done = asyncio.Event()

    controller = Recorder()
    sink = FanoutSink(Recorder(), controller, object_errors=ObjectErrors(), hold_controllers=True)
    _feed(sink, [f"p{i}" for i in range(2500)])
    started: list[int] = []

    async def scenario() -> None:
        scheduler = FirstPass()
        task = asyncio.ensure_future(
            _start_after_first_pass(scheduler, sink, None, lambda: started.append(len(controller.seen)))  # type: ignore[arg-type]
        )
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == [] and controller.seen == []  # the first pass is not done
        scheduler.first_pass_done.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())
    assert started == [2502]  # started once every held event had been replayed
    assert sink.holding == 0
