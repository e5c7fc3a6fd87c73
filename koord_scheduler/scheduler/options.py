"""The scheduler's options and the per-pod outcome it reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from koord_scheduler.scheduler.extenders import Extenders
from koord_scheduler.scheduler.heap import HeapSettler
from koord_scheduler.scheduler.monitor import MonitorOptions


@dataclass(frozen=True, slots=True)
class Outcome:
    """The last result for a pod: ``node`` is None while it is unschedulable."""

    pod_key: str
    node: str | None
    message: str = ""
    attempts: int = 0


@dataclass(slots=True)
class SchedulerOptions:
    max_concurrent_bindings: int = 64
    """Bind requests (Bind plugins or a binding extender) in flight at once; Permit waits and PreBind do
    not take a slot."""
    yield_every: int = 16
    """Scheduling cycles between yields to the event loop (lets watches and bindings progress)."""
    on_outcome: Callable[[Outcome], None] | None = None
    heap: HeapSettler | None = None
    """Settles the garbage collector when :meth:`Scheduler.run` starts and when it is idle (cluster mode
    sets one; see :mod:`.heap`). None leaves the collector alone (tests, ``simulate``)."""
    extenders: Extenders | None = None
    """HTTP extenders from the configuration's ``extenders`` (see :mod:`.extenders`)."""
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES
    """``--feature-gates``; plugins read them through their handle."""
    monitor: MonitorOptions | None = None
    """``--scheduling-timeout`` / ``--scheduler-monitor-period`` (see :mod:`.monitor`); None (tests,
    ``simulate``): attempts are not followed."""
