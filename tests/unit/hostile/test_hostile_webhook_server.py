"""The admission HTTPS server against hostile callers: bodies, sizes, slow clients, names, exceptions, auth.

The real server (:class:`~koord_scheduler.webhook.server.WebhookServer`) on a loopback port with a generated
CA, driven over real TLS sockets; the cluster behind it is an in-memory lookup that records what it was asked
and can be told to raise. Every answer is a 200 AdmissionReview or a 4xx, never a 500, and nothing is looked
up for a review the server refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apis.colocation import ResolvedProfile, resolve_profile
from apis.scheduling.elasticquota import QuotaRecord
from koord_scheduler.webhook.admission import ClusterLookupError, PodMutator, WebhookMetrics
from koord_scheduler.webhook.certs import CertBundle, generate_bundle, server_ssl_context, write_bundle
from koord_scheduler.webhook.mutation import PriorityClassInfo, ProfileSkip
from koord_scheduler.webhook.quota import VALIDATE_QUOTA_PATH, QuotaValidator
from koord_scheduler.webhook.server import AdmissionServing, WebhookServer
from kubeapi.serving_limits import ClientAuth, ServingLimits

Json = dict[str, Any]
LIMITS = ServingLimits(
    max_body_bytes=64 * 1024, header_timeout=0.5, body_timeout=0.5, handshake_timeout=0.5, max_connections=8
)
PROFILE = {
    "metadata": {"name": "be"},
    "spec": {"namespaceSelector": {"matchLabels": {"colocation": "true"}}, "labels": {"mutated": "true"}},
}


class RecordingLookup:
    """The cluster as the webhook sees it; ``raises`` makes every lookup raise it."""

    def __init__(self) -> None:
        self._profiles = [resolve_profile(PROFILE)]
        self.asked: list[str] = []
        self.raises: BaseException | None = None

    def profiles(self) -> Sequence[ResolvedProfile]:
        return self._profiles

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        self.asked.append(f"namespace:{name}")
        if self.raises is not None:
            raise self.raises
        return {"colocation": "true"}

    async def priority_class(self, name: str) -> PriorityClassInfo | None:
        self.asked.append(f"priorityclass:{name}")
        return None

    def profile_skipped(self, skip: ProfileSkip) -> None:
        pass

    # the quota webhook's lookup
    def quotas(self) -> Mapping[str, QuotaRecord]:
        return {}

    async def relist(self) -> Mapping[str, QuotaRecord]:
        self.asked.append("relist")
        return {}

    async def pods_of(self, quota: str) -> Sequence[str]:
        self.asked.append(f"pods:{quota}")
        if self.raises is not None:
            raise self.raises
        return []

    async def has_pods(self, quota: str, namespaces: Sequence[str]) -> bool:
        self.asked.append(f"has-pods:{quota}")
        return False

    def admitted(self, name: str, record: QuotaRecord | None) -> None:
        pass


@dataclass
class Webhook:
    port: int
    lookup: RecordingLookup
    bundle: CertBundle
    registry: CollectorRegistry
    server: WebhookServer

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.bundle.ca_pem.decode())

    def refused(self, path: str, reason: str) -> float:
        return (
            self.registry.get_sample_value("koord_webhook_requests_refused_total", {"path": path, "reason": reason})
            or 0.0
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_webhook(tmp_path: Path, *, auth: ClientAuth | None = None) -> Webhook:
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, tmp_path)
    lookup = RecordingLookup()
    registry = CollectorRegistry()
    mutator = PodMutator(lookup, metrics=WebhookMetrics.create(registry), roll=lambda: 0)
    serving = AdmissionServing("127.0.0.1", free_port(), limits=LIMITS, auth=auth or ClientAuth())
    context = server_ssl_context(tmp_path, client_ca_file=(auth or ClientAuth()).client_ca_file)
    server = WebhookServer(
        mutator,
        context,
        serving=serving,
        routes={VALIDATE_QUOTA_PATH: QuotaValidator(lookup).review},
        registry=registry,
    )
    await server.start()
    return Webhook(server.port, lookup, bundle, registry, server)


@pytest.fixture
async def webhook(tmp_path: Path) -> AsyncIterator[Webhook]:
    hook = await start_webhook(tmp_path)
    yield hook
    await hook.server.stop()


async def exchange(
    hook: Webhook, raw: bytes, *, context: ssl.SSLContext | None = None, wait: float = 5.0
) -> tuple[int, bytes]:
    """Send ``raw`` bytes over one TLS connection; the status and body of the answer (0 when the server
    closed the connection without one)."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", hook.port, ssl=context or hook.client_context(), server_hostname="127.0.0.1"
    )
    try:
        writer.write(raw)
        await writer.drain()
        async with asyncio.timeout(wait):
            data = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    if not data:
        return 0, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def post(path: str, body: bytes, *, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    ).encode() + body


def review(
    namespace: str = "default",
    *,
    uid: Any = "u-1",
    operation: str = "CREATE",
    obj: Any = None,
    resource: str = "pods",
    group: str = "",
) -> Json:
    request: Json = {
        "uid": uid,
        "operation": operation,
        "namespace": namespace,
        "resource": {"group": group, "version": "v1", "resource": resource},
    }
    request["object"] = (
        obj if obj is not None else {"metadata": {"generateName": "p-"}, "spec": {"containers": [{"name": "c"}]}}
    )
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def post_review(hook: Webhook, body: Any, path: str = "/mutate-pod") -> tuple[int, Any]:
    status, raw = await exchange(hook, post(path, json.dumps(body).encode()))
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("latin-1")


# ----- names -----

HOSTILE_NAMESPACES = [
    pytest.param(
        "default/pods/x HTTP/1.1\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim", id="smuggled-request"
    ),
    pytest.param("default\n", id="trailing-lf"),
    pytest.param("default\x00", id="nul"),
    pytest.param("../kube-system", id="dot-dot"),
    pytest.param("default%2Fpods", id="percent"),
    pytest.param("Default", id="uppercase"),
    pytest.param("a" * 64, id="too-long"),
    pytest.param("", id="empty"),
    pytest.param(5, id="not-a-string"),
    pytest.param("\u0430dmin", id="cyrillic"),
]


@pytest.mark.parametrize("namespace", HOSTILE_NAMESPACES)
async def test_hostile_namespace_is_denied_before_any_lookup(webhook: Webhook, namespace: Any) -> None:
    status, answer = await post_review(webhook, review(namespace))
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert answer["response"]["uid"] == "u-1"
    assert answer["response"]["status"]["message"].startswith("request.namespace ")
    assert webhook.lookup.asked == []
    assert webhook.refused("/mutate-pod", "Denied") == 1


@pytest.mark.parametrize("name", ["a b", "x\r\nDELETE /", "a/b", "A", "-a", "a" * 254])
async def test_hostile_object_and_request_names_are_denied(webhook: Webhook, name: str) -> None:
    body = review(obj={"metadata": {"name": name}, "spec": {"containers": []}})
    status, answer = await post_review(webhook, body)
    assert (status, answer["response"]["allowed"]) == (200, False)
    assert "request.object.metadata.name" in answer["response"]["status"]["message"]
    body = review()
    body["request"]["name"] = name
    status, answer = await post_review(webhook, body)
    assert (status, answer["response"]["allowed"]) == (200, False)
    assert "request.name" in answer["response"]["status"]["message"]
    assert webhook.lookup.asked == []


async def test_quota_review_with_hostile_names_is_denied_before_listing_pods(webhook: Webhook) -> None:
    quota = {"metadata": {"name": "q,other!=x", "namespace": "team"}, "spec": {"max": {"cpu": "1"}}}
    body = review("team", operation="DELETE", resource="elasticquotas", group="scheduling.sigs.k8s.io")
    body["request"]["oldObject"] = quota
    status, answer = await post_review(webhook, body, VALIDATE_QUOTA_PATH)
    assert (status, answer["response"]["allowed"]) == (200, False)
    assert "request.oldObject.metadata.name" in answer["response"]["status"]["message"]
    assert webhook.lookup.asked == []


# ----- bodies that are not reviews -----

NOT_REVIEWS = [
    pytest.param(b"", id="empty"),
    pytest.param(b"not json", id="not-json"),
    pytest.param(b"\xff\xfe\x00{", id="not-utf8"),
    pytest.param(b"[" * 20_000 + b"]" * 20_000, id="deep-array"),
    pytest.param(b'{"a":' * 10_000 + b"1" + b"}" * 10_000, id="deep-object"),
    pytest.param(b"1e999999", id="huge-number"),
    pytest.param(b"[]", id="array"),
    pytest.param(b'{"kind": "Pod"}', id="not-a-review"),
    pytest.param(json.dumps({"kind": "AdmissionReview", "request": {"uid": ""}}).encode(), id="empty-uid"),
    pytest.param(json.dumps({"kind": "AdmissionReview", "request": {"uid": "x" * 200}}).encode(), id="long-uid"),
    pytest.param(json.dumps({"kind": "AdmissionReview", "request": {"uid": "a\r\nb"}}).encode(), id="crlf-uid"),
    pytest.param(json.dumps({"kind": "AdmissionReview", "request": {"uid": 7}}).encode(), id="number-uid"),
]


@pytest.mark.parametrize("raw", NOT_REVIEWS)
async def test_body_that_is_not_a_review_gets_400_not_500(webhook: Webhook, raw: bytes) -> None:
    for path in ("/mutate-pod", "/validate-pod", VALIDATE_QUOTA_PATH):
        status, text = await exchange(webhook, post(path, raw))
        assert status == 400, (path, text[:200])
        assert b"Traceback" not in text
    assert webhook.lookup.asked == []


WRONG_REVIEWS = [
    pytest.param({**review(), "apiVersion": "admission.k8s.io/v1beta1"}, "apiVersion", id="v1beta1"),
    pytest.param(review(resource="secrets"), "this webhook serves", id="other-resource"),
    pytest.param(review(operation="DELETE"), "this webhook serves", id="other-operation"),
    pytest.param(review(obj=[1, 2]), "request.object", id="object-not-a-map"),
    pytest.param(review(obj={"metadata": "x", "spec": {}}), "request.object.metadata", id="metadata-not-a-map"),
]


@pytest.mark.parametrize(("body", "want"), WRONG_REVIEWS)
async def test_review_with_a_uid_it_does_not_serve_fails_closed(webhook: Webhook, body: Json, want: str) -> None:
    status, answer = await post_review(webhook, body)
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"].startswith(want)
    assert webhook.lookup.asked == []


@pytest.mark.parametrize(
    "exc",
    [
        RecursionError("maximum recursion depth exceeded"),
        MemoryError(),
        OverflowError("int too large"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        KeyError("x"),
        RuntimeError("bug"),
        ClusterLookupError("connection refused"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_every_exception_stays_in_its_request(
    webhook: Webhook, exc: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.lookup.raises = exc
    with caplog.at_level(logging.WARNING):
        status, answer = await post_review(webhook, review())
    assert status == 200
    if isinstance(exc, ClusterLookupError):  # the API server unreachable: admitted unchanged, as documented
        assert answer["response"] == {"uid": "u-1", "allowed": True}
    else:
        assert answer["response"]["allowed"] is False
        assert answer["response"]["status"]["message"] == (
            f"the webhook could not process this request ({type(exc).__name__})"
        )
        assert webhook.refused("/mutate-pod", "InternalError") == 1
        assert next(r.getMessage() for r in caplog.records if "refused" in r.getMessage()).startswith(
            "admission /mutate-pod refused (InternalError): request u-1: "
        )
    assert "Traceback" not in caplog.text
    webhook.lookup.raises = None
    status, answer = await post_review(webhook, review(uid="u-2"))
    assert (status, answer["response"]["allowed"], "patch" in answer["response"]) == (200, True, True)


async def test_deep_pod_object_is_answered_not_crashed(webhook: Webhook) -> None:
    """1,000 levels: under orjson's 1,024, so it decodes and reaches the mutation and the patch."""
    body = json.dumps(review(obj={"metadata": {"generateName": "p-"}, "spec": {"containers": [], "x": "DEEP"}}))
    raw = body.replace('"DEEP"', '{"a":' * 1000 + '"x"' + "}" * 1000).encode()
    status, answer = await exchange(webhook, post("/mutate-pod", raw))
    assert status == 200
    assert json.loads(answer)["response"]["uid"] == "u-1"


# ----- sizes -----


async def test_declared_oversize_body_gets_413_before_it_is_sent(webhook: Webhook) -> None:
    head = (
        f"POST /mutate-pod HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {LIMITS.max_body_bytes + 1}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    status, text = await exchange(webhook, head)  # no body byte sent at all: 413, not 408
    assert status == 413, text
    assert time.monotonic() - started < LIMITS.lingering_time + 1
    assert webhook.refused("/mutate-pod", "TooLarge") == 1


async def test_chunked_oversize_body_gets_413(webhook: Webhook) -> None:
    chunk = b"x" * 16384
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMITS.max_body_bytes // len(chunk) + 2))
    raw = b"POST /mutate-pod HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    status, _ = await exchange(webhook, raw)
    assert status == 413


async def test_body_at_the_limit_is_read(webhook: Webhook) -> None:
    body = review()
    body["request"]["object"]["metadata"]["annotations"] = {"pad": ""}
    size = len(json.dumps(body))
    body["request"]["object"]["metadata"]["annotations"]["pad"] = "x" * (LIMITS.max_body_bytes - size - 64)
    status, answer = await post_review(webhook, body)
    assert (status, answer["response"]["allowed"]) == (200, True)


# ----- slow clients -----


async def test_slow_body_gets_408(webhook: Webhook) -> None:
    head = b'POST /mutate-pod HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"kind":'
    started = time.monotonic()
    status, _ = await exchange(webhook, head)
    assert status == 408
    assert LIMITS.body_timeout <= time.monotonic() - started < LIMITS.body_timeout + 2
    assert webhook.refused("/mutate-pod", "Timeout") == 1


async def test_slowloris_head_is_cut_off(webhook: Webhook) -> None:
    """A client trickling its request head one byte at a time loses the connection after the header
    timeout, however steadily it sends."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", webhook.port, ssl=webhook.client_context(), server_hostname="127.0.0.1"
    )
    started = time.monotonic()
    closed_after = None
    try:
        for byte in b"POST /mutate-pod HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000:
            writer.write(bytes([byte]))
            try:
                await writer.drain()
                if await asyncio.wait_for(reader.read(1), 0.05) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError):
                closed_after = time.monotonic() - started
                break
    finally:
        writer.close()
    assert closed_after is not None, "the server kept the slow connection open"
    assert closed_after < LIMITS.header_timeout + 1.5


async def test_idle_connection_and_slow_handshake_are_closed(webhook: Webhook) -> None:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", webhook.port, ssl=webhook.client_context(), server_hostname="127.0.0.1"
    )
    async with asyncio.timeout(LIMITS.header_timeout + 2):
        assert await reader.read() == b""
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", webhook.port)  # never starts the TLS handshake
    try:
        async with asyncio.timeout(LIMITS.handshake_timeout + 2):
            assert await reader.read() == b""
    finally:
        writer.close()


async def test_connections_over_the_limit_are_closed(webhook: Webhook) -> None:
    held = []
    for _ in range(LIMITS.max_connections):
        held.append(
            await asyncio.open_connection(
                "127.0.0.1", webhook.port, ssl=webhook.client_context(), server_hostname="127.0.0.1"
            )
        )
    await asyncio.sleep(0.05)
    try:
        with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, OSError)):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", webhook.port, ssl=webhook.client_context(), server_hostname="127.0.0.1"
            )
            writer.write(post("/mutate-pod", json.dumps(review()).encode()))
            await writer.drain()
            if await reader.read() == b"":
                raise ConnectionError("closed")
    finally:
        for _, writer in held:
            writer.close()
    assert webhook.server.server.refused_connections >= 1
    await asyncio.sleep(LIMITS.header_timeout)
    status, answer = await post_review(webhook, review())
    assert (status, answer["response"]["allowed"]) == (200, True), "served again once the others are gone"


# ----- authentication -----


async def test_token_is_required_when_configured(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    hook = await start_webhook(tmp_path / "certs", auth=ClientAuth(token_file=str(token)))
    try:
        body = json.dumps(review()).encode()
        assert (await exchange(hook, post("/mutate-pod", body)))[0] == 401
        assert (await exchange(hook, post("/mutate-pod", body, extra="Authorization: Bearer nope\r\n")))[0] == 401
        status, raw = await exchange(hook, post("/mutate-pod", body, extra="Authorization: Bearer s3cret\r\n"))
        assert (status, json.loads(raw)["response"]["allowed"]) == (200, True)
        token.write_text("rotated")
        assert (await exchange(hook, post("/mutate-pod", body, extra="Authorization: Bearer s3cret\r\n")))[0] == 401
        assert (await exchange(hook, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))[0] == 200
        assert hook.lookup.asked == ["namespace:default"]
    finally:
        await hook.server.stop()


async def test_client_certificate_is_required_when_configured(tmp_path: Path) -> None:
    clients = generate_bundle(["kube-apiserver"], client=True)  # a CA and a client certificate it signed
    (tmp_path / "client-ca.crt").write_bytes(clients.ca_pem)
    (tmp_path / "client.crt").write_bytes(clients.cert_pem)
    (tmp_path / "client.key").write_bytes(clients.key_pem)
    hook = await start_webhook(tmp_path / "certs", auth=ClientAuth(client_ca_file=str(tmp_path / "client-ca.crt")))
    try:
        body = post("/mutate-pod", json.dumps(review()).encode())
        with pytest.raises((ssl.SSLError, ConnectionError, TimeoutError)):
            status, _ = await exchange(hook, body)
            if status == 0:
                raise ConnectionError("closed without an answer")
        context = hook.client_context()
        context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
        status, raw = await exchange(hook, body, context=context)
        assert (status, json.loads(raw)["response"]["allowed"]) == (200, True)
    finally:
        await hook.server.stop()
