"""Long-running tasks (watches, controller loops) that are started again, never lost, when they raise.

Objects' own problems are contained per object where they are read (the reflectors, the controllers'
per-object steps); what still escapes a long-running task is a bug or an exception nobody foresaw.
Losing the task silently would be the worst outcome: a kind no longer watched, a controller no longer
reconciling, while ``/readyz`` says all is well. So each such failure is

- logged as one line naming the task (the traceback at debug level, :func:`log_failure`),
- counted in ``koord_scheduler_task_restarts_total{task}``,
- followed by a fresh start of the task after a capped, jittered backoff (reset once a run lasted
  :data:`HEALTHY_SECONDS`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter

from koord_scheduler.framework.errors import log_failure

log = logging.getLogger("koord_scheduler.tasks")

HEALTHY_SECONDS = 60.0
"""A run that lasted this long resets the backoff: the next failure is retried after the initial delay."""
INITIAL_DELAY = 1.0
MAX_DELAY = 30.0


class TaskRestarts:
    """Counts and logs restarted tasks (see the module docstring). One per registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.counter = Counter(
            "koord_scheduler_task_restarts",
            "Long-running tasks (watches, controller loops) that raised and were started again, by task.",
            ["task"],
            registry=self.registry,
        )

    def record(self, task: str, exc: BaseException) -> None:
        """``task`` raised ``exc`` and is about to be started again."""
        self.counter.labels(task).inc()
        log_failure(log, f"{task} failed and is restarted", exc)

    def count(self, task: str) -> float:
        """The counter's value for ``task`` (tests)."""
        value = self.registry.get_sample_value("koord_scheduler_task_restarts_total", {"task": task})
        return value or 0.0


async def supervise(
    task: str,
    run: Callable[[], Awaitable[None]],
    *,
    restarts: TaskRestarts,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Await ``run()`` until it returns; each time it raises (anything but cancellation), record it in
    ``restarts`` and call it again after a delay (:data:`INITIAL_DELAY` doubling to :data:`MAX_DELAY`,
    the upper half jittered)."""
    delay = INITIAL_DELAY
    while True:
        started = clock()
        try:
            await run()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            restarts.record(task, exc)
        if clock() - started >= HEALTHY_SECONDS:
            delay = INITIAL_DELAY
        await sleep(delay * (0.5 + 0.5 * random.random()))
        delay = min(MAX_DELAY, delay * 2)
