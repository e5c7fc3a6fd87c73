"""A stand-in API server on a real socket that records every request line it is sent.

It parses the byte stream the way an HTTP/1.1 server does (a head ending in a blank line, then
``Content-Length`` bytes of body, then the next request on the same connection), so a request smuggled
inside another one's request line shows up as a second request line. Every request gets ``404 NotFound``
(a ``metav1.Status``) unless ``answers`` maps its path to a JSON body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from kubeapi.connection import Connection


@dataclass
class StandInApi:
    answers: dict[str, Any] = field(default_factory=dict)
    request_lines: list[str] = field(default_factory=list)
    raw: bytearray = field(default_factory=bytearray)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> StandInApi:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def connection(self, authorization: str | None = None) -> Connection:
        return Connection(
            server=f"http://127.0.0.1:{self.port}",
            ssl_context=None,
            authorization=lambda: authorization,
            description="stand-in",
        )

    @property
    def methods(self) -> list[str]:
        return [line.split(" ", 1)[0] for line in self.request_lines]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.raw += head
                lines = head.decode("latin-1").split("\r\n")
                self.request_lines.append(lines[0])
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if length:
                    self.raw += await reader.readexactly(length)
                path = lines[0].split(" ")[1].split("?", 1)[0] if lines[0].count(" ") >= 2 else ""
                if path in self.answers:
                    status, body = "200 OK", json.dumps(self.answers[path]).encode()
                else:
                    status, body = (
                        "404 Not Found",
                        json.dumps(
                            {
                                "kind": "Status",
                                "apiVersion": "v1",
                                "status": "Failure",
                                "reason": "NotFound",
                                "message": f"{path} not found",
                                "code": 404,
                            }
                        ).encode(),
                    )
                writer.write(
                    f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._handlers.discard(task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await self._server.wait_closed()
