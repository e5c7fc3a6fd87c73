"""The first lists of Nodes and Pods made early on a thread (``kubeapi.prefetch``) deliver what the
source's own first list delivers; changes made after them arrive through the watch; a failed early list
falls back to listing at start."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fakeapi import FakeApi
from test_kube_source import RecordingSink, eventually

from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from kubeapi import KubeConfigError, ReflectorOptions
from kubeapi.connection import Connection
from kubeapi.events import EventOptions
from kubeapi.prefetch import Prefetch
from tests.builders import make_node, make_pod

Json = dict[str, Any]


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


def fill(api: FakeApi, seed: int, nodes: int, pods: int) -> None:
    rng = random.Random(seed)
    for i in range(nodes):
        api.put("nodes", make_node(f"n{i:02d}").capacity(cpu=str(rng.randint(1, 64))).obj())
    for i in range(pods):
        builder = make_pod(f"p{i:03d}").req(cpu=f"{rng.randint(1, 900)}m")
        if rng.random() < 0.6:
            builder = builder.node(f"n{rng.randint(0, max(nodes - 1, 0)):02d}")
        obj = builder.obj()
        if rng.random() < 0.05:  # malformed: refused (and reported) on either path
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
        api.put("pods", obj)


def make_source(api: FakeApi, prefetch: Prefetch | None, page_size: int) -> KubeClusterSource:
    return KubeClusterSource(
        api.connection,
        options=KubeSourceOptions(
            qps=0,
            burst=1,
            events=EventOptions(hostname="test-host"),
            reflector=ReflectorOptions(page_size=page_size, min_watch_timeout=60),
        ),
        prefetch=prefetch,
    )


async def started(api: FakeApi, prefetch: Prefetch | None, page_size: int) -> tuple[RecordingSink, KubeClusterSource]:
    source = make_source(api, prefetch, page_size)
    sink = RecordingSink()
    await source.start(sink)
    return sink, source


def early(api: FakeApi, page_size: int, connect: Callable[[], Connection] | None = None) -> Prefetch:
    return Prefetch(
        connect or (lambda: api.connection), qps=0, burst=1, reflector=ReflectorOptions(page_size=page_size)
    ).start()


def list_requests(api: FakeApi, path: str) -> int:
    return sum(1 for r in api.requests if r.method == "GET" and r.path == path and "watch" not in r.query)


@pytest.mark.parametrize(
    ("seed", "nodes", "pods", "page_size"),
    [
        pytest.param(1, 12, 60, 7, id="many-pages"),
        pytest.param(2, 3, 20, 500, id="one-page"),
        pytest.param(3, 0, 0, 5, id="empty"),
    ],
)
async def test_early_lists_deliver_what_the_source_would_list(
    api: FakeApi, seed: int, nodes: int, pods: int, page_size: int
) -> None:
    fill(api, seed, nodes, pods)
    plain_sink, plain = await started(api, None, page_size)
    await plain.stop()
    node_lists, pod_lists = list_requests(api, "/api/v1/nodes"), list_requests(api, "/api/v1/pods")

    prefetch = early(api, page_size)
    await eventually(prefetch.done)
    listed_early = list_requests(api, "/api/v1/nodes") - node_lists, list_requests(api, "/api/v1/pods") - pod_lists
    sink, source = await started(api, prefetch, page_size)
    try:
        assert sink.events == plain_sink.events
        assert sink.pods == plain_sink.pods
        assert sink.nodes == plain_sink.nodes
        assert sink.object_errors.count("Pod", "Invalid") == plain_sink.object_errors.count("Pod", "Invalid")
        # start() listed neither kind again: every list request was the early one's
        assert (
            list_requests(api, "/api/v1/nodes") - node_lists,
            list_requests(api, "/api/v1/pods") - pod_lists,
        ) == listed_early
        assert listed_early[1] >= 1
        # The lists are not kept past start(): the caller holds the prefetch as long as the process runs.
        assert await prefetch.listed("Pod") is None and await prefetch.listed("Node") is None
    finally:
        await source.stop()


async def test_changes_after_the_early_list_arrive_through_the_watch(api: FakeApi) -> None:
    api.put("nodes", make_node("n1").capacity(cpu="4").obj())
    api.put("pods", make_pod("bound").node("n1").obj())
    api.put("pods", make_pod("gone").node("n1").obj())
    prefetch = early(api, 500)
    await eventually(prefetch.done)
    # Changes made while the rest of the process was still starting (no watch open yet).
    api.put("nodes", make_node("n1").capacity(cpu="8").obj())
    api.put("pods", make_pod("new").obj())
    api.delete("pods", "default/gone")

    sink, source = await started(api, prefetch, 500)
    try:
        await eventually(
            lambda: (
                "default/new" in sink.pods
                and "default/gone" not in sink.pods
                and sink.nodes["n1"].allocatable["cpu"] == 8000
            )
        )
        assert ("Pod", "ADDED", "default/gone") in sink.events  # it was in the early list
    finally:
        await source.stop()


async def test_a_failed_early_list_is_listed_again_at_start(api: FakeApi) -> None:
    api.put("nodes", make_node("n1").obj())
    api.put("pods", make_pod("p").node("n1").obj())
    api.failures["/api/v1/pods"] = [500]
    prefetch = early(api, 500)
    await eventually(prefetch.done)
    sink, source = await started(api, prefetch, 500)
    try:
        assert sorted(sink.pods) == ["default/p"]
        assert sorted(sink.nodes) == ["n1"]
    finally:
        await source.stop()


async def test_a_connection_that_cannot_load_is_raised_to_the_caller(api: FakeApi) -> None:
    def refuse() -> Connection:
        raise KubeConfigError("kubeconfig 'x': no such file")

    prefetch = early(api, 500, connect=refuse)
    with pytest.raises(KubeConfigError, match="no such file"):
        prefetch.connection()
    assert await prefetch.listed("Pod") is None
    assert [page async for page in prefetch.pod_pages()] == []


async def test_bound_pods_are_delivered_page_by_page_and_pending_ones_at_the_end(api: FakeApi) -> None:
    from koord_scheduler.scheduler.source import EventType
    from kubeapi.core_kinds import POD_KIND
    from kubeapi.http import ApiHttp
    from kubeapi.ratelimit import TokenBucket
    from kubeapi.reflector import Reflector

    api.put("pods", make_pod("a-bound").node("n1").obj())
    api.put("pods", make_pod("b-pending").obj())
    api.put("pods", make_pod("c-bound").node("n1").obj())
    api.put("pods", make_pod("d-bound-then-gone").node("n1").obj())
    delivered: list[tuple[EventType, str]] = []
    http = ApiHttp(api.connection, TokenBucket(0, 1))
    lister = Reflector(http, POD_KIND, lambda *_: None, options=ReflectorOptions(page_size=2))
    pages: list[tuple[list[Json], dict[str, Any]]] = []
    try:
        items, rv = await lister.list_all(prepare=True, on_page=lambda page, ready: pages.append((page, ready)))
    finally:
        await http.close()
    assert len(pages) == 2
    reflector = Reflector(http, POD_KIND, lambda e, old, new: delivered.append((e, (new or old).pod.name)))

    reflector.deliver_early(*pages[0])
    assert delivered == [(EventType.ADDED, "a-bound")]  # the pending pod waits for the end
    reflector.deliver_early(*pages[1])
    reflector.deliver_early(*pages[0])  # a page passed again (the list started over): nothing new
    assert delivered == [
        (EventType.ADDED, "a-bound"),
        (EventType.ADDED, "c-bound"),
        (EventType.ADDED, "d-bound-then-gone"),
    ]
    final = [obj for obj in items if obj["metadata"]["name"] != "d-bound-then-gone"]
    reflector.replace(final, rv)
    assert delivered[3:] == [(EventType.DELETED, "d-bound-then-gone"), (EventType.ADDED, "b-pending")]
    assert sorted(reflector.store) == ["default/a-bound", "default/b-pending", "default/c-bound"]


def test_the_collector_is_paused_for_start_up_only() -> None:
    import gc

    from koord_scheduler.scheduler.heap import pause_collector, resume_collector

    assert gc.isenabled()
    pause_collector()
    try:
        assert not gc.isenabled()
    finally:
        resume_collector()
    assert gc.isenabled()

    # With freeze, what was allocated during the pause is not left for one huge generation-0 pass.
    pause_collector()
    loaded = [{"pod": [i]} for i in range(50_000)]
    assert gc.get_count()[0] > 50_000
    try:
        resume_collector(freeze=True)
        assert gc.isenabled()
        assert gc.get_count()[0] < 1_000
        assert gc.get_freeze_count() >= len(loaded)
    finally:
        gc.unfreeze()


def test_the_modules_the_thread_imports_have_no_import_cycle() -> None:
    """The thread imports while the main thread imports too. Two threads can only catch each other in a
    half-initialised module when the modules they both load import each other in a cycle; there must be
    none among the modules the thread loads (its own module is loaded before it starts)."""
    import grimp

    graph = grimp.build_graph("koord_scheduler", "apis", "kubeapi")
    thread_imports = [
        "kubeapi.connection",
        "kubeapi.http",
        "kubeapi.ratelimit",
        "kubeapi.reflector",
        "koord_scheduler.scheduler.kube_source",
    ]
    loaded: set[str] = set()
    todo = list(thread_imports)
    while todo:
        module = todo.pop()
        if module in loaded or module == "kubeapi.prefetch":
            continue
        loaded.add(module)
        todo.extend(graph.find_modules_directly_imported_by(module))
    cycles = [
        (a, b)
        for a in loaded
        for b in graph.find_modules_directly_imported_by(a)
        if b in loaded and graph.chain_exists(importer=b, imported=a)
    ]
    assert len(loaded) > 10  # the walk found the kube package and what it uses
    assert cycles == []
