"""Assign time and forced-estimation deadline (Koordinator pod_assign_cache.go: estimatedSecondsAfterPodScheduled /
estimatedSecondsAfterInitialized, per-pod annotations with allowCustomizeEstimation), then the plugin
following a pod's condition changes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apis.core.parse import parse_pod
from apis.core.types import Pod
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.loadaware.timing import (
    ANNOTATION_SECONDS_AFTER_INITIALIZED,
    ANNOTATION_SECONDS_AFTER_POD_SCHEDULED,
    EstimationWindows,
    assign_time,
    estimation_deadline,
)
from tests.builders import make_pod
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import NOW, node_metric
from tests.unit.scheduler.plugins.loadaware.test_loadaware_plugin import node, setup

GI = 1024**3
SCHEDULED = NOW - 100.0
INITIALIZED = NOW - 40.0
CREATED = NOW - 500.0


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    *,
    scheduled: str | None = "True",
    initialized: str | None = None,
    node_name: str = "n1",
    annotations: dict[str, str] | None = None,
    initialized_at: float = INITIALIZED,
) -> Pod:
    obj = make_pod("p").req(cpu="1", memory="1Gi").created(rfc3339(CREATED)).obj()
    obj["spec"]["nodeName"] = node_name
    conditions: list[dict[str, Any]] = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": scheduled, "lastTransitionTime": rfc3339(SCHEDULED)})
    if initialized is not None:
        conditions.append({"type": "Initialized", "status": initialized, "lastTransitionTime": rfc3339(initialized_at)})
    obj["status"] = {"phase": "Running", "conditions": conditions}
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return parse_pod(obj)


@pytest.mark.parametrize(
    ("p", "fallback", "want"),
    [
        pytest.param(pod(), NOW, SCHEDULED, id="podscheduled-true-uses-its-transition"),
        pytest.param(pod(scheduled="False"), NOW, NOW, id="podscheduled-false-uses-fallback"),
        pytest.param(pod(scheduled=None), None, None, id="no-condition-no-fallback-unknown"),
    ],
)
def test_assign_time(p: Pod, fallback: float | None, want: float | None) -> None:
    assert assign_time(p, fallback) == want


@pytest.mark.parametrize(
    ("p", "windows", "want"),
    [
        pytest.param(pod(), EstimationWindows(), None, id="no-window-no-deadline"),
        pytest.param(pod(), EstimationWindows(after_pod_scheduled=300), SCHEDULED + 300, id="after-pod-scheduled"),
        pytest.param(
            pod(initialized="True"),
            EstimationWindows(after_pod_scheduled=300, after_initialized=60),
            INITIALIZED + 60,
            id="after-initialized-takes-precedence-when-initialized",
        ),
        pytest.param(
            pod(initialized="False"),
            EstimationWindows(after_pod_scheduled=300, after_initialized=60),
            SCHEDULED + 300,
            id="not-initialized-falls-back-to-after-pod-scheduled",
        ),
        pytest.param(
            pod(initialized="False"),
            EstimationWindows(after_initialized=60),
            None,
            id="not-initialized-only-initialized-window-none",
        ),
        pytest.param(
            pod(annotations={ANNOTATION_SECONDS_AFTER_POD_SCHEDULED: "30"}),
            EstimationWindows(after_pod_scheduled=300),
            SCHEDULED + 300,
            id="annotation-ignored-without-allow-customize",
        ),
        pytest.param(
            pod(annotations={ANNOTATION_SECONDS_AFTER_POD_SCHEDULED: "30"}),
            EstimationWindows(after_pod_scheduled=300, allow_customize=True),
            SCHEDULED + 30,
            id="annotation-overrides-after-pod-scheduled",
        ),
        pytest.param(
            pod(initialized="True", annotations={ANNOTATION_SECONDS_AFTER_INITIALIZED: "5"}),
            EstimationWindows(allow_customize=True),
            INITIALIZED + 5,
            id="annotation-sets-after-initialized",
        ),
        pytest.param(
            pod(annotations={ANNOTATION_SECONDS_AFTER_POD_SCHEDULED: "soon"}),
            EstimationWindows(after_pod_scheduled=300, allow_customize=True),
            SCHEDULED + 300,
            id="malformed-annotation-ignored",
        ),
        pytest.param(
            pod(annotations={ANNOTATION_SECONDS_AFTER_POD_SCHEDULED: "-5"}),
            EstimationWindows(allow_customize=True),
            None,
            id="non-positive-annotation-ignored",
        ),
    ],
)
def test_estimation_deadline(p: Pod, windows: EstimationWindows, want: float | None) -> None:
    assert estimation_deadline(p, assign_time(p, NOW), windows) == want


def test_plugin_keeps_estimating_a_running_pod_within_its_initialized_window() -> None:
    """Reported at NOW - 30 s (interval 60 s): the pod, scheduled 100 s ago and reported, is no longer
    estimated, unless estimatedSecondsAfterInitialized keeps it: Initialized 40 s ago + 60 s > updateTime.
    A later Initialized transition (an update event) moves the deadline."""
    reported = [("default/p", "300m", "256Mi", "koord-prod")]
    running = pod(initialized="True")

    plain, plain_handle = setup([node("n1")], [node_metric("n1", cpu="2", memory="8Gi", pods=reported)], [running])
    windowed, handle = setup(
        [node("n1")],
        [node_metric("n1", cpu="2", memory="8Gi", pods=reported)],
        [running],
        args={"estimatedSecondsAfterInitialized": 60},
    )
    for plugin, snapshot in ((plain, plain_handle.snapshot), (windowed, handle.snapshot)):
        plugin.prepare_cycle(snapshot)  # the cycle syncs found pods
    assert plain.cache.get("n1").node_delta == [0, 0]  # type: ignore[union-attr]
    # estimate - usage: cpu 850m - 300m; memory round(0.7 x 1Gi) - 256Mi
    assert windowed.cache.get("n1").node_delta == [550, 751619277 - 256 * 1024**2]  # type: ignore[union-attr]
    assert len(handle.pod_watches) == 1, "a window is configured: pod updates are followed"

    restarted = pod(initialized="True", initialized_at=NOW - 200)  # initialized long before the report
    handle.pod_watches[0](EventType.MODIFIED, running, restarted)
    assert windowed.cache.get("n1").node_delta == [0, 0]  # type: ignore[union-attr]
