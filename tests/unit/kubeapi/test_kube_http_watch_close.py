"""ApiHttp.close shuts down the connection of a watch cancelled just before (over TLS)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from koord_scheduler.webhook.certs import generate_bundle, server_ssl_context, write_bundle
from kubeapi.connection import Connection
from kubeapi.http import ApiHttp
from kubeapi.ratelimit import TokenBucket

WATCH_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


async def test_a_watch_cancelled_by_a_stopping_caller_is_shut_down_by_close(tmp_path: Path) -> None:
    """A watch whose task is cancelled leaves its stream; aiohttp then closes that connection and forgets
    it. close() waits until its TLS shutdown is done, so a loop that ends right after (this test's) has no
    transport left to warn about (the suite turns such warnings into failures)."""
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, tmp_path)
    saw_eof = asyncio.Event()

    async def watch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(WATCH_HEAD)  # a watch that sends no event
            await writer.drain()
            await reader.read()  # returns when the client has shut the connection down
            saw_eof.set()
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(watch, "127.0.0.1", 0, ssl=server_ssl_context(tmp_path))
    port = int(server.sockets[0].getsockname()[1])
    connection = Connection(
        f"https://127.0.0.1:{port}", ssl.create_default_context(cadata=bundle.ca_pem.decode()), lambda: None, "test"
    )
    http = ApiHttp(connection, TokenBucket(100, 100))
    streaming = asyncio.Event()

    async def read_watch() -> None:
        async with http.stream("/api/v1/pods", {"watch": "1"}) as content:
            streaming.set()
            await content.readline()

    try:
        task = asyncio.ensure_future(read_watch())
        await asyncio.wait_for(streaming.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert http.watches_closing == 1
        await http.close()
        assert http.watches_closing == 0
        await asyncio.wait_for(saw_eof.wait(), 2)
    finally:
        server.close()
        await server.wait_closed()
