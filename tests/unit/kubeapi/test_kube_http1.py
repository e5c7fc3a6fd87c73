"""Http1Pool against a raw asyncio server that answers with canned HTTP/1.1 responses."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from koord_scheduler.webhook.certs import generate_bundle, server_ssl_context, write_bundle
from kubeapi.http1 import Http1Pool

Responder = Callable[[int], bytes]
"""request number (0-based, over the whole server) -> raw response bytes; b"" closes the connection."""


class CannedServer:
    def __init__(self, respond: Responder) -> None:
        self.respond = respond
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                response = self.respond(len(self.requests) - 1)
                if not response:
                    break
                writer.write(response)
                await writer.drain()
                if b"Connection: close" in response:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def fixed(body: bytes, *, status: int = 200, extra: str = "") -> bytes:
    return f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


@pytest.fixture
async def make_pool() -> AsyncIterator[Callable[[Responder], asyncio.Future[tuple[Http1Pool, CannedServer]]]]:
    made: list[tuple[Http1Pool, CannedServer]] = []

    async def make(respond: Responder) -> tuple[Http1Pool, CannedServer]:
        server = CannedServer(respond)
        port = await server.start()
        pool = Http1Pool(f"http://127.0.0.1:{port}", ssl_context=None, size=4)
        made.append((pool, server))
        return pool, server

    yield make  # type: ignore[misc]
    for pool, server in made:
        await pool.close()
        await server.stop()


HEAD = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n"


async def test_content_length_response_and_keep_alive(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool, server = await make_pool(lambda i: fixed(b'{"n":%d}' % i, status=201))
    assert await pool.request(HEAD, b"{}", timeout=5) == (201, b'{"n":0}', "")
    assert await pool.request(HEAD, b"{}", timeout=5) == (201, b'{"n":1}', "")
    assert server.connections == 1
    assert server.requests[0].endswith(b"\r\n\r\n{}")


async def test_chunked_response(make_pool) -> None:  # type: ignore[no-untyped-def]
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\n\r\n"
    pool, _ = await make_pool(lambda i: chunked)
    assert await pool.request(HEAD, b"{}", timeout=5) == (200, b"abcdefg", "")
    assert await pool.request(HEAD, b"{}", timeout=5) == (200, b"abcdefg", "")


async def test_connection_close_is_honoured(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool, server = await make_pool(lambda i: fixed(b"ok", extra="Connection: close\r\n"))
    await pool.request(HEAD, b"{}", timeout=5)
    await pool.request(HEAD, b"{}", timeout=5)
    assert server.connections == 2


async def test_retry_after_is_returned(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool, _ = await make_pool(lambda i: fixed(b"{}", status=429, extra="Retry-After: 3\r\n"))
    assert await pool.request(HEAD, b"{}", timeout=5) == (429, b"{}", "3")


async def test_an_idle_connection_closed_by_the_server_is_replaced(make_pool) -> None:  # type: ignore[no-untyped-def]
    # The second request lands on a connection the server has closed: retried on a new one.
    pool, server = await make_pool(lambda i: fixed(b"ok") if i != 1 else b"")
    await pool.request(HEAD, b"{}", timeout=5)
    status, body, _ = await pool.request(HEAD, b"{}", timeout=5)
    assert (status, body) == (200, b"ok")
    assert server.connections == 2


async def test_a_dead_fresh_connection_is_an_error(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool, _ = await make_pool(lambda i: b"")
    with pytest.raises(asyncio.IncompleteReadError):
        await pool.request(HEAD, b"{}", timeout=5)


async def test_garbage_is_an_os_error(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool, _ = await make_pool(lambda i: b"SMTP ready\r\n\r\n")
    with pytest.raises(OSError, match="not an HTTP"):
        await pool.request(HEAD, b"{}", timeout=5)


async def test_a_request_cancelled_in_flight_is_shut_down_by_close(tmp_path: Path) -> None:
    """A caller stopping (its task cancelled) mid-request over TLS: close() waits until that connection's
    TLS shutdown is done, so a loop that ends right after (this test's) has no transport left to warn
    about (the suite turns such warnings into failures)."""
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, tmp_path)
    saw_eof = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read()  # never answers; returns when the client has shut the connection down
            saw_eof.set()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0, ssl=server_ssl_context(tmp_path))
    port = int(server.sockets[0].getsockname()[1])
    client_context = ssl.create_default_context(cadata=bundle.ca_pem.decode())
    pool = Http1Pool(f"https://127.0.0.1:{port}", ssl_context=client_context, size=2)
    try:
        task = asyncio.ensure_future(pool.request(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", None, timeout=30))
        await asyncio.sleep(0.3)  # connected, request sent, waiting for an answer
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pool.closing == 1
        await pool.close()
        assert pool.closing == 0
        await asyncio.wait_for(saw_eof.wait(), 2)
    finally:
        server.close()
        await server.wait_closed()
