"""Http2Client (and ApiHttp with ``HttpOptions(http2=True)``) against a local HTTP/2 server built on h2.

The server speaks h2 with prior knowledge on plain TCP (``http://``): stream limits, flow control, GOAWAY,
REFUSED_STREAM, a dropped connection and 429 answers are the server's choices per test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, RequestReceived, StreamEnded
from h2.settings import SettingCodes, Settings

from kubeapi.connection import Connection
from kubeapi.http import ApiConnectionError, ApiError, ApiHttp, HttpOptions
from kubeapi.http2 import Http2Client
from kubeapi.ratelimit import TokenBucket


@dataclass
class Request:
    conn: int
    stream_id: int
    headers: dict[bytes, bytes]
    body: bytes = b""


Answer = tuple[int, bytes, list[tuple[bytes, bytes]]] | str
"""``(status, body, extra headers)``, or an action: ``"goaway"`` (GOAWAY with the previous stream as the
last processed, this one unanswered), ``"refuse"`` (RST_STREAM REFUSED_STREAM), ``"drop"`` (close the
socket without answering), ``"hold"`` (never answer)."""


@dataclass
class H2Server:
    answer: Callable[[Request], Answer]
    max_streams: int = 100
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    most_open: int = 0
    server: asyncio.Server | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _ServerProtocol(self), "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()


class _ServerProtocol(asyncio.Protocol):
    def __init__(self, owner: H2Server) -> None:
        self.owner = owner
        owner.connections += 1
        self.conn_no = owner.connections
        self.h2 = H2Connection(config=H2Configuration(client_side=False, header_encoding=None))
        self.open: dict[int, Request] = {}
        self.transport: asyncio.Transport | None = None
        self.last_done = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # In the first SETTINGS frame (a later update would race the client's first streams).
        self.h2.local_settings = Settings(
            client=False, initial_values={SettingCodes.MAX_CONCURRENT_STREAMS: self.owner.max_streams}
        )
        self.h2.initiate_connection()
        self.transport.write(self.h2.data_to_send())  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for event in self.h2.receive_data(data):
            if isinstance(event, RequestReceived):
                self.open[event.stream_id] = Request(self.conn_no, event.stream_id, dict(event.headers or ()))
                self.owner.most_open = max(self.owner.most_open, len(self.open))
            elif isinstance(event, DataReceived):
                self.open[event.stream_id].body += event.data
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                request = self.open[event.stream_id]
                self.owner.requests.append(request)
                asyncio.get_running_loop().call_later(0.01, self._answer, request)
        self.transport.write(self.h2.data_to_send())

    def _answer(self, request: Request) -> None:
        assert self.transport is not None
        if self.transport.is_closing():
            return
        answer = self.owner.answer(request)
        if answer == "hold":
            return
        if answer == "drop":
            self.transport.close()
            return
        if answer == "goaway":
            self.h2.close_connection(last_stream_id=self.last_done)
        elif answer == "refuse":
            self.h2.reset_stream(request.stream_id, error_code=7)
        else:
            assert not isinstance(answer, str)
            status, body, extra = answer
            headers = [(b":status", str(status).encode()), (b"content-length", str(len(body)).encode()), *extra]
            self.h2.send_headers(request.stream_id, headers, end_stream=not body)
            step = self.h2.max_outbound_frame_size  # the client's receive window (16 MiB) takes it all
            for at in range(0, len(body), step):
                self.h2.send_data(request.stream_id, body[at : at + step], end_stream=at + step >= len(body))
            self.last_done = max(self.last_done, request.stream_id)
        self.open.pop(request.stream_id, None)
        self.transport.write(self.h2.data_to_send())


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]]]:
    made: list[tuple[Http2Client, H2Server]] = []

    async def make(answer: Callable[[Request], Answer], *, max_streams: int = 100) -> tuple[Http2Client, H2Server]:
        server = H2Server(answer, max_streams=max_streams)
        port = await server.start()
        client = Http2Client(f"http://127.0.0.1:{port}", ssl_context=None)
        made.append((client, server))
        return client, server

    yield make  # type: ignore[misc]
    for client, server in made:
        await client.close()
        await server.stop()


def ok(request: Request) -> Answer:
    return 201, b"echo:" + request.body, []


HEADERS = [(b"accept", b"application/json")]


async def test_request_carries_method_path_headers_and_body(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    client, server = await serve(ok)
    status, body, retry_after = await client.request(
        "POST", "/api/v1/namespaces/a/pods/p/binding", HEADERS, b"xyz", timeout=5
    )
    assert (status, body, retry_after) == (201, b"echo:xyz", "")
    (req,) = server.requests
    assert req.headers[b":method"] == b"POST"
    assert req.headers[b":path"] == b"/api/v1/namespaces/a/pods/p/binding"
    assert req.headers[b"accept"] == b"application/json"
    assert req.headers[b"content-length"] == b"3"


async def test_many_requests_share_one_connection(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    client, server = await serve(ok)
    results = await asyncio.gather(
        *(client.request("POST", f"/p/{i}", HEADERS, str(i).encode(), timeout=5) for i in range(50))
    )
    assert [r[1] for r in results] == [f"echo:{i}".encode() for i in range(50)]
    assert server.connections == 1


async def test_streams_stay_within_the_servers_limit(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    client, server = await serve(ok, max_streams=3)
    results = await asyncio.gather(*(client.request("GET", f"/p/{i}", HEADERS, None, timeout=5) for i in range(20)))
    assert all(r[0] == 201 for r in results)
    assert len(server.requests) == 20
    assert server.most_open <= 3


async def test_a_body_larger_than_the_window_waits_for_window_updates(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    client, _ = await serve(ok)
    body = bytes(range(256)) * 1000  # 256 KB, four times the default 64 KiB window
    status, echoed, _ = await client.request("PUT", "/big", HEADERS, body, timeout=5)
    assert status == 201
    assert echoed == b"echo:" + body


async def test_retry_after_is_returned(serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]]) -> None:
    client, _ = await serve(lambda r: (429, b"slow down", [(b"retry-after", b"2")]))
    assert await client.request("GET", "/x", HEADERS, None, timeout=5) == (429, b"slow down", "2")


async def test_streams_after_goaway_are_resent_on_a_new_connection(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    # The first connection answers its first request, then sends GOAWAY naming it as the last one
    # processed: the second request (stream 3) was never processed and goes again on connection 2.
    def answer(request: Request) -> Answer:
        if request.conn == 1 and request.stream_id > 1:
            return "goaway"
        return ok(request)

    client, server = await serve(answer)
    assert (await client.request("POST", "/a", HEADERS, b"1", timeout=5))[1] == b"echo:1"
    assert (await client.request("POST", "/b", HEADERS, b"2", timeout=5))[1] == b"echo:2"
    assert server.connections == 2
    assert [(r.conn, r.headers[b":path"]) for r in server.requests] == [(1, b"/a"), (1, b"/b"), (2, b"/b")]
    # Later requests use the new connection.
    assert (await client.request("POST", "/c", HEADERS, b"3", timeout=5))[1] == b"echo:3"
    assert server.connections == 2


async def test_a_refused_stream_is_resent_once(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    seen: list[Request] = []

    def answer(request: Request) -> Answer:
        seen.append(request)
        return "refuse" if len(seen) == 1 else ok(request)

    client, server = await serve(answer)
    assert (await client.request("POST", "/a", HEADERS, b"1", timeout=5))[1] == b"echo:1"
    assert len(server.requests) == 2


async def test_a_request_sent_on_a_connection_that_drops_fails_and_is_not_resent(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    client, server = await serve(lambda r: "drop" if r.conn == 1 else ok(r))
    with pytest.raises(OSError):
        await client.request("POST", "/a", HEADERS, b"1", timeout=5)
    assert len(server.requests) == 1
    # The next request opens a new connection.
    assert (await client.request("POST", "/b", HEADERS, b"2", timeout=5))[1] == b"echo:2"
    assert server.connections == 2


async def test_a_timed_out_request_frees_its_stream(
    serve: Callable[..., asyncio.Future[tuple[Http2Client, H2Server]]],
) -> None:
    client, _ = await serve(lambda r: "hold" if r.headers[b":path"] == b"/slow" else ok(r), max_streams=1)
    with pytest.raises(TimeoutError):
        await client.request("GET", "/slow", HEADERS, None, timeout=0.2)
    # The one stream the server allows is free again.
    assert (await client.request("GET", "/fast", HEADERS, None, timeout=5))[0] == 201


async def test_a_server_that_is_not_there_is_an_oserror() -> None:
    client = Http2Client("http://127.0.0.1:1", ssl_context=None)
    with pytest.raises(OSError):
        await client.request("GET", "/x", HEADERS, None, timeout=5)
    await client.close()


# -- through ApiHttp


async def api_http(server: H2Server) -> ApiHttp:
    port = await server.start()
    connection = Connection(
        server=f"http://127.0.0.1:{port}", ssl_context=None, authorization=lambda: "Bearer t", description="test"
    )
    return ApiHttp(connection, TokenBucket(0, 1), options=HttpOptions(http2=True))


async def test_api_http_sends_its_headers_over_http2() -> None:
    server = H2Server(lambda r: (200, b'{"ok": true}', []))
    http = await api_http(server)
    try:
        assert await http.request_json("GET", "/api/v1/nodes", params={"limit": "1"}) == {"ok": True}
    finally:
        await http.close()
        await server.stop()
    (req,) = server.requests
    assert req.headers[b":path"] == b"/api/v1/nodes?limit=1"
    assert req.headers[b"authorization"] == b"Bearer t"
    assert req.headers[b"user-agent"] == b"koord-scheduler/pykoord"
    assert req.headers[b"accept"] == b"application/json"


async def test_api_http_retries_a_429_after_retry_after_and_reads_error_statuses() -> None:
    answers = iter(
        [
            (429, b"{}", [(b"retry-after", b"0.1")]),
            (201, b"{}", []),
            (409, b'{"kind":"Status","reason":"Conflict","message":"taken"}', []),
        ]
    )
    server = H2Server(lambda r: next(answers))
    http = await api_http(server)
    try:
        assert await http.request_status("POST", "/x", body=b"{}") == 201
        with pytest.raises(ApiError) as caught:
            await http.request("POST", "/y", body=b"{}")
    finally:
        await http.close()
        await server.stop()
    assert caught.value.conflict and caught.value.reason == "Conflict"
    assert len(server.requests) == 3


async def test_api_http_maps_a_dropped_connection_to_api_connection_error() -> None:
    server = H2Server(lambda r: "drop")
    http = await api_http(server)
    try:
        with pytest.raises(ApiConnectionError, match="POST /x"):
            await http.request("POST", "/x", body=b"{}")
    finally:
        await http.close()
        await server.stop()
