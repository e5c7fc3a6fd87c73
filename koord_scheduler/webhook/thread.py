"""The admission server off the scheduling event loop: a thread with its own event loop.

Every pod creation in the cluster reaches the webhook, and a review can be megabytes of JSON; served on the
scheduler's loop, reading, decoding and answering reviews ran between scheduling cycles and delayed them.
:class:`AdmissionThread` runs the whole :class:`~.options.WebhookRuntime` (its own API connection, watch
caches, Event recorder and HTTPS server) on a loop of its own in a daemon thread. The scheduler's loop
only starts and stops it. The two share the Prometheus registry (thread-safe) and the process's cores:
Python code of both still takes turns on the GIL, but never waits for the other's I/O, and no review
holds a scheduling cycle back (see ``bench/webhook_flood.py`` for what is left).

A thread, not a process: the runtime keeps its own connection and caches either way, and a process would
need its own metrics endpoint and lifecycle for little more isolation at the body limit of 3 MiB
(the measurements are in ``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable

from koord_scheduler.webhook.options import WebhookRuntime

log = logging.getLogger(__name__)

STOP_SECONDS = 15.0


class AdmissionThread:
    """Runs ``make_runtime()`` (called on the thread's loop) until :meth:`stop`.

    :meth:`start` returns once the server listens and raises what the runtime's start raised (a port in
    use, certificates that cannot be made); :meth:`stop` stops the runtime and joins the thread."""

    def __init__(
        self,
        make_runtime: Callable[[], WebhookRuntime],
        *,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self.make_runtime = make_runtime
        self.loop_factory = loop_factory
        self.runtime: WebhookRuntime | None = None
        self._started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="admission", daemon=True)

    async def start(self) -> None:
        self._thread.start()
        await asyncio.wrap_future(self._started)

    async def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join, STOP_SECONDS)
            if self._thread.is_alive():
                log.warning("the admission thread did not stop within %.0fs", STOP_SECONDS)

    def _main(self) -> None:
        try:
            with asyncio.Runner(loop_factory=self.loop_factory) as runner:
                runner.run(self._serve())
        except BaseException as exc:  # the start failed before _serve could report it
            if not self._started.done():
                self._started.set_exception(exc)
            else:
                log.exception("the admission thread ended with an error")

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        runtime = self.make_runtime()
        self.runtime = runtime
        try:
            await runtime.start()
        except BaseException as exc:
            await runtime.stop()
            self._started.set_exception(exc)
            return
        self._started.set_result(None)
        try:
            await self._stop.wait()
        finally:
            await runtime.stop()
