"""``/apis/v1/...`` on the scheduler's metrics port: JSON for GET, read-only, leader only, names checked
before use, and off with ``--plugin-services=false``."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path

import pytest

from apis.config import load_scheduler_config
from koord_scheduler.app.serve import _options, _parser
from koord_scheduler.app.serve_run import ServicesSource, _start_http
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.plugin_services import ServiceTable, scheduler_services
from kubeapi.serving import HardenedServer

LOOPBACK = "127.0.0.1"
EXAMPLES = Path(__file__).resolve().parents[4] / "config" / "simulate"


class Probes:
    def healthz(self) -> tuple[bool, str]:
        return True, "ok"

    readyz = healthz


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


async def table() -> ServiceTable:
    _, scheduler = await run_simulation(
        EXAMPLES / "gang-cluster.yaml",
        load_scheduler_config(EXAMPLES / "scheduler-config.yaml"),
        in_tree_registry(),
        now=1_800_000_000.0,
    )
    return scheduler_services(scheduler)


async def serve(services: ServicesSource | None, *flags: str) -> HardenedServer:
    options = _options(_parser().parse_args(["--metrics-port", str(free_port()), "--bind-address", LOOPBACK, *flags]))
    return await _start_http(options, Probes(), SchedulerMetrics(), services=services)  # type: ignore[arg-type]


async def request(port: int, method: str, target: str) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    try:
        writer.write(f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        async with asyncio.timeout(5):
            raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


async def test_get_answers_koordinators_json() -> None:
    services = await table()
    server = await serve((lambda: services, lambda: True))
    try:
        target = "/apis/v1/plugins/Coscheduling/gang/default/training"
        status, headers, body = await request(server.port, "GET", target)
        assert status == 200
        assert headers["content-type"] == "application/json; charset=utf-8"
        assert json.loads(body)["minRequiredNumber"] == 3
        status, _, body = await request(server.port, "GET", "/apis/v1/__services__")
        assert status == 200 and "/apis/v1/plugins/Coscheduling/gangs" in json.loads(body)["GET"]
        # ElasticQuota is not in this profile: its paths are unknown here.
        status, _, body = await request(server.port, "GET", "/apis/v1/plugins/ElasticQuota/quotas/x?includePods=true")
        want = "no service at '/apis/v1/plugins/ElasticQuota/quotas/x'; GET /apis/v1/__services__ lists them"
        assert (status, json.loads(body)) == (404, {"message": want})
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("target", "want_status", "want_in_message"),
    [
        pytest.param(
            "/apis/v1/plugins/Coscheduling/gang/default/a%0D%0AHost:%20evil", 400, "visible ASCII", id="encoded-crlf"
        ),
        pytest.param("/apis/v1/plugins/Coscheduling/gang/default/a%2Fb", 400, "no '/'", id="encoded-slash"),
        pytest.param("/apis/v1/nodes/%2E%2E", 400, "RFC 1123 subdomain", id="dot-dot"),
        pytest.param("/apis/v1/nodes/" + "n" * 300, 400, "at most 253", id="long-name"),
    ],
)
async def test_names_are_checked_before_use(target: str, want_status: int, want_in_message: str) -> None:
    services = await table()
    server = await serve((lambda: services, lambda: True))
    try:
        status, _, body = await request(server.port, "GET", target)
        assert status == want_status
        assert want_in_message in json.loads(body)["message"]
    finally:
        await server.stop()


async def test_read_only_leader_only_and_off_without_scheduling() -> None:
    services = await table()
    leader = [False]
    server = await serve((lambda: services, lambda: leader[0]))
    try:
        status, _, body = await request(server.port, "GET", "/apis/v1/__services__")
        assert (status, json.loads(body)) == (503, {"message": "the instance is not leader"})
        leader[0] = True
        status, _, body = await request(server.port, "POST", "/apis/v1/__services__")
        assert status == 405 and "read-only" in json.loads(body)["message"]
    finally:
        await server.stop()
    server = await serve((lambda: None, lambda: True))
    try:
        status, _, body = await request(server.port, "GET", "/apis/v1/__services__")
        assert status == 503 and "scheduling is off" in json.loads(body)["message"]
    finally:
        await server.stop()


async def test_plugin_services_false_serves_none() -> None:
    options = _options(_parser().parse_args(["--plugin-services=false"]))
    assert options.plugin_services is False
    server = await serve(None, "--plugin-services=false")
    try:
        status, _, _ = await request(server.port, "GET", "/apis/v1/__services__")
        assert status == 404
        status, _, _ = await request(server.port, "GET", "/healthz")
        assert status == 200
    finally:
        await server.stop()


async def test_a_failing_view_is_a_500_for_that_request_only(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_: object, __: object) -> tuple[int, object]:
        raise RuntimeError("boom")

    caplog.set_level(logging.INFO, logger="koord-scheduler")  # default verbosity, whatever ran before
    services = ServiceTable([("/apis/v1/broken", broken), ("/apis/v1/fine", lambda _p, _q: (200, {"ok": True}))])
    server = await serve((lambda: services, lambda: True))
    try:
        status, _, body = await request(server.port, "GET", "/apis/v1/broken")
        assert (status, json.loads(body)) == (500, {"message": "internal error: RuntimeError"})
        status, _, body = await request(server.port, "GET", "/apis/v1/fine")
        assert (status, json.loads(body)) == (200, {"ok": True})
    finally:
        await server.stop()
    assert "RuntimeError: boom" in caplog.text and "Traceback" not in caplog.text
