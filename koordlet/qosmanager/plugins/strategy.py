"""The loop every QoS strategy shares: tick on an interval, decide, hand the plan over, recover on the way out.

A strategy subclasses :class:`Strategy` and implements :meth:`Strategy.tick` (build a snapshot, call its pure
``policy`` function, pass the plan to :meth:`Strategy.apply`) and, if it changes cgroups, :meth:`recover`.
The process feature gate decides whether the QoS manager runs the plugin at all; the NodeSLO switch is read
by ``tick`` on every tick. A tick that raises is logged and counted and the next tick runs as usual, so one
bad snapshot never takes a strategy (or the agent) down. ``--qos-dry-run`` turns every plan into a log line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.framework import PluginContext

log = logging.getLogger("koordlet.qos")


def add_flag(parser: argparse.ArgumentParser, *names: str, **kwargs: Any) -> None:
    """``add_argument`` unless an earlier plugin already added the flag (flags shared by a family): argparse
    refuses a second definition of an option string, and that refusal is the "already there" answer."""
    with contextlib.suppress(argparse.ArgumentError):
        parser.add_argument(*names, **kwargs)


def arg(ctx: PluginContext, name: str, default: Any) -> Any:
    """A parsed flag, or ``default`` when the agent was built without it (tests, embedding)."""
    value = getattr(ctx.args, name, None)
    return default if value is None else value


async def _wait_first(a: asyncio.Event, b: asyncio.Event, *, timeout: float) -> None:
    """Return when ``a`` or ``b`` is set, or after ``timeout`` seconds."""
    waiters = [asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class Strategy:
    """Base of the built-in strategies. Subclasses set ``NAME`` and ``INTERVAL_FLAG`` and implement ``tick``."""

    NAME = ""
    INTERVAL_FLAG = ""
    """argparse dest of this strategy's interval flag (seconds)."""
    DEFAULT_INTERVAL = 1.0
    """The interval when the agent was built without the flag (tests, embedding); the flag's default."""
    BLOCKING = False
    """Run ``tick`` in a worker thread (it makes blocking API calls, e.g. evictions)."""
    FOLLOW_COLLECT = False
    """Tick right after each metrics collection (the metric cache's "collected" signal) instead of on a
    free-running timer, so a decision sees a sample at most one collect interval old the moment it exists.
    The interval flag still sets the minimum spacing of ticks; without collections (no advisor, or it is
    stuck) the strategy falls back to ticking every ``max(interval, 2 x collect interval)``."""

    def __init__(self) -> None:
        self._ctx: PluginContext | None = None
        self.interval = 1.0
        self.collect_interval = 1.0
        self.dry_run = False
        self.ticks = 0
        self.errors = 0
        self.object_errors = 0
        """Failures contained to one pod or object (that object skipped, the others handled)."""
        self.last_plan: list[ResourceUpdate] = []
        self._failing: set[str] = set()
        self._last_tick_error = ""

    @property
    def ctx(self) -> PluginContext:
        if self._ctx is None:
            raise RuntimeError(f"{self.NAME}: setup() has not been called")
        return self._ctx

    # -- ExtensionPlugin ----------------------------------------------------------------------

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        add_flag(parser, "--qos-dry-run", action="store_true", help="QoS strategies log their plans, write nothing")

    def setup(self, ctx: PluginContext) -> None:
        self._ctx = ctx
        self.dry_run = bool(arg(ctx, "qos_dry_run", False))
        self.collect_interval = float(arg(ctx, "collect_res_used_interval", 1.0))
        if self.INTERVAL_FLAG:
            self.interval = float(arg(ctx, self.INTERVAL_FLAG, self.DEFAULT_INTERVAL))
        if self.interval <= 0:
            raise ValueError(f"{self.NAME}: interval must be > 0, got {self.interval}")
        self.configure(ctx)

    def configure(self, ctx: PluginContext) -> None:
        """Per-strategy setup (metrics, flags); raise to refuse to start."""

    async def run(self, stop: asyncio.Event) -> None:
        try:
            if self.FOLLOW_COLLECT:
                await self._run_following_collect(stop)
                return
            while not stop.is_set():
                await self._tick_once()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.interval)
        finally:
            self.safe_recover("stopping")

    async def _tick_once(self) -> None:
        if self.BLOCKING:
            await asyncio.to_thread(self.safe_tick)
        else:
            self.safe_tick()

    async def _run_following_collect(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        collected = asyncio.Event()
        stamp = [float("-inf")]  # the newest collection's time (the collectors' clock)

        def on_collected(t: float) -> None:
            def mark() -> None:
                stamp[0] = max(stamp[0], t)
                collected.set()

            loop.call_soon_threadsafe(mark)

        unsubscribe = self.ctx.metric_cache.subscribe_collected(on_collected)
        # Spacing is measured on the collection stamps. Half a collect interval of slack keeps a tick on
        # every collection when interval == collect interval despite jitter in the collect loop.
        min_spacing = self.interval - self.collect_interval / 2
        fallback = max(self.interval, 2 * self.collect_interval)
        try:
            last = float("-inf")  # the first collection always ticks: the start-up tick may have had no data
            await self._tick_once()  # the first tick at once (it also recovers what a crashed agent left)
            while not stop.is_set():
                await _wait_first(collected, stop, timeout=fallback)
                if stop.is_set():
                    break
                if collected.is_set():
                    collected.clear()
                    if stamp[0] - last < min_spacing:
                        continue  # too soon after the last tick (interval > collect interval)
                    last = stamp[0]
                else:
                    last = self.ctx.clock()  # no collection within the fallback: tick anyway (recovery, NodeSLO)
                await self._tick_once()
        finally:
            unsubscribe()

    # -- strategy hooks -----------------------------------------------------------------------

    def tick(self) -> None:
        raise NotImplementedError

    def recover(self) -> None:
        """Undo what this strategy changed (e.g. BE quota back to -1). Idempotent."""

    # -- helpers ------------------------------------------------------------------------------

    def safe_tick(self) -> None:
        """Run ``tick``; a failure is counted and logged as one line, once per distinct error until a tick
        succeeds again (the traceback only at debug level), and the next tick runs as usual."""
        try:
            self.tick()
        except Exception as err:
            self.errors += 1
            text = f"{type(err).__name__}: {err}"
            if text != self._last_tick_error:
                self._last_tick_error = text
                log.warning(
                    "%s: tick failed: %s; the next tick runs as usual",
                    self.NAME,
                    text,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
        else:
            if self._last_tick_error:
                log.info("%s: ticks succeed again", self.NAME)
            self._last_tick_error = ""
        self.ticks += 1

    def contain(self, obj: str, step: Callable[[], None]) -> bool:
        """Run one object's share of a tick (``obj`` names it, e.g. ``pod default/web-1``). A failure skips
        that object only: it is counted (``object_errors`` and ``koordlet_qos_object_errors``) and logged
        once, with the object's name, until the object succeeds again. Returns whether ``step`` succeeded."""
        try:
            step()
        except Exception as err:
            self.object_errors += 1
            counter = self.ctx.object_errors
            if counter is not None:
                counter.labels(node=self.ctx.node_name, strategy=self.NAME).inc()
            if obj not in self._failing:
                self._failing.add(obj)
                log.warning(
                    "%s: %s skipped: %s: %s (logged once until it succeeds)",
                    self.NAME,
                    obj,
                    type(err).__name__,
                    err,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
            return False
        if obj in self._failing:
            self._failing.discard(obj)
            log.info("%s: %s handled again", self.NAME, obj)
        return True

    def safe_recover(self, why: str) -> None:
        if self._ctx is None:
            return
        try:
            self.recover()
        except Exception as err:
            self.errors += 1
            log.warning("%s: recovery (%s) failed: %s", self.NAME, why, err, exc_info=log.isEnabledFor(logging.DEBUG))

    def apply(self, plan: Sequence[ResourceUpdate], *, leveled: Sequence[Sequence[ResourceUpdate]] = ()) -> None:
        """Hand a plan to the executor (``leveled``: parent-first merge, then child-first exact values).

        In dry-run mode the plan is logged and nothing is written.
        """
        flat = [*plan, *(u for level in leveled for u in level)]
        self.last_plan = flat
        if not flat:
            return
        if self.dry_run:
            for update in flat:
                log.warning(
                    "%s dry-run: would write %s/%s = %s", self.NAME, update.rel_dir, update.resource, update.value
                )
            return
        if plan:
            self.ctx.executor.apply(plan)
        if leveled:
            self.ctx.executor.apply_leveled(leveled)
