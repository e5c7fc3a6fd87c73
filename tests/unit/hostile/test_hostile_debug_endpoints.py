"""The debug switches change behaviour, so nobody on the network may flip them: they are not served with
/metrics, they are off by default, they listen on loopback only, and their values are range-checked."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from koord_scheduler.app.debug_server import LOOPBACK, start_debug_server
from koord_scheduler.app.serve import ServeOptions, _options, _parser
from koord_scheduler.app.serve_run import _start_http
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from kubeapi.serving_limits import ServingLimits


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def set_debug(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)

    def healthz(self) -> tuple[bool, str]:
        return True, "ok"

    readyz = healthz


@pytest.fixture
async def debug_server() -> AsyncIterator[tuple[str, Recorder]]:
    recorder = Recorder()
    port = free_port()
    server = await start_debug_server(port, recorder.set_debug)
    assert (server.address, server.port) == (LOOPBACK, port), "loopback only"
    yield f"http://{LOOPBACK}:{port}", recorder
    await server.stop()


async def put(url: str, body: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.put(url, data=body) as resp:
        return resp.status, await resp.text()


def test_off_by_default_and_values_checked_at_start() -> None:
    assert _options(_parser().parse_args([])).debug_flags_port == 0
    with pytest.raises(SystemExit):
        _parser().parse_args(["--debug-scores", "1000000"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["--debug-scores", "-5"])


async def test_metrics_port_does_not_serve_the_switches() -> None:
    recorder = Recorder()
    port = free_port()
    options = _options(_parser().parse_args(["--metrics-port", str(port), "--bind-address", LOOPBACK]))
    assert isinstance(options, ServeOptions)
    runner = await _start_http(options, recorder, SchedulerMetrics())  # type: ignore[arg-type]
    try:
        for flag in ("s", "f"):
            status, _ = await put(f"http://{LOOPBACK}:{port}/debug/flags/{flag}", "3")
            assert status in (404, 405)
        async with aiohttp.ClientSession() as session, session.get(f"http://{LOOPBACK}:{port}/metrics") as resp:
            assert resp.status == 200
            assert "# TYPE koord_scheduler_object_errors_total counter" in await resp.text()
    finally:
        await runner.stop()
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("flag", "body", "want_status", "want_calls"),
    [
        pytest.param("s", "3", 200, [{"scores": 3}], id="scores-3"),
        pytest.param("s", "0", 200, [{"scores": 0}], id="scores-off"),
        pytest.param("s", "1000000", 400, [], id="scores-huge"),
        pytest.param("s", "-5", 400, [], id="scores-negative"),
        pytest.param("s", "3.5", 400, [], id="scores-float"),
        pytest.param("f", "true", 200, [{"filters": True}], id="filters-on"),
        pytest.param("f", "maybe", 400, [], id="filters-not-bool"),
        pytest.param("v", "9", 404, [], id="unknown-flag"),
    ],
)
async def test_values_are_range_checked(
    debug_server: tuple[str, Recorder], flag: str, body: str, want_status: int, want_calls: list[dict[str, Any]]
) -> None:
    url, recorder = debug_server
    status, text = await put(f"{url}/debug/flags/{flag}", body)
    assert status == want_status, text
    assert recorder.calls == want_calls


async def test_slow_and_oversize_clients_are_cut_off() -> None:
    recorder = Recorder()
    limits = ServingLimits(max_body_bytes=1024, header_timeout=0.5, body_timeout=0.5, max_connections=2)
    server = await start_debug_server(free_port(), recorder.set_debug, limits=limits)
    try:
        reader, writer = await asyncio.open_connection(LOOPBACK, server.port)
        writer.write(b"PUT /debug/flags/s HTTP/1.1\r\nHost: x\r\n")  # and never the rest of the head
        async with asyncio.timeout(limits.header_timeout + 2):
            assert await reader.read() == b""
        writer.close()
        status, _ = await put(f"http://{LOOPBACK}:{server.port}/debug/flags/s", "1" * 5000)
        assert status == 413
    finally:
        await server.stop()
    assert recorder.calls == []
