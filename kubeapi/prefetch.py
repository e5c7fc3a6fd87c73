"""The first list of Nodes and Pods, started while the rest of the process is still starting.

Start-up is two kinds of waiting: this process's CPU (imports, reading the configuration, building the
profiles) and the API server's (encoding thousands of objects as JSON, on its own core). A
:class:`Prefetch` started right after the flags are read loads the kubeconfig and lists Nodes and Pods
on a thread with its own event loop, parsing each page while the next one is on its way, so the API
server works while the main thread imports and builds. :meth:`KubeClusterSource.start` then takes these
lists instead of listing again, the Pods page by page as they come (bound pods are delivered at once,
pending ones at the end); the watches start from the lists' resourceVersion, so nothing that changed in
between is missed. When an early list fails, ``start`` lists that kind as usual (with its retries).

The parsed values are the ones the source's own list would produce (the same :class:`ResourceKind`
parsers); the thread touches nothing the main thread uses until the lists are handed over.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubeapi.connection import Connection
    from kubeapi.reflector import ReflectorOptions, ResourceKind

log = logging.getLogger(__name__)

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Listed:
    """One kind's first list: the raw objects, the list's resourceVersion, and ``prepared`` (key ->
    (resourceVersion, parsed value)) for the objects that parsed."""

    items: list[Json]
    resource_version: str
    prepared: dict[str, tuple[str, Any]]
    seconds: float
    """From the start of the list to its last page parsed."""


def from_kubeconfig(path: str) -> Callable[[], Connection]:
    """``connect`` for :class:`Prefetch`: :func:`~.kube.connection.load_connection` of ``path`` (loaded on
    the thread, with the modules it needs)."""

    def connect() -> Connection:
        from kubeapi.connection import load_connection

        return load_connection(path)

    return connect


class Prefetch:
    """Calls ``connect`` and lists Nodes and Pods on a daemon thread; see the module docstring.
    ``qps``/``burst`` limit its requests as ``clientConnection`` does. The Pods' pages are also handed
    over one by one (:meth:`pod_pages`) so that bound pods can be delivered while the list goes on."""

    KINDS = ("Node", "Pod")

    def __init__(
        self,
        connect: Callable[[], Connection],
        *,
        qps: float,
        burst: int,
        reflector: ReflectorOptions | None = None,
    ) -> None:
        self.connect = connect
        self.qps = qps
        self.burst = burst
        self.reflector = reflector
        self._connection: concurrent.futures.Future[Connection] = concurrent.futures.Future()
        self._listed: dict[str, concurrent.futures.Future[Listed]] = {
            kind: concurrent.futures.Future() for kind in self.KINDS
        }
        self._pod_pages: queue.SimpleQueue[tuple[list[Json], dict[str, tuple[str, Any]]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="prefetch-lists", daemon=True)

    def start(self) -> Prefetch:
        self._thread.start()
        return self

    def connection(self) -> Connection:
        """The connection (waits for the kubeconfig to be loaded); raises what loading it raised
        (:class:`~.kube.connection.KubeConfigError`)."""
        return self._connection.result()

    def done(self) -> bool:
        """Both early lists are in (or failed)."""
        return all(future.done() for future in self._listed.values())

    def release(self) -> None:
        """Forget the lists once the source has delivered them. Whoever started the prefetch keeps it
        until the process exits; without this the raw JSON of every Node and Pod of the first lists
        (hundreds of MB at 50,000 pods) would stay as long. :meth:`listed` says None afterwards."""
        self._listed = {}

    async def listed(self, kind: str) -> Listed | None:
        """``kind``'s (``Node``, ``Pod``) early list; None when there is none or it failed (logged)."""
        future = self._listed.get(kind)
        if future is None:
            return None
        try:
            return await asyncio.shield(asyncio.wrap_future(future))  # a cancelled waiter leaves it be
        except Exception as exc:  # the source lists again, with its own retries and messages
            log.info("early list of %ss failed (%s); listing again", kind, exc)
            return None

    async def pod_pages(self) -> AsyncIterator[tuple[list[Json], dict[str, tuple[str, Any]]]]:
        """The Pods' pages as they come, each with the values parsed from it, until the list ends (or
        fails: then :meth:`listed` says None)."""
        while True:
            item = await asyncio.to_thread(self._pod_pages.get)
            if item is None:
                return
            yield item

    # ----- the thread -----

    def _run(self) -> None:
        try:
            connection = self.connect()
        except BaseException as exc:
            self._connection.set_exception(exc)
            for future in self._listed.values():
                future.set_exception(exc)
            self._pod_pages.put(None)
            return
        self._connection.set_result(connection)
        try:
            asyncio.run(self._list(connection))
        except BaseException as exc:
            for future in self._listed.values():
                if not future.done():
                    future.set_exception(exc)
        finally:
            self._pod_pages.put(None)

    async def _list(self, connection: Connection) -> None:
        from kubeapi.core_kinds import NODE_KIND, POD_KIND
        from kubeapi.http import ApiHttp, HttpOptions
        from kubeapi.ratelimit import TokenBucket

        http = ApiHttp(connection, TokenBucket(self.qps, self.burst), options=HttpOptions(pool_size=4))
        try:
            await asyncio.gather(
                self._list_one(http, NODE_KIND), self._list_one(http, POD_KIND, pages=True), return_exceptions=True
            )
        finally:
            await http.close()

    async def _list_one(self, http: Any, kind: ResourceKind[Any], *, pages: bool = False) -> None:
        from kubeapi.reflector import Reflector

        future = self._listed[kind.kind]
        started = time.monotonic()
        try:
            reflector = Reflector(http, kind, _unused_handler, options=self.reflector)
            on_page = (lambda page, ready: self._pod_pages.put((page, ready))) if pages else None
            items, resource_version = await reflector.list_all(prepare=True, on_page=on_page)
            future.set_result(Listed(items, resource_version, reflector.take_prepared(), time.monotonic() - started))
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            if pages:
                self._pod_pages.put(None)


def _unused_handler(*_: Any) -> None:
    raise AssertionError("a prefetching reflector delivers nothing")
