"""One HTTP/2 connection to the API server for its small requests, on the ``h2`` package (sans-io).

The alternative to :class:`~.http1.Http1Pool` that ``HttpOptions.http2`` selects: every ordinary request
is a stream on one TLS connection negotiated with ALPN ``h2``, as client-go's transport does.

Contract (what :class:`~.http.ApiHttp` relies on): :meth:`Http2Client.request` sends one request and
returns ``(status, body, retry_after)``, or raises ``OSError`` (connection refused, lost, reset, the
server not speaking h2), ``TimeoutError``, or :class:`~.http1.ResponseError` (a malformed answer).

* Streams: at most the server's ``SETTINGS_MAX_CONCURRENT_STREAMS`` at once (kube-apiserver: 1000 by
  default); more requests wait for a free stream, in order.
* Flow control: request bodies go out as the peer's windows allow (a body larger than the window waits
  for WINDOW_UPDATE); received data is acknowledged as it is consumed.
* GOAWAY: the connection takes no new streams; streams above the server's ``last_stream_id`` were not
  processed and are retried once on a new connection; streams at or below it finish normally.
* Connection loss: a request whose stream was never opened on the lost connection is sent on a new
  one; a request already written fails with ``OSError`` (the server may have acted on it), as
  :mod:`.http1` does for everything but a stale idle connection.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import ssl
from typing import cast
from urllib.parse import urlsplit

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings

from kubeapi.http1 import ResponseError

RECEIVE_WINDOW = 16 * 1024 * 1024
"""Our connection and stream receive windows (client-go's transport uses 4 MiB per stream)."""

Headers = list[tuple[bytes, bytes]]

COALESCE_WRITES = True
"""Requests started in one event-loop iteration go out in one write (see ``_Protocol._flush``);
bench/apiserver_cost.py turns it off to measure what that saves."""


class _NotSentError(Exception):
    """The stream was refused or never processed (GOAWAY above it, REFUSED_STREAM): safe to resend."""


class _Stream:
    __slots__ = ("body", "done", "payload", "retry_after", "status", "stream_id")

    def __init__(self, stream_id: int, body: bytes, done: asyncio.Future[None]) -> None:
        self.stream_id = stream_id
        self.body = body
        """Request body bytes not yet sent (flow control may hold some back)."""
        self.done = done
        self.status = 0
        self.payload: list[bytes] = []
        self.retry_after = ""


class _Protocol(asyncio.Protocol):
    """One HTTP/2 connection. Created by :meth:`Http2Client._connect`."""

    def __init__(self, ready: asyncio.Future[None]) -> None:
        config = H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        self.h2 = H2Connection(config=config)
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, _Stream] = {}
        self.ready = ready
        self.closed = False
        """No new streams: GOAWAY received, or the connection lost or closed."""
        self.lost: asyncio.Future[None] = ready.get_loop().create_future()
        self.max_streams = 100
        """The server's SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 suggests at least 100 until known)."""
        self.stream_freed = asyncio.Event()
        self._flush_scheduled = False
        self._in_receive = False

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.selected_alpn_protocol() != "h2":
            self._fail(OSError(f"the server did not agree to HTTP/2 (ALPN {ssl_object.selected_alpn_protocol()!r})"))
            self.transport.close()
            return
        self.h2.local_settings = Settings(
            client=True,
            initial_values={SettingCodes.INITIAL_WINDOW_SIZE: RECEIVE_WINDOW, SettingCodes.ENABLE_PUSH: 0},
        )
        self.h2.initiate_connection()  # the preface and our SETTINGS
        self.h2.increment_flow_control_window(RECEIVE_WINDOW - 65535)
        self._flush()

    def data_received(self, data: bytes) -> None:
        self._in_receive = True
        try:
            self._receive(data)
        finally:
            self._in_receive = False
        self._flush()

    def _receive(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except ProtocolError as exc:
            self._fail(ResponseError(f"HTTP/2 protocol error from the server: {exc}"))
            if self.transport is not None:
                self.transport.close()
            return
        for event in events:
            kind = type(event)
            if kind is ResponseReceived or kind is TrailersReceived:
                self._headers(event)  # type: ignore[arg-type]
            elif kind is DataReceived:
                stream = self.streams.get(event.stream_id)  # type: ignore[attr-defined]
                if stream is not None:
                    stream.payload.append(event.data)  # type: ignore[attr-defined]
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)  # type: ignore[attr-defined]
            elif kind is StreamEnded:
                self._finish(event.stream_id, None)  # type: ignore[attr-defined]
            elif kind is StreamReset:
                code = event.error_code  # type: ignore[attr-defined]
                refused = code == 7  # REFUSED_STREAM: not processed (RFC 9113 8.7)
                err: BaseException = _NotSentError() if refused else OSError(f"stream reset by the server ({code!r})")
                self._finish(event.stream_id, err)  # type: ignore[attr-defined]
            elif kind is WindowUpdated:
                self._send_pending()
            elif kind is RemoteSettingsChanged:
                limit = self.h2.remote_settings.max_concurrent_streams
                self.max_streams = limit if limit is not None else 2**31 - 1
                self._send_pending()
                self.stream_freed.set()
                if not self.ready.done():
                    self.ready.set_result(None)
            elif kind is ConnectionTerminated:
                self._goaway(event.last_stream_id)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(OSError(f"connection to the API server lost: {exc}" if exc else "connection closed by the server"))

    # -- requests

    @property
    def has_room(self) -> bool:
        return not self.closed and len(self.streams) < self.max_streams

    def start(self, headers: Headers, body: bytes | None) -> _Stream:
        """Open a stream for one request (the caller checked :attr:`has_room`)."""
        stream_id = self.h2.get_next_available_stream_id()
        stream = _Stream(stream_id, body or b"", self.lost.get_loop().create_future())
        self.streams[stream_id] = stream
        self.h2.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self._send_body(stream_id, stream)
        self._flush()
        return stream

    def _send_body(self, stream_id: int, stream: _Stream) -> None:
        while stream.body:
            window = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
            if window <= 0:
                return  # WindowUpdated resumes it
            chunk, stream.body = stream.body[:window], stream.body[window:]
            self.h2.send_data(stream_id, chunk, end_stream=not stream.body)

    def _send_pending(self) -> None:
        for stream_id, stream in list(self.streams.items()):
            if stream.body:
                self._send_body(stream_id, stream)

    def _headers(self, event: ResponseReceived | TrailersReceived) -> None:
        stream = self.streams.get(event.stream_id or 0)
        if stream is None:
            return
        for name, value in event.headers or ():
            if name == b":status":
                stream.status = int(value)
            elif name == b"retry-after":
                stream.retry_after = bytes(value).decode("latin-1").strip()

    def _finish(self, stream_id: int, exc: BaseException | None) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is None:
            return
        if not stream.done.done():
            if exc is None:
                stream.done.set_result(None)
            else:
                stream.done.set_exception(exc)
        self.stream_freed.set()
        if self.closed and not self.streams and self.transport is not None:
            self.transport.close()  # after GOAWAY: the last stream is done

    def cancel(self, stream: _Stream) -> None:
        """The caller gave up on ``stream`` (timeout, cancellation): reset it and free its slot."""
        if self.streams.pop(stream.stream_id, None) is None:
            return
        if not self.closed:
            with contextlib.suppress(ProtocolError, KeyError):
                self.h2.reset_stream(stream.stream_id, error_code=8)  # CANCEL
                self._flush()
        self.stream_freed.set()

    def _goaway(self, last_stream_id: int | None) -> None:
        self.closed = True
        last = last_stream_id if last_stream_id is not None else 2**31
        for stream_id in [sid for sid in self.streams if sid > last]:
            self._finish(stream_id, _NotSentError())
        if not self.streams and self.transport is not None:
            self.transport.close()

    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        if not self.ready.done():
            self.ready.set_exception(exc)
        for stream_id in list(self.streams):
            self._finish(stream_id, exc)
        if not self.lost.done():
            self.lost.set_result(None)
        self.stream_freed.set()

    def _flush(self) -> None:
        """Write what h2 has queued: at once from :meth:`data_received` (acknowledgements, answers to
        the server's frames, requests started meanwhile), else at the end of this loop iteration, so the
        requests that tasks start in one iteration go out in one TLS record and one send."""
        if not COALESCE_WRITES or self._in_receive:
            self._write_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.lost.get_loop().call_soon(self._write_now)

    def _write_now(self) -> None:
        self._flush_scheduled = False
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(ProtocolError):
                self.h2.close_connection()
                self._flush()
            self.transport.close()


class Http2Client:
    """Requests to ``server`` (``https://host:port``; ``http://`` speaks h2 without TLS, for tests) as
    streams of one HTTP/2 connection, reopened when it is lost or the server sends GOAWAY. ``ssl_context``
    must offer ALPN ``h2`` only (``Connection.h2_ssl_context()``)."""

    def __init__(self, server: str, *, ssl_context: ssl.SSLContext | None, server_hostname: str | None = None) -> None:
        parts = urlsplit(server)
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.scheme = parts.scheme.encode()
        self.ssl_context = ssl_context if parts.scheme == "https" else None
        self.server_hostname = server_hostname
        self.authority = (f"{self.host}:{self.port}" if parts.port else self.host).encode()
        self._conn: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._retired: set[_Protocol] = set()
        """Connections that got GOAWAY and still finish their streams; closed by :meth:`close`."""
        self.connections_opened = 0

    async def _connection(self) -> _Protocol:
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if conn is not None and conn.streams:
            self._retired.add(conn)
            conn.lost.add_done_callback(functools.partial(_forget, self._retired, conn))
        self._conn = None
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        if self.ssl_context is not None:
            _, proto = await loop.create_connection(
                lambda: _Protocol(ready),
                self.host,
                self.port,
                ssl=self.ssl_context,
                server_hostname=self.server_hostname or self.host,
            )
        else:
            _, proto = await loop.create_connection(lambda: _Protocol(ready), self.host, self.port)
        await ready  # the server's SETTINGS: its stream limit is known
        self.connections_opened += 1
        self._conn = proto
        return proto

    async def request(
        self, method: str, target: str, headers: Headers, body: bytes | None, *, timeout: float
    ) -> tuple[int, bytes, str]:
        """Send ``method target`` with ``headers`` (lower-case names, no pseudo-headers) and ``body``;
        return the status, the body and the ``Retry-After`` header (empty if absent)."""
        full: Headers = [
            (b":method", method.encode()),
            (b":scheme", self.scheme),
            (b":authority", self.authority),
            (b":path", target.encode()),
            *headers,
        ]
        if body:
            full.append((b"content-length", str(len(body)).encode()))
        async with asyncio.timeout(timeout):
            for attempt in range(2):
                conn = await self._connection()
                while not conn.has_room:
                    if conn.closed:
                        conn = await self._connection()
                        continue
                    conn.stream_freed.clear()
                    await conn.stream_freed.wait()
                stream = conn.start(full, body)
                try:
                    await stream.done
                except asyncio.CancelledError:
                    conn.cancel(stream)
                    raise
                except _NotSentError:
                    if attempt == 0:
                        continue  # the server never processed it: once more on a fresh connection
                    raise OSError(f"{method} {target}: refused twice by the server") from None
                return stream.status, b"".join(stream.payload), stream.retry_after
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close the connections (GOAWAY, then the socket) and wait briefly until they are shut down."""
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(BaseException):
                await self._connecting
            self._connecting = None
        conns = [c for c in (self._conn, *self._retired) if c is not None]
        self._conn = None
        self._retired.clear()
        for conn in conns:
            conn.close()
        waits = [c.lost for c in conns if not c.lost.done()]
        if waits:
            await asyncio.wait(waits, timeout=2.0)


def _forget(retired: set[_Protocol], conn: _Protocol, _done: asyncio.Future[None]) -> None:
    retired.discard(conn)
