"""PrioritySort: priority descending, then queue timestamp."""

from __future__ import annotations

from functools import cmp_to_key

import pytest

from apis.core.types import ObjectMeta, Pod
from koord_scheduler.framework.types import QueuedPodInfo
from koord_scheduler.plugins.queuesort import plugin as queuesort
from tests.fwtest import FakeHandle, make_snapshot


def queued(name: str, priority: int, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(Pod(ObjectMeta(name, "default"), priority=priority), timestamp)


@pytest.mark.parametrize(
    ("a", "b", "want_less"),
    [
        pytest.param(queued("a", 10, 2.0), queued("b", 5, 1.0), True, id="higher-priority-first"),
        pytest.param(queued("a", 5, 1.0), queued("b", 10, 2.0), False, id="lower-priority-later"),
        pytest.param(queued("a", 5, 1.0), queued("b", 5, 2.0), True, id="equal-priority-fifo"),
        pytest.param(queued("a", 5, 2.0), queued("b", 5, 1.0), False, id="equal-priority-later-timestamp"),
        pytest.param(queued("a", 5, 1.0), queued("b", 5, 1.0), False, id="equal-is-not-less"),
        pytest.param(queued("a", -1, 0.0), queued("b", 0, 9.0), False, id="negative-priority-below-default"),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, want_less: bool) -> None:
    plugin = queuesort.new(None, FakeHandle(make_snapshot([])))
    assert plugin.less(a, b) is want_less


def test_sorted_order() -> None:
    plugin = queuesort.PrioritySort()
    pods = [
        queued("low-old", 0, 1.0),
        queued("high-new", 100, 5.0),
        queued("low-new", 0, 3.0),
        queued("high-old", 100, 2.0),
    ]

    def compare(x: QueuedPodInfo, y: QueuedPodInfo) -> int:
        return -1 if plugin.less(x, y) else int(plugin.less(y, x))

    order = sorted(pods, key=cmp_to_key(compare))
    assert [p.pod.name for p in order] == ["high-old", "high-new", "low-old", "low-new"]
