"""The metrics and probe endpoints of both binaries against hostile clients: huge or garbled request lines
and headers, bodies, slow clients and many connections. Each answers 4xx or drops that connection, keeps
serving everyone else, and logs no traceback."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from prometheus_client import CollectorRegistry, Counter

from koord_scheduler.app.serve import _options, _parser
from koord_scheduler.app.serve_run import _start_http
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koordlet.app.http import MetricsServer
from kubeapi.serving import HardenedServer
from kubeapi.serving_limits import ServingLimits

LOOPBACK = "127.0.0.1"
LIMITS = ServingLimits(max_body_bytes=1024, header_timeout=0.5, body_timeout=0.5, max_connections=4)


class Probes:
    def healthz(self) -> tuple[bool, str]:
        return True, "ok"

    readyz = healthz


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


async def raw(port: int, data: bytes, *, wait: float = 3.0) -> bytes:
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(wait):
            return await reader.read()
    finally:
        writer.close()


async def scheduler_metrics() -> HardenedServer:
    options = _options(_parser().parse_args(["--metrics-port", str(free_port()), "--bind-address", LOOPBACK]))
    return await _start_http(options, Probes(), SchedulerMetrics(), limits=LIMITS)  # type: ignore[arg-type]


HOSTILE_REQUESTS = [
    pytest.param(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", id="huge-request-line"),
    pytest.param(b"GET /metrics HTTP/1.1\r\nX: " + b"b" * 20_000 + b"\r\n\r\n", id="huge-header"),
    pytest.param(b"GET /metrics HTTP/1.1\r\n" + b"X-A: 1\r\n" * 500 + b"\r\n", id="many-headers"),
    pytest.param(b"\x00\xff\r\n\r\n", id="garbage"),
    pytest.param(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", id="body-on-get"),
    pytest.param(
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", id="two-lengths"
    ),
    pytest.param(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", id="post"),
    pytest.param(b"GET /metrics\r\nX HTTP/1.1\r\n\r\n", id="split-request-line"),
]


@pytest.mark.parametrize("request_bytes", HOSTILE_REQUESTS)
async def test_scheduler_metrics_port_answers_4xx_or_closes(
    request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    server = await scheduler_metrics()
    try:
        with caplog.at_level(logging.WARNING):
            answer = await raw(server.port, request_bytes)  # the connection ends, whatever the answer
        # A GET whose declared body never comes is answered (the handler does not read bodies) and closed.
        assert answer == b"" or answer.startswith((b"HTTP/1.1 4", b"HTTP/1.0 4", b"HTTP/1.1 200")), answer[:100]
        if not request_bytes.startswith(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999"):
            assert not answer.startswith(b"HTTP/1.1 200"), answer[:100]
        ok = await raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200")
    finally:
        await server.stop()
    assert "Traceback" not in caplog.text


async def test_scheduler_metrics_port_bounds_slow_and_many_clients() -> None:
    server = await scheduler_metrics()
    try:
        assert await raw(server.port, b"GET /metr", wait=LIMITS.header_timeout + 2) == b""
        held = [await asyncio.open_connection(LOOPBACK, server.port) for _ in range(LIMITS.max_connections)]
        await asyncio.sleep(0.05)
        assert await raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == b"", "over the limit"
        assert server.refused_connections >= 1
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.2)
        ok = await raw(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200")
    finally:
        await server.stop()


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n", id="line-over-the-reader-limit"),
        pytest.param(b"\x00\xff\xfe\r\n", id="garbage"),
        pytest.param(b"GET\r\n", id="no-path"),
        pytest.param(b"", id="nothing"),
    ],
)
async def test_koordlet_metrics_port_drops_bad_requests_and_keeps_serving(
    request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    registry = CollectorRegistry()
    Counter("koordlet_probe_total", "probe", registry=registry).inc()
    server = MetricsServer(registry, lambda: True, host=LOOPBACK, port=0)
    port = await server.start()
    stop = asyncio.Event()
    serving = asyncio.ensure_future(server.serve(stop))
    try:
        with caplog.at_level(logging.WARNING):
            answer = await raw(port, request_bytes, wait=6.0)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 404"), answer[:80]
            metrics = await raw(port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert b"koordlet_probe_total 1.0" in metrics
    finally:
        stop.set()
        await serving
    assert "Traceback" not in caplog.text and "Unhandled exception" not in caplog.text
