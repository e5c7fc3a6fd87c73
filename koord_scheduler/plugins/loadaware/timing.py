"""When an assigned pod counts as placed, and until when it is estimated regardless of its reported usage.

Koordinator's podAssignCache (Koordinator ``pkg/scheduler/plugins/loadaware``):

- the assign time ``t_p`` is the pod's ``PodScheduled`` lastTransitionTime when the condition is True,
  else the time the scheduler assigns it (Reserve);
- the forced-estimation deadline is ``Initialized`` lastTransitionTime + ``estimatedSecondsAfterInitialized``
  when that is set and the pod is Initialized, else ``t_p + estimatedSecondsAfterPodScheduled`` when that
  is set, else none;
- with ``allowCustomizeEstimation`` the pod's annotations
  ``scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled`` / ``...-after-initialized``
  (whole seconds, > 0) replace the arguments for that pod; a malformed value is ignored.

pykoord difference: a pod found on a node without a ``PodScheduled`` transition time (a ``simulate`` file's
pods) takes its creation time instead of "now", so a cluster file's running pods are not all taken as
just placed. Real pods always carry the condition.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.core.types import Pod

ANNOTATION_SECONDS_AFTER_POD_SCHEDULED = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
ANNOTATION_SECONDS_AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
POD_SCHEDULED = "PodScheduled"
INITIALIZED = "Initialized"


@dataclass(frozen=True, slots=True)
class EstimationWindows:
    """The plugin's ``estimatedSecondsAfterPodScheduled`` / ``estimatedSecondsAfterInitialized`` (None or
    0: unset) and ``allowCustomizeEstimation``."""

    after_pod_scheduled: float | None = None
    after_initialized: float | None = None
    allow_customize: bool = False

    @property
    def may_need_pod_updates(self) -> bool:
        """Whether a pod's condition changes can move its deadline (else pod updates can be ignored)."""
        return bool(self.after_pod_scheduled or self.after_initialized or self.allow_customize)


def _custom_seconds(pod: Pod, annotation: str) -> float | None:
    raw = pod.meta.annotations.get(annotation)
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        return None
    return float(value) if value > 0 else None


def transition_time(pod: Pod, condition: str) -> float | None:
    """The condition's lastTransitionTime when its status is True, else None."""
    if pod.conditions.get(condition) != "True":
        return None
    return pod.condition_times.get(condition)


def assign_time(pod: Pod, fallback: float | None) -> float | None:
    """``t_p``: the PodScheduled transition when the pod is scheduled, else ``fallback``."""
    scheduled = transition_time(pod, POD_SCHEDULED)
    return scheduled if scheduled is not None else fallback


def estimation_deadline(pod: Pod, assigned_at: float | None, windows: EstimationWindows) -> float | None:
    """Until when the pod is estimated whatever its reported usage (None: no forced window)."""
    after_scheduled, after_initialized = windows.after_pod_scheduled, windows.after_initialized
    if windows.allow_customize:
        after_scheduled = _custom_seconds(pod, ANNOTATION_SECONDS_AFTER_POD_SCHEDULED) or after_scheduled
        after_initialized = _custom_seconds(pod, ANNOTATION_SECONDS_AFTER_INITIALIZED) or after_initialized
    if after_initialized:
        initialized = transition_time(pod, INITIALIZED)
        if initialized is not None:
            return initialized + after_initialized
    if after_scheduled and assigned_at is not None:
        return assigned_at + after_scheduled
    return None
