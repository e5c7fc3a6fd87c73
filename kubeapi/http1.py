"""A lean HTTP/1.1 keep-alive connection pool on asyncio streams, for the API server's small requests.

Why not aiohttp for these: a bind is a few hundred bytes each way, and aiohttp's client machinery
(URL objects, header multidicts, cookie jar, tracing, per-request timers) costs about 270 µs of CPU per
request here against about 130 µs for this pool, TLS included. At thousands of binds and Events per
second that is a large share of the scheduler's core. Watches, which are few and long, stay on aiohttp.

Scope, deliberately small: one origin; requests are pre-rendered bytes; responses with
``Content-Length`` or ``Transfer-Encoding: chunked`` (no compression is asked for, so none comes);
``Connection: close`` honoured. A request on a *reused* connection that fails before any response
byte arrived is retried once on a new connection: the server closed the idle connection, so it never
saw the request (Go's transport does the same). Everything else surfaces as ``OSError`` /
``asyncio.IncompleteReadError`` / ``TimeoutError`` for the caller to map.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from urllib.parse import urlsplit


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class ResponseError(OSError):
    """The server's answer was not HTTP/1.1 as expected."""


class Http1Pool:
    """At most ``size`` connections to ``server`` (``https://host:port``); idle ones are reused."""

    def __init__(
        self, server: str, *, ssl_context: ssl.SSLContext | None, server_hostname: str | None = None, size: int
    ) -> None:
        parts = urlsplit(server)
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl_context = ssl_context if parts.scheme == "https" else None
        self.server_hostname = server_hostname
        self.host_header = f"{self.host}:{self.port}" if parts.port else self.host
        self._slots = asyncio.Semaphore(size)
        self._idle: list[_Connection] = []
        self._closing: set[asyncio.Task[None]] = set()
        """Connections closed but not yet shut down (TLS needs the loop to finish that): :meth:`close`
        waits for them, so a loop that ends right after leaves no transport behind."""

    async def _open(self) -> _Connection:
        kwargs = {}
        if self.ssl_context is not None:
            kwargs = {"ssl": self.ssl_context, "server_hostname": self.server_hostname or self.host}
        reader, writer = await asyncio.open_connection(self.host, self.port, **kwargs)  # type: ignore[arg-type]
        return _Connection(reader, writer)

    async def request(self, head: bytes, body: bytes | None, *, timeout: float) -> tuple[int, bytes, str]:
        """Send ``head`` (request line and headers, ending in a blank line) and ``body``; return the
        status, the body and the ``Retry-After`` header (empty if absent)."""
        async with self._slots:
            async with asyncio.timeout(timeout):
                while self._idle:
                    conn = self._idle.pop()
                    try:
                        return await self._exchange(conn, head, body)
                    except _StaleConnectionError:
                        continue  # the server closed it while idle: try the next one
                return await self._exchange(await self._open(), head, body, fresh=True)

    async def _exchange(
        self, conn: _Connection, head: bytes, body: bytes | None, *, fresh: bool = False
    ) -> tuple[int, bytes, str]:
        try:
            conn.writer.write(head + body if body else head)
            try:
                header_block = await conn.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial and not fresh:
                    raise _StaleConnectionError from None
                raise
            status, length, chunked, keep_alive, retry_after = _parse_head(header_block)
            if chunked:
                payload = await _read_chunked(conn.reader)
            elif length is not None:
                payload = await conn.reader.readexactly(length) if length else b""
            else:
                payload = await conn.reader.read()  # delimited by close
                keep_alive = False
        except BaseException:  # cancelled (a stopping caller) included
            self._discard(conn)
            raise
        if keep_alive:
            self._idle.append(conn)
        else:
            self._discard(conn)
        return status, payload, retry_after

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        task = asyncio.get_running_loop().create_task(_wait_closed(conn))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close the idle connections and wait (at most ``CLOSE_WAIT_SECONDS``) until every connection
        this pool closed is shut down, those of requests cancelled just before included."""
        idle, self._idle = self._idle, []
        for conn in idle:
            self._discard(conn)
        if self._closing:
            await asyncio.wait(list(self._closing), timeout=CLOSE_WAIT_SECONDS)

    @property
    def closing(self) -> int:
        """Connections closed and still shutting down."""
        return len(self._closing)


CLOSE_WAIT_SECONDS = 2.0


async def _wait_closed(conn: _Connection) -> None:
    with contextlib.suppress(OSError, ssl.SSLError):
        await conn.writer.wait_closed()


class _StaleConnectionError(Exception):
    pass


def _parse_head(block: bytes) -> tuple[int, int | None, bool, bool, str]:
    lines = block.split(b"\r\n")
    status_line = lines[0].split(b" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
        raise ResponseError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    status = int(status_line[1])
    length: int | None = None
    chunked = False
    keep_alive = status_line[0] == b"HTTP/1.1"
    retry_after = ""
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            keep_alive = b"close" not in value.lower()
        elif name == b"retry-after":
            retry_after = value.strip().decode("latin-1")
    return status, length, chunked, keep_alive, retry_after


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            # Trailers (normally none) end with an empty line.
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
