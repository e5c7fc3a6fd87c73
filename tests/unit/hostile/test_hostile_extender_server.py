"""``koord-scheduler extender-server`` against hostile callers: names, other schedulers' pods, bodies,
sizes, slow clients and authentication.

The real routes and limits (:mod:`koord_scheduler.app.extender_http` behind
:class:`~kubeapi.serving.HardenedServer`) over an in-memory cluster; ``get_pod`` and the
cluster's bind record every call, so a refusal is seen to happen before anything is asked or written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from apis.config import KubeSchedulerConfiguration
from apis.core.types import Pod
from koord_scheduler.app.extender_http import ExtenderServing, make_app
from koord_scheduler.app.extender_server import LOOPBACK, _parser, _serving, build_extender_scheduler, service_for
from koord_scheduler.extenders.wire import encode_pod
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.webhook.certs import generate_bundle
from kubeapi.serving import HardenedServer
from kubeapi.serving_limits import ClientAuth, ServingLimits, server_ssl_context
from tests.builders import make_node, make_pod

SERVED = "team-scheduler"
LIMITS = ServingLimits(
    max_body_bytes=256 * 1024, header_timeout=0.5, body_timeout=0.5, handshake_timeout=0.5, max_connections=8
)
NODES = [make_node(n).capacity(cpu="4", memory="8Gi", pods=110).build() for n in ("n1", "n2")]
OURS = make_pod("ours").uid("uid-ours").scheduler(SERVED).req(cpu="1").build()
THEIRS = make_pod("theirs").uid("uid-theirs").scheduler("other-scheduler").req(cpu="64").build()
BOUND = make_pod("bound").uid("uid-bound").scheduler(SERVED).node("n1").build()


@dataclass
class Extender:
    url: str
    cluster: MemoryCluster
    asked: list[str] = field(default_factory=list)
    server: HardenedServer | None = None

    async def post(self, verb: str, body: Any, **kwargs: Any) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with aiohttp.ClientSession() as session, session.post(f"{self.url}/{verb}", data=data, **kwargs) as resp:
            text = await resp.text()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text


async def start_extender(*, context: ssl.SSLContext | None = None, auth: ClientAuth | None = None) -> Extender:
    cluster = MemoryCluster.from_objects(NODES, [OURS, THEIRS, BOUND])
    scheduler = build_extender_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), cluster)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    ext = Extender("", cluster)

    async def get_pod(namespace: str, name: str) -> Pod | None:
        ext.asked.append(f"{namespace}/{name}")
        return cluster.pods.get(f"{namespace}/{name}")

    serving = ExtenderServing(frozenset({SERVED}), LIMITS, auth or ClientAuth())
    app = make_app(service_for(scheduler), cluster, synced=lambda: True, get_pod=get_pod, serving=serving)
    server = HardenedServer(app, address=LOOPBACK, port=0, ssl_context=context, limits=LIMITS)
    await server.start()
    ext.server = server
    ext.url = f"{'https' if context else 'http'}://{LOOPBACK}:{server.port}"
    return ext


@pytest.fixture
async def extender() -> AsyncIterator[Extender]:
    ext = await start_extender()
    yield ext
    assert ext.server is not None
    await ext.server.stop()


def binding(**fields: str) -> dict[str, str]:
    return {"PodName": "ours", "PodNamespace": "default", "PodUID": "uid-ours", "Node": "n2", **fields}


SMUGGLED = " HTTP/1.1\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim"


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        pytest.param(
            {"PodNamespace": "default/pods/x" + SMUGGLED},
            "PodNamespace 'default/pods/x HTTP/1.1\\r\\n",
            id="smuggled-namespace",
        ),
        pytest.param({"PodName": "x" + SMUGGLED}, "PodName 'x HTTP/1.1\\r\\n", id="smuggled-name"),
        pytest.param({"Node": "n1\r\nX: y"}, "Node 'n1\\r\\nX: y' is invalid", id="crlf-node"),
        pytest.param({"PodNamespace": "a.b"}, "PodNamespace 'a.b' is invalid", id="namespace-with-dot"),
        pytest.param({"PodName": "../x"}, "PodName '../x' is invalid", id="dot-dot"),
        pytest.param({"PodUID": "u\r\nid"}, "PodUID 'u\\r\\nid' is not a UID", id="crlf-uid"),
        pytest.param({"PodName": ""}, "ExtenderBindingArgs.PodName: expected a non-empty string", id="empty-name"),
    ],
)
async def test_bind_refuses_bad_names_before_any_api_call(
    extender: Extender, fields: dict[str, str], want: str
) -> None:
    status, answer = await extender.post("bind", binding(**fields))
    assert status == 200
    assert answer["Error"].startswith("bad ExtenderBindingArgs: ")
    assert want in answer["Error"]
    assert extender.asked == []
    assert extender.cluster.pods[OURS.key].node_name == ""


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        pytest.param(
            {"PodName": "theirs", "PodUID": "uid-theirs"},
            "its schedulerName is 'other-scheduler'; this extender binds only pods of team-scheduler",
            id="other-scheduler",
        ),
        pytest.param({"PodName": "bound", "PodUID": "uid-bound"}, "it is already bound to n1", id="already-bound"),
        pytest.param({"PodUID": "uid-old"}, "its UID is uid-ours, not uid-old", id="recreated"),
        pytest.param({"PodName": "ghost", "PodUID": ""}, "no such pod", id="missing"),
    ],
)
async def test_bind_acts_only_on_served_unbound_pods(extender: Extender, fields: dict[str, str], want: str) -> None:
    status, answer = await extender.post("bind", binding(**fields))
    assert status == 200
    assert want in answer["Error"]
    assert [p.node_name for p in (extender.cluster.pods[OURS.key], extender.cluster.pods[THEIRS.key])] == ["", ""]


async def test_bind_of_a_served_pod_binds(extender: Extender) -> None:
    status, answer = await extender.post("bind", binding())
    assert (status, answer) == (200, {"Error": ""})
    assert extender.cluster.pods[OURS.key].node_name == "n2"
    assert extender.asked == ["default/ours"]


async def test_other_schedulers_pods_get_no_opinion(extender: Extender) -> None:
    """THEIRS asks for 64 CPUs: served, both nodes would fail; not served, both pass unscored."""
    names = [n.name for n in NODES]
    status, answer = await extender.post("filter", {"Pod": encode_pod(THEIRS), "NodeNames": names})
    assert (status, answer["NodeNames"], answer["FailedNodes"], answer["Error"]) == (200, names, {}, "")
    status, answer = await extender.post("prioritize", {"Pod": encode_pod(THEIRS), "NodeNames": names})
    assert answer == [{"Host": "n1", "Score": 0}, {"Host": "n2", "Score": 0}]
    victims = {"n1": {"Pods": [{"UID": "uid-bound"}], "NumPDBViolations": 0}}
    status, answer = await extender.post("preempt", {"Pod": encode_pod(THEIRS), "NodeNameToMetaVictims": victims})
    assert (status, answer) == (200, {"NodeNameToMetaVictims": victims})
    greedy = make_pod("greedy").uid("g").scheduler(SERVED).req(cpu="64").build()
    status, answer = await extender.post("filter", {"Pod": encode_pod(greedy), "NodeNames": names})
    assert answer["NodeNames"] == [] and set(answer["FailedAndUnresolvableNodes"]) == set(names)


BAD_BODIES = [
    pytest.param(b"", id="empty"),
    pytest.param(b"nope", id="not-json"),
    pytest.param(b"\xff\xfe", id="not-utf8"),
    pytest.param(b"[" * 20_000 + b"]" * 20_000, id="deep"),
    pytest.param(b"[1, 2]", id="array"),
    pytest.param(b'{"Pod": [], "NodeNames": 5}', id="wrong-shapes"),
    pytest.param(b'{"Pod": {"metadata": {"name": 5}}, "NodeNames": ["n1"]}', id="bad-pod"),
    pytest.param(json.dumps({"PodName": ["x"], "PodNamespace": {}, "Node": 1}).encode(), id="bad-binding"),
]


@pytest.mark.parametrize("body", BAD_BODIES)
async def test_bad_bodies_are_answered_never_500(extender: Extender, body: bytes) -> None:
    for verb in ("filter", "prioritize", "preempt", "bind"):
        status, answer = await extender.post(verb, body)
        assert status in (200, 400), (verb, status, answer)
        if status == 200 and isinstance(answer, dict) and verb != "preempt":
            assert answer["Error"], (verb, answer)
        assert "Traceback" not in str(answer)
    assert extender.asked == []


async def test_oversize_and_slow_bodies(extender: Extender) -> None:
    status, _ = await extender.post("filter", b"[" + b"1," * LIMITS.max_body_bytes + b"1]")
    assert status == 413
    host, port = LOOPBACK, extender.url.rsplit(":", 1)[1]
    reader, writer = await asyncio.open_connection(host, int(port))
    started = time.monotonic()
    writer.write(b"POST /bind HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    await writer.drain()
    async with asyncio.timeout(LIMITS.body_timeout + LIMITS.lingering_time + 2):
        data = await reader.read()
    writer.close()
    assert data.startswith(b"HTTP/1.1 408")
    assert time.monotonic() - started >= LIMITS.body_timeout
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /bind HTTP/1.1\r\nHost: x\r\n")  # and never the rest of the head
    await writer.drain()
    async with asyncio.timeout(LIMITS.header_timeout + 2):
        assert await reader.read() == b""
    writer.close()
    assert extender.asked == []


async def test_tls_with_client_certificates_and_token(tmp_path: Path) -> None:
    serving = generate_bundle(["127.0.0.1"])
    clients = generate_bundle(["kube-scheduler"], client=True)
    for name, data in (
        ("tls.crt", serving.cert_pem),
        ("tls.key", serving.key_pem),
        ("client-ca.crt", clients.ca_pem),
        ("client.crt", clients.cert_pem),
        ("client.key", clients.key_pem),
        ("token", b"t0k\n"),
    ):
        (tmp_path / name).write_bytes(data)
    context = server_ssl_context(
        str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), client_ca_file=str(tmp_path / "client-ca.crt")
    )
    ext = await start_extender(
        context=context, auth=ClientAuth(str(tmp_path / "client-ca.crt"), str(tmp_path / "token"))
    )
    assert ext.server is not None
    try:
        anonymous = ssl.create_default_context(cadata=serving.ca_pem.decode())
        with pytest.raises(aiohttp.ClientError):
            await ext.post("bind", binding(), ssl=anonymous)
        with_cert = ssl.create_default_context(cadata=serving.ca_pem.decode())
        with_cert.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
        status, _ = await ext.post("bind", binding(), ssl=with_cert)
        assert status == 401, "the token is required as well when both are configured"
        status, answer = await ext.post("bind", binding(), ssl=with_cert, headers={"Authorization": "Bearer t0k"})
        assert (status, answer) == (200, {"Error": ""})
        assert ext.asked == ["default/ours"]
    finally:
        await ext.server.stop()


def test_defaults_listen_on_loopback_for_default_scheduler_pods() -> None:
    parser = _parser()
    serving, listen = _serving(parser.parse_args(["--config", "x"]), parser)
    assert (listen.address, listen.ssl_context) == (LOOPBACK, None)
    assert serving.scheduler_names == frozenset({"default-scheduler"})
    assert not serving.auth.enabled


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(["--client-ca-file", "ca.crt"], "--client-ca-file needs TLS", id="client-ca-without-tls"),
        pytest.param(["--tls-cert-file", "a.crt"], "go together", id="cert-without-key"),
        pytest.param(["--scheduler-names", ","], "at least one schedulerName", id="no-names"),
        pytest.param(["--token-file", "/nonexistent/token"], "TLS or token files", id="missing-token-file"),
    ],
)
def test_flag_mistakes_are_usage_errors(argv: list[str], want: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser()
    with pytest.raises(SystemExit) as info, contextlib.suppress(ValueError):
        _serving(parser.parse_args(["--config", "x", *argv]), parser)
    assert info.value.code == 2
    assert want in capsys.readouterr().err
