"""Raw JSON over HTTP to the API server, with keep-alive connections and a token bucket.

Ordinary requests go through :class:`~.http1.Http1Pool` (lean HTTP/1.1 on asyncio streams); watch
streams through aiohttp.

No kubernetes client models: bodies go in and come out as bytes / ``json`` dicts (the client's models
cost about 1 ms per pod, and its Binding response parsing is broken). Every failure is a
:class:`~koord_scheduler.framework.errors.ClusterError`: :class:`ApiError` when the server answered
with an error status (its ``metav1.Status`` reason and message are kept), :class:`ApiConnectionError`
when it could not be reached, :class:`~.paths.InvalidRequestError` when the request was refused before
anything was sent.

Every request line and header value goes through :func:`apis.core.paths.check_request_line` /
:func:`~apis.core.paths.check_header` first, whoever built the path (:mod:`.paths` builds them all): a
space, CR, LF, NUL or other control character could end the line and smuggle a second request that
would run with the scheduler's identity, so it is refused and nothing is written to the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import aiohttp
from yarl import URL

from apis.core.paths import UnsafeRequestError, check_header, check_request_line
from kubeapi import jsoncodec, protowire
from kubeapi.connection import Connection
from kubeapi.errors import ClusterError
from kubeapi.http1 import CLOSE_WAIT_SECONDS, Http1Pool
from kubeapi.paths import InvalidRequestError
from kubeapi.ratelimit import TokenBucket

if TYPE_CHECKING:
    from kubeapi.http2 import Http2Client

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

MAX_THROTTLE_RETRIES = 5
"""429 answers retried (after Retry-After) before giving up, as client-go does (it allows 10)."""


class ApiError(ClusterError):
    """The API server answered ``status`` (>= 300). ``reason`` is the ``metav1.Status`` reason
    (``NotFound``, ``Conflict``, ``Expired``...), ``message`` its message."""

    def __init__(self, status: int, reason: str, message: str, *, method: str = "", path: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status} {reason}: {message}" if reason else f"{where}{status}: {message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


class ApiConnectionError(ClusterError):
    """The API server could not be reached or the connection broke."""


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """``pool_size`` bounds open connections (watches hold one each while they run).
    ``request_timeout`` is for ordinary requests; ``watch_read_timeout`` is the longest silence
    tolerated on a watch stream (the API server sends a bookmark about once a minute)."""

    pool_size: int = 256
    request_timeout: float = 30.0
    watch_read_timeout: float = 150.0
    user_agent: str = "koord-scheduler/pykoord"
    http2: bool = False
    """Ordinary requests as streams of one HTTP/2 connection (:mod:`.http2`, ALPN ``h2``) instead of the
    HTTP/1.1 pool of up to ``pool_size`` connections; watches stay on aiohttp either way."""


class ApiHttp:
    """One connection pool to one API server, rate limited by ``limiter``. Create and use it on the
    event loop; :meth:`close` when done."""

    def __init__(self, connection: Connection, limiter: TokenBucket, *, options: HttpOptions | None = None) -> None:
        self.connection = connection
        self.limiter = limiter
        self.options = options or HttpOptions()
        self.in_flight = 0
        """Ordinary requests (not watches) under way; others use it to tell whether this pool is busy."""
        self._session: aiohttp.ClientSession | None = None
        """aiohttp, for watch streams only."""
        self._pool: Http1Pool | None = None
        """Our own keep-alive pool, for every other request (see :mod:`.http1`)."""
        self._h2: Http2Client | None = None
        """Instead of ``_pool`` when ``options.http2``."""
        self._watch_closing: set[asyncio.Future[None]] = set()
        """Watch connections that may still be open or shutting down (TLS needs the loop to finish
        that): :meth:`close` waits for them, see :meth:`stream`."""
        _checked("User-Agent", self.options.user_agent)
        self._static_headers = f"User-Agent: {self.options.user_agent}"
        self._user_agent = self.options.user_agent.encode("latin-1")
        self._accept_lines: dict[str, str] = {JSON: f"Accept: {JSON}"}
        """Accept media type -> its checked header line (checked once, not per request)."""

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.options.pool_size,
                limit_per_host=self.options.pool_size,
                ssl=self.connection.ssl_context if self.connection.ssl_context is not None else False,
                enable_cleanup_closed=False,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.options.request_timeout),
                headers={"User-Agent": self.options.user_agent},
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session

    def _headers(self, content_type: str | None, accept: str = JSON) -> dict[str, str]:
        headers: dict[str, str] = {"Accept": _checked("Accept", accept)}
        auth = self.connection.authorization()
        if auth:
            headers["Authorization"] = _checked("Authorization", auth)
        if content_type:
            headers["Content-Type"] = _checked("Content-Type", content_type)
        return headers

    def _kwargs(self) -> dict[str, Any]:
        if self.connection.tls_server_name:
            return {"server_hostname": self.connection.tls_server_name}
        return {}

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
        accept: str = JSON,
    ) -> bytes:
        """Send one request and return the response body; ``body`` is JSON-encoded unless it is bytes.
        ``accept`` is the media type asked for (:data:`kubeapi.protowire.PROTOBUF` for built-in kinds)."""
        data = body if body is None or isinstance(body, bytes) else jsoncodec.dumps(body)
        self.in_flight += 1
        try:
            _, payload = await self._send(method, path, data, content_type=content_type, params=params, accept=accept)
            return payload
        finally:
            self.in_flight -= 1

    async def request_status(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> int:
        """Like :meth:`request`, but returns the success status (200, 201...) and drops the body.
        ``retry_throttled=False``: a 429 is raised at once as an :class:`ApiError` instead of being retried
        after its Retry-After (an Eviction refused by a PodDisruptionBudget is an answer, not throttling)."""
        data = body if body is None or isinstance(body, bytes) else jsoncodec.dumps(body)
        self.in_flight += 1
        try:
            status, _ = await self._send(
                method, path, data, content_type=content_type, params=None, retry_throttled=retry_throttled
            )
            return status
        finally:
            self.in_flight -= 1

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        *,
        content_type: str,
        params: Mapping[str, str] | None,
        accept: str = JSON,
        retry_throttled: bool = True,
    ) -> tuple[int, bytes]:
        target = f"{path}?{urlencode(params)}" if params else path
        _checked_line(method, target)
        accept_line = self._accept_lines.get(accept)
        if accept_line is None:
            accept_line = self._accept_lines[accept] = f"Accept: {_checked('Accept', accept)}"
        auth = self.connection.authorization()
        if auth:
            _checked("Authorization", auth)
        if data is not None:
            _checked("Content-Type", content_type)
        if self.options.http2:
            client = self._get_h2()
            headers = [(b"user-agent", self._user_agent), (b"accept", accept_line[8:].encode("latin-1"))]
            if auth:
                headers.append((b"authorization", auth.encode("latin-1")))
            if data is not None:
                headers.append((b"content-type", content_type.encode("latin-1")))

            def exchange() -> Any:
                return client.request(method, target, headers, data, timeout=self.options.request_timeout)

        else:
            pool = self._get_pool()
            lines = [f"{method} {target} HTTP/1.1", f"Host: {pool.host_header}", self._static_headers, accept_line]
            if auth:
                lines.append(f"Authorization: {auth}")
            if data is not None:
                lines.append(f"Content-Type: {content_type}\r\nContent-Length: {len(data)}")
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

            def exchange() -> Any:
                return pool.request(head, data, timeout=self.options.request_timeout)

        for attempt in range(MAX_THROTTLE_RETRIES + 1):
            await self.limiter.acquire()
            try:
                status, payload, retry_after = await exchange()
            except (OSError, TimeoutError, EOFError, ValueError, asyncio.LimitOverrunError) as exc:
                raise ApiConnectionError(f"{method} {path}: {_describe(exc)}") from exc
            if status < 300:
                return status, payload
            if status == 429 and retry_throttled and attempt < MAX_THROTTLE_RETRIES:
                await asyncio.sleep(_retry_after(retry_after))
                continue
            raise api_error(status, payload, method=method, path=path)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _get_h2(self) -> Http2Client:
        if self._h2 is None:
            from kubeapi.http2 import Http2Client  # h2 is loaded only when HTTP/2 is asked for

            context = self.connection.h2_ssl_context()
            if self.connection.ssl_context is not None and context is None:
                raise InvalidRequestError(f"{self.connection.description}: no TLS context for HTTP/2 (ALPN h2)")
            client = Http2Client(
                self.connection.server, ssl_context=context, server_hostname=self.connection.tls_server_name
            )
            _checked("Host", client.authority.decode("latin-1"))
            self._h2 = client
        return self._h2

    def _get_pool(self) -> Http1Pool:
        if self._pool is None:
            pool = Http1Pool(
                self.connection.server,
                ssl_context=self.connection.ssl_context,
                server_hostname=self.connection.tls_server_name,
                size=self.options.pool_size,
            )
            _checked("Host", pool.host_header)
            self._pool = pool
        return self._pool

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        payload = await self.request(method, path, body=body, content_type=content_type, params=params)
        try:
            return jsoncodec.loads(payload)
        except ValueError as exc:
            raise ApiError(200, "InvalidResponse", f"not JSON: {exc}", method=method, path=path) from None

    @asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str], *, accept: str = JSON
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """A GET whose body is read incrementally (watches). Raises like :meth:`request` when the
        server refuses; the body's own read errors surface as :class:`ApiConnectionError` too.
        ``accept``: as for :meth:`request` (a protobuf watch comes as length-prefixed frames)."""
        target = f"{path}?{urlencode(params)}" if params else path
        _checked_line("GET", target)
        headers = self._headers(None, accept)
        await self.limiter.acquire()
        timeout = aiohttp.ClientTimeout(total=None, sock_read=self.options.watch_read_timeout)
        try:
            async with self._get_session().get(
                URL(self.connection.server + target, encoded=True),
                headers=headers,
                timeout=timeout,
                **self._kwargs(),
            ) as resp:
                self._track_close(resp)
                if resp.status >= 300:
                    raise api_error(resp.status, await resp.read(), method="GET", path=path)
                yield resp.content
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiConnectionError(f"GET {path} (watch): {_describe(exc)}") from exc

    def _track_close(self, resp: aiohttp.ClientResponse) -> None:
        """Remember when ``resp``'s connection is closed. A watch cancelled by a stopping caller closes
        its connection when the stream is left, and aiohttp forgets it then: :meth:`close` waits for it,
        so a loop that ends right after leaves no TLS transport to be collected later."""
        protocol = resp.connection.protocol if resp.connection is not None else None
        closed = protocol.closed if protocol is not None else None
        if closed is None or closed.done() or closed in self._watch_closing:
            return
        self._watch_closing.add(closed)
        closed.add_done_callback(self._watch_closed)

    @property
    def watches_closing(self) -> int:
        """Watch connections not known to be shut down yet."""
        return len(self._watch_closing)

    def _watch_closed(self, closed: asyncio.Future[None]) -> None:
        self._watch_closing.discard(closed)
        if not closed.cancelled():
            closed.exception()  # retrieved: a connection that broke is no error at shutdown

    async def close(self) -> None:
        """Close every connection and wait (at most ``CLOSE_WAIT_SECONDS`` for each kind) until they
        are shut down, watches cancelled just before included."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        if self._watch_closing:
            await asyncio.wait(list(self._watch_closing), timeout=CLOSE_WAIT_SECONDS)
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._h2 is not None:
            await self._h2.close()
            self._h2 = None


def _checked_line(method: str, target: str) -> None:
    try:
        check_request_line(method, target)
    except UnsafeRequestError as exc:
        raise InvalidRequestError(f"{method} refused before sending: {exc}") from None


def _checked(name: str, value: str) -> str:
    """``value`` when it may be sent as header ``name``; else :class:`InvalidRequestError`."""
    try:
        check_header(name, value)
    except UnsafeRequestError as exc:
        raise InvalidRequestError(f"refused before sending: {exc}") from None
    return value


def api_error(status: int, payload: bytes, *, method: str = "", path: str = "") -> ApiError:
    """An :class:`ApiError` from an error response, reading its ``metav1.Status`` body if it has one."""
    reason, message = "", payload.decode("utf-8", "replace")[:500]
    doc = protowire.error_status(payload)  # the Status of a request that asked for protobuf
    if doc is None:
        try:
            doc = jsoncodec.loads(payload)
        except ValueError:
            doc = None
    if isinstance(doc, dict):
        reason = str(doc.get("reason") or "")
        message = str(doc.get("message") or message)
    return ApiError(status, reason, message, method=method, path=path)


def _retry_after(header: str | None) -> float:
    try:
        return min(10.0, max(0.1, float(header or "1")))
    except ValueError:
        return 1.0


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def iter_lines(content: aiohttp.StreamReader) -> AsyncIterator[list[bytes]]:
    """Complete newline-terminated lines of a watch stream, in batches: every line that is already
    buffered comes at once, so a burst of events is handled in one go between scheduling cycles.

    aiohttp's own ``readline`` refuses lines over 128 KiB; objects can be larger, so this splits the
    raw chunks itself. A last unterminated line at the end of the stream is returned too.
    """
    pending = b""
    async for chunk in content.iter_any():
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, pending = pending.split(b"\n")
        batch = [line for line in lines if line.strip()]
        if batch:
            yield batch
    if pending.strip():
        yield [pending]
