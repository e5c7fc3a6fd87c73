"""koordlet's way to kubeapi: one daemon thread running an asyncio loop with one :class:`~kubeapi.http.ApiHttp`.

koordlet's collectors, QoS plugins and writers are threads and blocking calls; kubeapi is asyncio. An
:class:`ApiLoop` bridges the two: the reflectors of :mod:`.kube` run as tasks on its loop (four watches
on one thread, where the kubernetes client needed a thread each), and a blocking caller sends a request
with :meth:`ApiLoop.call`, which waits for the result on the loop. Every request goes through kubeapi's
HTTP stack (its request-line and header checks, its token bucket).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from kubeapi.connection import Connection
from kubeapi.http import ApiHttp, HttpOptions
from kubeapi.ratelimit import TokenBucket

T = TypeVar("T")

DEFAULT_QPS = 20.0
DEFAULT_BURST = 40
USER_AGENT = "koordlet/pykoord"


class ApiLoop:
    """See the module docstring. :meth:`start` before use; :meth:`stop` ends the tasks and the thread."""

    def __init__(self, connection: Connection, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST) -> None:
        self.connection = connection
        self.loop = asyncio.new_event_loop()
        self.http = ApiHttp(connection, TokenBucket(qps, burst), options=HttpOptions(user_agent=USER_AGENT))
        self._thread = threading.Thread(target=self._run, name="kube-api", daemon=True)
        self._tasks: set[asyncio.Task[Any]] = set()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        """Start the thread (again a no-op once started). Raises ``RuntimeError`` after :meth:`stop`."""
        if self.loop.is_closed():
            raise RuntimeError("ApiLoop is stopped")
        if not self._thread.is_alive():
            self._thread.start()

    def spawn(self, make: Callable[[], Coroutine[Any, Any, None]], *, name: str) -> None:
        """Run ``make()`` as a task on the loop (a reflector); it is cancelled by :meth:`stop`."""

        def create() -> None:
            task = self.loop.create_task(make(), name=name)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self.loop.call_soon_threadsafe(create)

    def call(self, request: Callable[[ApiHttp], Awaitable[T]], *, timeout: float = 60.0) -> T:
        """``request(http)`` on the loop; blocks the calling thread (never the loop's own) until it returns,
        and returns or raises what it did. ``TimeoutError`` after ``timeout`` seconds."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("ApiLoop.call from the loop's own thread would deadlock")
        self.start()

        async def run() -> T:
            return await request(self.http)

        future = asyncio.run_coroutine_threadsafe(run(), self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"API request did not finish within {timeout:.0f}s") from None

    def stop(self, *, timeout: float = 5.0) -> None:
        """Cancel the tasks, close the connections and end the thread (a loop never started is closed)."""
        if not self._thread.is_alive():
            if self._thread.ident is None and not self.loop.is_closed():
                self.loop.close()
            return

        async def shutdown() -> None:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.http.close()

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
