"""The scheduling monitor: one warning, and a counter, for a pod whose scheduling runs too long
(Koordinator ``pkg/scheduler/frameworkext/scheduler_monitor.go``).

A pod is followed from the start of its scheduling cycle until its attempt ends: bound (after PostBind),
or failed anywhere (the scheduling cycle, rejected at Permit, a failed PreBind or Bind). When the attempt
has run longer than ``--scheduling-timeout`` (30 s, Koordinator's default) the scheduler logs, once for
that attempt::

    !!!CRITICAL TIMEOUT!!! scheduling pod ns/name(uid) took longer (41.2s) than the timeout 30s
    (stage: waiting on Permit)

(one line in the log) and adds one to ``scheduler_scheduling_timeout_total{profile}`` (Koordinator's
``scheduler_scheduling_timeout``; Prometheus' Python client names every counter ``..._total``). The
stage is where the attempt was when the line was written: ``scheduling cycle``, ``waiting on Permit``,
``PreBind`` or ``Bind``.

Bindings are checked every ``--scheduler-monitor-period`` (10 s) while they run, so a binding stuck on an
API call or a gang waiting at Permit is reported while it is stuck. The scheduling cycle is synchronous
(nothing else runs during it), so a long cycle is reported the moment it ends. Koordinator logs and counts
again at every period for as long as the attempt runs, and once more when it ends; here an attempt is
logged and counted once, so the counter counts slow attempts. Attempts in ``simulate`` are not followed
(its time is virtual).

Plain state and an injected clock; :meth:`SchedulingMonitor.run` is the periodic check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the flags (koord-scheduler --help) read MonitorOptions without loading the metrics client
    from prometheus_client import CollectorRegistry, Counter

    from apis.core.types import Pod

log = logging.getLogger("koord-scheduler")

DEFAULT_SCHEDULING_TIMEOUT = 30.0
DEFAULT_MONITOR_PERIOD = 10.0

STAGE_CYCLE = "scheduling cycle"
STAGE_PERMIT = "waiting on Permit"
STAGE_PRE_BIND = "PreBind"
STAGE_BIND = "Bind"

METRIC_NAME = "scheduler_scheduling_timeout"


@dataclass(frozen=True, slots=True)
class MonitorOptions:
    timeout: float = DEFAULT_SCHEDULING_TIMEOUT
    """``--scheduling-timeout``: seconds an attempt may run before it is reported; 0 turns the monitor off."""
    period: float = DEFAULT_MONITOR_PERIOD
    """``--scheduler-monitor-period``: seconds between checks of the bindings in flight."""


@dataclass(slots=True)
class _Attempt:
    pod: str
    uid: str
    profile: str
    started: float
    stage: str = STAGE_CYCLE
    reported: bool = field(default=False)


def timeout_line(pod: str, uid: str, *, elapsed: float, timeout: float, stage: str) -> str:
    """The warning, worded as Koordinator's so a search for its text finds ours."""
    return (
        f"!!!CRITICAL TIMEOUT!!! scheduling pod {pod}({uid}) took longer ({_seconds(elapsed)}) than the timeout "
        f"{_seconds(timeout)} (stage: {stage})"
    )


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value % 1 else f"{value:.0f}s"


class SchedulingMonitor:
    """Follows attempts by pod key. The scheduler calls :meth:`start`, :meth:`stage` and :meth:`complete`
    on its own thread; :meth:`check` runs on the same event loop."""

    def __init__(
        self,
        options: MonitorOptions,
        registry: CollectorRegistry,
        *,
        profiles: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        self.clock = clock
        self.counter: Counter | None = None
        """Registered only when the monitor is on: a scheduler built twice on one registry (tests) must not
        register it twice."""
        if self.enabled:
            from prometheus_client import Counter

            self.counter = Counter(
                METRIC_NAME,
                "Scheduling attempts that ran longer than --scheduling-timeout (each counted once), by profile.",
                ["profile"],
                registry=registry,
            )
            for profile in profiles:  # the series exist (at 0) before the first slow attempt
                self.counter.labels(profile)
        self._attempts: dict[str, _Attempt] = {}

    @property
    def enabled(self) -> bool:
        return self.options.timeout > 0

    def start(self, pod: Pod, profile: str) -> None:
        """``pod``'s scheduling cycle begins (a new attempt replaces any earlier one of the pod)."""
        if self.enabled:
            self._attempts[pod.key] = _Attempt(pod.key, pod.uid, profile, self.clock())

    def stage(self, key: str, stage: str) -> None:
        """The attempt moves on to ``stage``; first reported if the stage it leaves ran it past the timeout
        (the only moment a scheduling cycle can be seen to have run long)."""
        attempt = self._attempts.get(key)
        if attempt is None:
            return
        self._report_if_late(attempt, self.clock())
        attempt.stage = stage

    def complete(self, key: str) -> None:
        """The attempt ended (bound or failed): reported if it ran past the timeout and was not yet."""
        attempt = self._attempts.pop(key, None)
        if attempt is not None:
            self._report_if_late(attempt, self.clock())

    def check(self) -> int:
        """Report every attempt in flight past the timeout; the number reported now."""
        now = self.clock()
        return sum(self._report_if_late(a, now) for a in list(self._attempts.values()))

    def in_flight(self) -> int:
        return len(self._attempts)

    def _report_if_late(self, attempt: _Attempt, now: float) -> bool:
        elapsed = now - attempt.started
        if attempt.reported or elapsed <= self.options.timeout:
            return False
        attempt.reported = True
        log.warning(
            "%s",
            timeout_line(attempt.pod, attempt.uid, elapsed=elapsed, timeout=self.options.timeout, stage=attempt.stage),
        )
        if self.counter is not None:
            self.counter.labels(attempt.profile).inc()
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """:meth:`check` every ``period`` seconds until ``stop`` is set."""
        if not self.enabled:
            return
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.options.period)
            except TimeoutError:
                self.check()
