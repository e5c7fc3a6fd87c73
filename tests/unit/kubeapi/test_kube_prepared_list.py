"""A first list parsed page by page while the next page is fetched (``Reflector.list_all(prepare=True)``)
delivers exactly what the plain path delivers: same events, same values, same rejections."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakeapi import FakeApi

from apis.core.parse import parse_node
from koord_scheduler.scheduler.source import EventType
from kubeapi import ReflectorOptions
from kubeapi.http import ApiHttp
from kubeapi.pod_watch import parse_pod_entry, update_pod_entry
from kubeapi.ratelimit import TokenBucket
from kubeapi.reflector import Reflector, Rejection, ResourceKind
from tests.builders import make_node, make_pod

Json = dict[str, Any]


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


def random_pods(rng: random.Random, n: int) -> list[Json]:
    pods = []
    for i in range(n):
        builder = make_pod(f"p{i:03d}").req(cpu=f"{rng.randint(1, 900)}m", memory=f"{rng.randint(1, 512)}Mi")
        if rng.random() < 0.6:
            builder = builder.node(f"n{rng.randint(0, 9)}")
        if rng.random() < 0.3:
            builder = builder.label("app", rng.choice(["a", "b", "c"]))
        obj = builder.obj()
        if rng.random() < 0.05:  # malformed: the parser refuses it, on either path
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
        pods.append(obj)
    return pods


async def first_list(api: FakeApi, kind: ResourceKind, *, prepare: bool, page_size: int) -> dict[str, Any]:
    """What one Reflector delivers for a first list: events in order, values and rejections."""
    events: list[tuple[EventType, Any, Any]] = []
    rejected: list[tuple[str, str]] = []
    parse_calls = [0]
    store_sizes: list[int] = []
    reflector: Reflector

    def counting_parser(obj: Json) -> Any:
        parse_calls[0] += 1
        store_sizes.append(len(reflector.store))
        return kind.parser(obj)

    counted = ResourceKind(
        kind.kind,
        kind.group,
        kind.version,
        kind.plural,
        counting_parser,
        field_selector=kind.field_selector,
        rank=kind.rank,
        update=kind.update,
    )
    http = ApiHttp(api.connection, TokenBucket(0, 1))
    reflector = Reflector(
        http,
        counted,
        lambda e, old, new: events.append((e, old, new)),
        options=ReflectorOptions(page_size=page_size),
        on_invalid=lambda r: rejected.append((r.key, r.reason)),
    )
    try:
        items, rv = await reflector.list_all(prepare=prepare)
        reflector.replace(items, rv)
    finally:
        await http.close()
    return {
        "events": events,
        "rejected": rejected,
        "store": {key: entry.value for key, entry in reflector.store.items()},
        "parse_calls": parse_calls[0],
        "parsed_before_delivery": sum(1 for size in store_sizes if size == 0),
    }


def pod_kind() -> ResourceKind:
    def rank(obj: Json) -> int:
        return 0 if obj["spec"].get("nodeName") else 1

    return ResourceKind("Pod", "", "v1", "pods", parse_pod_entry, rank=rank, update=update_pod_entry)


@pytest.mark.parametrize(
    ("seed", "pods", "page_size"),
    [
        pytest.param(1, 40, 7, id="many-pages"),
        pytest.param(2, 25, 500, id="one-page"),
        pytest.param(3, 31, 1, id="page-per-pod"),
        pytest.param(4, 0, 5, id="empty"),
    ],
)
async def test_prepared_first_list_delivers_what_the_plain_path_does(
    api: FakeApi, seed: int, pods: int, page_size: int
) -> None:
    for obj in random_pods(random.Random(seed), pods):
        api.put("pods", obj)

    plain = await first_list(api, pod_kind(), prepare=False, page_size=page_size)
    prepared = await first_list(api, pod_kind(), prepare=True, page_size=page_size)

    assert prepared["events"] == plain["events"]
    assert prepared["rejected"] == plain["rejected"]
    assert prepared["store"] == plain["store"]
    bad = len(plain["rejected"])
    # Each good object is parsed once, before delivery starts; a refused one once more at delivery,
    # where it is reported.
    assert prepared["parse_calls"] == pods + bad
    assert prepared["parsed_before_delivery"] == pods
    assert plain["parsed_before_delivery"] == (1 if pods else 0)  # the plain path parses while delivering


async def test_a_prepared_value_is_not_used_for_another_resource_version(api: FakeApi) -> None:
    api.put("nodes", make_node("n1").capacity(cpu="4").obj())
    http = ApiHttp(api.connection, TokenBucket(0, 1))
    delivered: list[Any] = []
    kind = ResourceKind("Node", "", "v1", "nodes", parse_node)
    reflector = Reflector(http, kind, lambda e, old, new: delivered.append(new))
    try:
        items, rv = await reflector.list_all(prepare=True)
    finally:
        await http.close()
    changed = make_node("n1").capacity(cpu="8").obj()
    changed["metadata"]["resourceVersion"] = "999"
    reflector.replace([changed], rv)  # as if the object had changed between the parse and the delivery
    assert [node.allocatable["cpu"] for node in delivered] == [8000]
    assert items[0]["metadata"]["resourceVersion"] != "999"


async def test_relist_with_a_store_parses_at_delivery_as_before(api: FakeApi) -> None:
    api.put("nodes", make_node("n1").obj())
    http = ApiHttp(api.connection, TokenBucket(0, 1))
    kind = ResourceKind("Node", "", "v1", "nodes", parse_node)
    rejections: list[Rejection] = []
    reflector = Reflector(http, kind, lambda e, old, new: None, on_invalid=rejections.append)
    try:
        reflector.replace(*(await reflector.list_all()))
        await reflector.list_all(prepare=True)  # a store exists: nothing is prepared
    finally:
        await http.close()
    assert reflector._prepared == {}
    assert rejections == []
