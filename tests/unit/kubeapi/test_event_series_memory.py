"""Event series are forgotten once their window has passed, so a long run does not keep one per pod."""

from __future__ import annotations

from typing import Any

from kubeapi.events import SERIES_WINDOW_SECONDS, EventOptions, EventRecorder, Regarding


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _record(recorder: EventRecorder, name: str) -> None:
    recorder.record_for(
        Regarding("Pod", "v1", "default", name, f"uid-{name}", "1"),
        event_type="Normal",
        reason="Scheduled",
        action="Binding",
        note="bound",
        controller="default-scheduler",
    )


def test_series_outside_the_window_are_forgotten_and_a_repeat_inside_it_is_kept() -> None:
    clock = _Clock()
    recorder = EventRecorder(Any, options=EventOptions(hostname="h", queue_size=10_000), clock=clock)  # type: ignore[arg-type]
    for i in range(100):
        _record(recorder, f"old-{i}")
    clock.now += SERIES_WINDOW_SECONDS / 2
    _record(recorder, "kept")
    _record(recorder, "old-0")  # observed again: its series stays open
    assert recorder.open_series == 101
    clock.now += SERIES_WINDOW_SECONDS / 2 + 1
    _record(recorder, "new")
    assert recorder.open_series == 3  # "kept", "old-0" (seen again half a window ago) and "new"
    clock.now += SERIES_WINDOW_SECONDS + 1
    _record(recorder, "last")
    assert recorder.open_series == 1
