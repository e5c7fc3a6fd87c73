"""bench/e2e_throughput.py's BindWatcher: the same binds seen from a protobuf and a JSON watch, the
Accept header each asks for, and the re-list after an ERROR event in either encoding."""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

import pytest

from kubeapi import jsoncodec, protowire
from kubeapi.protogen import core_v1_pb2, meta_v1_pb2, runtime_pb2
from tests.unit.bench.conftest import load_bench


def _body(kind: str, message: Any) -> bytes:
    unknown = runtime_pb2.Unknown(raw=message.SerializeToString())
    unknown.typeMeta.apiVersion = "v1"
    unknown.typeMeta.kind = kind
    return protowire.MAGIC + unknown.SerializeToString()


def _pod(name: str, node: str, rv: str) -> Any:
    pod = core_v1_pb2.Pod()
    pod.metadata.name = name
    pod.metadata.namespace = "bench"
    pod.metadata.resourceVersion = rv
    pod.spec.nodeName = node
    return pod


def _proto_frame(event_type: str, name: str, node: str, rv: str) -> bytes:
    event = meta_v1_pb2.WatchEvent(type=event_type)
    if event_type == "ERROR":
        event.object.raw = _body("Status", meta_v1_pb2.Status(code=410, reason="Expired", message="too old"))
    else:
        event.object.raw = _body("Pod", _pod(name, node, rv))
    raw = event.SerializeToString()
    return struct.pack(">I", len(raw)) + raw


def _json_line(event_type: str, name: str, node: str, rv: str) -> bytes:
    if event_type == "ERROR":
        obj: dict[str, Any] = {"kind": "Status", "code": 410}
    else:
        obj = {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"nodeName": node} if node else {}}
    return jsoncodec.dumps({"type": event_type, "object": obj}) + b"\n"


class _Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


class FakeHttp:
    """Serves one watch body per ``stream`` call and a list for the re-list, recording the Accept asked."""

    def __init__(self, streams: list[list[bytes]], listing: bytes) -> None:
        self.streams = streams
        self.listing = listing
        self.accepts: list[str] = []
        self.watch_versions: list[str] = []

    @asynccontextmanager
    async def stream(self, path: str, params: dict[str, str], *, accept: str) -> AsyncIterator[_Chunks]:
        self.accepts.append(accept)
        self.watch_versions.append(params["resourceVersion"])
        yield _Chunks(self.streams.pop(0))

    async def request(self, method: str, path: str, *, accept: str) -> bytes:
        self.accepts.append(accept)
        return self.listing

    async def request_json(self, method: str, path: str) -> Any:
        self.accepts.append("application/json")
        return jsoncodec.loads(self.listing)


EVENTS = [
    ("ADDED", "p-0", "", "10"),
    ("MODIFIED", "p-0", "node-1", "11"),
    ("MODIFIED", "other", "node-2", "12"),
    ("ERROR", "", "", ""),
]


@pytest.mark.parametrize("protobuf", [True, False], ids=["protobuf", "json"])
def test_the_watcher_sees_the_same_binds_in_both_encodings_and_relists_after_an_error(
    e2e_throughput: ModuleType, protobuf: bool
) -> None:
    encode = _proto_frame if protobuf else _json_line
    first = b"".join(encode(*event) for event in EVENTS)
    second = encode("MODIFIED", "p-2", "node-3", "30")
    if protobuf:
        page = core_v1_pb2.PodList()
        page.metadata.resourceVersion = "20"
        page.items.append(_pod("p-1", "node-1", "19"))
        listing = _body("PodList", page)
    else:
        listing = jsoncodec.dumps(
            {"metadata": {"resourceVersion": "20"}, "items": [{"metadata": {"name": "p-1"}, "spec": {"nodeName": "n"}}]}
        )
    # the first body in two chunks split inside a frame / line
    http = FakeHttp([[first[:7], first[7:]], [second]], listing)
    watcher = e2e_throughput.BindWatcher(http, "5", 3, name_prefix="p-", protobuf=protobuf)
    asyncio.run(asyncio.wait_for(watcher.run(), 5))

    assert sorted(watcher.bound) == ["p-0", "p-1", "p-2"]  # "other" is not a bench pod; p-1 from the re-list
    assert watcher.done.is_set()
    assert http.watch_versions == ["5", "20"]  # resumed from the re-list's resourceVersion
    want = protowire.PROTOBUF if protobuf else "application/json"
    assert http.accepts == [want, want, want]


def test_the_watcher_matches_the_contenders_encoding(e2e_throughput: ModuleType) -> None:
    assert e2e_throughput.watcher_protobuf("koord-scheduler")
    assert e2e_throughput.watcher_protobuf("kube-scheduler")
    assert not e2e_throughput.watcher_protobuf("koord-scheduler-json")


def test_the_counting_client_passes_the_accept_header_on_and_counts_the_watch(
    e2e_throughput: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubeapi import ApiHttp

    e2e_requests = load_bench("e2e_requests")
    asked: list[str] = []

    @asynccontextmanager
    async def stream(self: Any, path: str, params: Any, *, accept: str = "application/json") -> AsyncIterator[Any]:
        asked.append(accept)
        yield _Chunks([])

    async def request(self: Any, method: str, path: str, **kwargs: Any) -> bytes:
        asked.append(kwargs["accept"])
        return b""

    monkeypatch.setattr(ApiHttp, "stream", stream)
    monkeypatch.setattr(ApiHttp, "request", request)
    http = object.__new__(e2e_requests.CountingHttp)
    http.sent, http.open_watches = Counter(), Counter()

    async def use() -> None:
        async with http.stream("/api/v1/namespaces/bench/pods", {"watch": "1"}, accept=protowire.PROTOBUF):
            assert sum(http.open_watches.values()) == 1
        await http.request("GET", "/api/v1/namespaces/bench/pods", accept=protowire.PROTOBUF)

    asyncio.run(use())
    assert asked == [protowire.PROTOBUF, protowire.PROTOBUF]
    assert sum(http.open_watches.values()) == 0
    assert sum(http.sent.values()) == 2
