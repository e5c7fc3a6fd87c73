"""A tiny asyncio HTTP server for ``/metrics`` and ``/healthz`` (no threads, no framework).

It reads only the request line, within 5 s and at most 64 KiB (the stream reader's limit); a client that is
slower, sends more or goes away loses its connection, and nothing it sends is parsed beyond the path."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    return (head + "Connection: close\r\n\r\n").encode() + body


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, healthy: Callable[[], bool], *, host: str, port: int) -> None:
        self.registry = registry
        self.healthy = healthy
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5)
            parts = request.decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            if path == "/metrics":
                payload = _response("200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = self.healthy()
                payload = _response("200 OK" if ok else "503 Service Unavailable", b"ok" if ok else b"starting")
            else:
                payload = _response("404 Not Found", b"not found")
            writer.write(payload)
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError):
            pass  # slow, gone, or a request line over the reader's 64 KiB limit: drop the connection
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def start(self) -> int:
        """Listen; returns the bound port (useful with ``port=0``)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])
        return self.port

    async def serve(self, stop: asyncio.Event) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        async with self._server:
            await stop.wait()
