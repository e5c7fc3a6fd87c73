"""A small in-process API server (aiohttp) for unit tests of the kube package.

It speaks enough of the real protocol over real HTTP: paginated LISTs with a resourceVersion, watch
streams with bookmarks and ``410 Gone`` ERROR events, the pods/binding and pods/status subresources,
events.k8s.io Events and coordination.k8s.io Leases with optimistic concurrency. Tests drive it
directly (``api.put("nodes", obj)``, ``api.expire_history()``, ``await api.drop_watches()``) and read
what the client did from ``api.requests``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from kubeapi.connection import Connection
from kubeapi.protogen import core_v1_pb2, events_v1_pb2, runtime_pb2
from kubeapi.protowire import MAGIC, PROTOBUF

Json = dict[str, Any]


class RawObject(dict[str, Any]):
    """An object whose fields other than ``metadata`` are given as raw JSON text (``rest``, the members
    after ``metadata``, e.g. ``'"spec":{"a":[[...]]}'``): for objects Python's ``json`` cannot encode
    (nested thousands of levels deep). As a dict it holds ``metadata`` only."""

    def __init__(self, metadata: Json, rest: str) -> None:
        super().__init__(metadata=metadata)
        self.rest = rest


def encode(doc: Any) -> bytes:
    """``json.dumps(doc)``, with every :class:`RawObject` in it written as its raw text."""
    raws: list[RawObject] = []

    def placeholder(obj: Any) -> Any:
        if isinstance(obj, RawObject):
            raws.append(obj)
            return f"\x00raw-{len(raws) - 1}"
        if isinstance(obj, dict):
            return {k: placeholder(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [placeholder(v) for v in obj]
        return obj

    text = json.dumps(placeholder(doc))
    for i, raw in enumerate(raws):
        body = "{" + '"metadata":' + json.dumps(raw["metadata"]) + ("," + raw.rest if raw.rest else "") + "}"
        text = text.replace(json.dumps(f"\x00raw-{i}"), body, 1)
    return text.encode()


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    at: float = 0.0
    """time.monotonic() when the server received the request."""
    content_type: str = ""
    """The request's Content-Type; a protobuf body is recorded decoded, as the dict its JSON would be."""


@dataclass
class FakeApi:
    rv: int = 100
    objects: dict[str, dict[str, Json]] = field(default_factory=dict)
    history: dict[str, list[tuple[int, str, Json]]] = field(default_factory=dict)
    oldest_rv: int = 0
    """Watches from a resourceVersion below this get a 410 ERROR event."""
    requests: list[Recorded] = field(default_factory=list)
    fail_next: dict[str, int] = field(default_factory=dict)
    """path suffix -> HTTP status to answer once (e.g. {"binding": 500})."""
    failures: dict[str, list[int]] = field(default_factory=dict)
    """path suffix -> HTTP statuses to answer to the next requests, one each, in order."""
    _watchers: dict[str, list[asyncio.Queue[Json | None]]] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    port: int = 0

    # ----- driving -----

    def put(self, plural: str, obj: Json, *, silent: bool = False) -> Json:
        """Create or replace; ``silent`` skips the watch event (a change made while a client was away)."""
        obj = copy.deepcopy(obj)
        key = _key(obj)
        store = self.objects.setdefault(plural, {})
        kind = "MODIFIED" if key in store else "ADDED"
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        store[key] = obj
        if not silent:
            self._emit(plural, kind, obj)
        return obj

    def delete(self, plural: str, key: str) -> None:
        obj = self.objects.get(plural, {}).pop(key)
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._emit(plural, "DELETED", obj)

    def bookmark(self, plural: str) -> None:
        self.rv += 1
        event = {"type": "BOOKMARK", "object": {"kind": "Bookmark", "metadata": {"resourceVersion": str(self.rv)}}}
        for queue in self._watchers.get(plural, []):
            queue.put_nowait(event)

    def expire_history(self) -> None:
        """Compaction: every resourceVersion seen so far is too old to watch from."""
        self.oldest_rv = self.rv
        self.history.clear()

    async def drop_watches(self, plural: str | None = None) -> None:
        """End open watch streams (the server's timeout, or a restart)."""
        for name, queues in self._watchers.items():
            if plural is None or name == plural:
                for queue in queues:
                    queue.put_nowait(None)
        await asyncio.sleep(0.05)

    def watcher_count(self, plural: str) -> int:
        return len(self._watchers.get(plural, []))

    def _emit(self, plural: str, kind: str, obj: Json) -> None:
        self.history.setdefault(plural, []).append((self.rv, kind, obj))
        event = {"type": kind, "object": obj}
        for queue in self._watchers.get(plural, []):
            queue.put_nowait(event)

    # ----- serving -----

    @property
    def connection(self) -> Connection:
        return Connection(f"http://127.0.0.1:{self.port}", None, lambda: "Bearer test", "fake API server")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        sockets = site._server.sockets  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = None
        content_type = request.headers.get("Content-Type", "")
        if request.can_read_body:
            raw = await request.read()
            body = _decode_body(raw, content_type) if raw else None
        path = request.path
        self.requests.append(
            Recorded(request.method, path, dict(request.query), body, time.monotonic(), content_type=content_type)
        )
        for suffix, status in list(self.fail_next.items()):
            if path.endswith(suffix):
                del self.fail_next[suffix]
                return _status(status, "InternalError", "injected failure")
        for suffix, statuses in self.failures.items():
            if path.endswith(suffix) and statuses:
                return _status(statuses.pop(0), "InternalError", "injected failure")
        parts = path.strip("/").split("/")
        listed = path in ("/api/v1/nodes", "/api/v1/pods")
        if (request.method == "GET" and listed) or path.startswith(("/apis/x.io", "/apis/scheduling.koordinator.sh")):
            plural = parts[-1]
            if request.query.get("watch"):
                return await self._watch(request, plural)
            return self._list(plural, request)
        if path.endswith("/binding") and request.method == "POST":
            return self._bind(parts[3], parts[5], body or {})
        if path.endswith("/status") and request.method == "PATCH":
            return self._patch_pod_status(parts[3], parts[5], body or {})
        if "/events.k8s.io/" in path:
            return web.json_response(body, status=201 if request.method == "POST" else 200)
        if "/coordination.k8s.io/" in path:
            return self._lease(request.method, parts, body)
        return _status(404, "NotFound", f"no route {request.method} {path}")

    def _list(self, plural: str, request: web.Request) -> web.Response:
        items = sorted(self.objects.get(plural, {}).values(), key=_key)
        selector = request.query.get("fieldSelector", "")
        if "status.phase!=Succeeded" in selector:
            items = [o for o in items if (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        limit = int(request.query.get("limit", "0") or 0)
        start = int(request.query.get("continue", "0") or 0)
        page = items[start : start + limit] if limit else items
        meta: Json = {"resourceVersion": str(self.rv)}
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
        return web.Response(
            body=encode({"kind": "List", "metadata": meta, "items": page}), content_type="application/json"
        )

    async def _watch(self, request: web.Request, plural: str) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or 0)
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        if since < self.oldest_rv:
            gone = {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": f"too old resource version: {since}",
                },
            }
            await response.write(encode(gone) + b"\n")
            return response
        queue: asyncio.Queue[Json | None] = asyncio.Queue()
        for rv, kind, obj in self.history.get(plural, []):
            if rv > since:
                queue.put_nowait({"type": kind, "object": obj})
        self._watchers.setdefault(plural, []).append(queue)
        try:
            while True:
                event = await queue.get()
                if event is None:
                    break
                await response.write(encode(event) + b"\n")
        finally:
            self._watchers[plural].remove(queue)
        return response

    def _bind(self, namespace: str, name: str, body: Json) -> web.Response:
        key = f"{namespace}/{name}"
        pod = self.objects.get("pods", {}).get(key)
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            return _status(409, "Conflict", "Precondition failed: UID")
        if pod["spec"].get("nodeName"):
            return _status(409, "Conflict", f"pod {name} is already assigned to node {pod['spec']['nodeName']!r}")
        pod = copy.deepcopy(pod)
        pod["spec"]["nodeName"] = body["target"]["name"]
        self.put("pods", pod)
        return _status(201, "", "", success=True)

    def _patch_pod_status(self, namespace: str, name: str, body: Json) -> web.Response:
        pod = copy.deepcopy(self.objects["pods"][f"{namespace}/{name}"])
        status = pod.setdefault("status", {})
        patch = body.get("status", {})
        for cond in patch.get("conditions", []):
            conditions = [c for c in status.get("conditions", []) if c["type"] != cond["type"]]
            conditions.append(cond)
            status["conditions"] = conditions
        if "nominatedNodeName" in patch:
            status["nominatedNodeName"] = patch["nominatedNodeName"]
        return web.json_response(self.put("pods", pod))

    def _lease(self, method: str, parts: list[str], body: Json | None) -> web.Response:
        leases = self.objects.setdefault("leases", {})
        if method == "POST":
            assert body is not None
            key = _key(body)
            if key in leases:
                return _status(409, "AlreadyExists", "lease exists")
            return web.json_response(self.put("leases", body), status=201)
        key = f"{parts[4]}/{parts[6]}"
        current = leases.get(key)
        if current is None:
            return _status(404, "NotFound", "lease not found")
        if method == "GET":
            return web.json_response(current)
        assert body is not None
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified")
        return web.json_response(self.put("leases", body))


_BODY_MESSAGES: dict[tuple[str, str], type[Message]] = {
    ("v1", "Binding"): core_v1_pb2.Binding,
    ("events.k8s.io/v1", "Event"): events_v1_pb2.Event,
}


def _decode_body(raw: bytes, content_type: str) -> Any:
    """A request body as a dict: JSON, or a protobuf envelope of a kind in :data:`_BODY_MESSAGES`
    (decoded by protobuf's own ``MessageToDict``, not the product's :mod:`kubeapi.protodict`, so that
    the product's call counts in tests/unit/kubeapi/test_per_pod_writes.py stay the client's own; a
    ``MicroTime`` is written back as its JSON string)."""
    if not content_type.startswith(PROTOBUF):
        return json.loads(raw)
    assert raw.startswith(MAGIC), "a protobuf body without the k8s\\x00 magic"
    unknown = runtime_pb2.Unknown()
    unknown.ParseFromString(raw[len(MAGIC) :])
    type_meta = unknown.typeMeta
    message = _BODY_MESSAGES[(type_meta.apiVersion, type_meta.kind)]()
    message.ParseFromString(unknown.raw)
    doc: Json = MessageToDict(message, preserving_proto_field_name=True)
    at = doc.get("eventTime")
    if isinstance(at, dict):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(at.get("seconds", 0))))
        doc["eventTime"] = f"{stamp}.{int(at.get('nanos', 0)) // 1000:06d}Z"
    return {"apiVersion": type_meta.apiVersion, "kind": type_meta.kind, **doc}


def _key(obj: Json) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "")


def _status(code: int, reason: str, message: str, *, success: bool = False) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Success" if success else "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    return web.json_response(body, status=code)
