"""KubeClusterSource and its Reflectors against an in-process fake API server over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fakeapi import FakeApi

from apis.config import KubeSchedulerConfiguration
from apis.core.types import Node, Pod
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import ObjectKind
from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from koord_scheduler.scheduler.object_errors import ObjectErrors
from koord_scheduler.scheduler.source import EventType
from kubeapi import ReflectorOptions
from kubeapi.events import EventOptions
from tests.builders import make_node, make_pod

FAST = ReflectorOptions(initial_backoff=0.01, max_backoff=0.05, min_watch_timeout=60)


@dataclass
class RecordingSink:
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(kind, event type, key) in delivery order."""
    pods: dict[str, Pod] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    objects: dict[str, Any] = field(default_factory=dict)
    object_errors: ObjectErrors = field(default_factory=ObjectErrors)

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        node = new or old
        assert node is not None
        self.events.append(("Node", event.value, node.name))
        if new is None:
            self.nodes.pop(node.name, None)
        else:
            self.nodes[node.name] = new

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        pod = new or old
        assert pod is not None
        self.events.append(("Pod", event.value, pod.key))
        if new is None:
            self.pods.pop(pod.key, None)
        else:
            self.pods[pod.key] = new

    def on_invalid_object(
        self, kind: str, key: str, reason: str, message: str, exc: BaseException | None = None
    ) -> bool:
        return self.object_errors.report(kind, key, reason, message, exc=exc)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        name = (new or old)["metadata"]["name"]
        self.events.append((kind, event.value, name))
        if new is None:
            self.objects.pop(name, None)
        else:
            self.objects[name] = new


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def source(api: FakeApi) -> AsyncIterator[KubeClusterSource]:
    src = KubeClusterSource(
        api.connection,
        options=KubeSourceOptions(qps=0, burst=1, reflector=FAST, events=EventOptions(hostname="test-host")),
        clock=lambda: 1_700_000_000.0,
    )
    yield src
    await src.stop()


async def eventually(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


# ----- initial list and watch -----


async def test_start_delivers_nodes_then_bound_then_pending_pods(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("pending").obj())
    api.put("pods", make_pod("bound").node("n1").obj())
    api.put("nodes", make_node("n1").capacity(cpu="4").obj())
    sink = RecordingSink()

    await source.start(sink)

    want = [("Node", "ADDED", "n1"), ("Pod", "ADDED", "default/bound"), ("Pod", "ADDED", "default/pending")]
    assert sink.events == want
    assert source.synced


async def test_list_is_paginated(api: FakeApi) -> None:
    for i in range(7):
        api.put("nodes", make_node(f"n{i}").obj())
    src = KubeClusterSource(
        api.connection, options=KubeSourceOptions(qps=0, reflector=ReflectorOptions(page_size=3, min_watch_timeout=60))
    )
    sink = RecordingSink()
    try:
        await src.start(sink)
    finally:
        await src.stop()
    assert sorted(sink.nodes) == [f"n{i}" for i in range(7)]
    node_lists = [r for r in api.requests if r.path == "/api/v1/nodes" and "watch" not in r.query]
    assert [r.query.get("continue") for r in node_lists] == [None, "3", "6"]


async def test_watch_delivers_changes_with_old_objects(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("nodes", make_node("n1").capacity(cpu="4").obj())
    sink = RecordingSink()
    await source.start(sink)

    api.put("nodes", make_node("n1").capacity(cpu="8").obj())
    api.put("pods", make_pod("p").obj())
    api.delete("nodes", "n1")
    await eventually(lambda: len(sink.events) == 4)

    # Each kind has its own watch: order holds within a kind, not across kinds.
    assert [e for e in sink.events[1:] if e[0] == "Node"] == [("Node", "MODIFIED", "n1"), ("Node", "DELETED", "n1")]
    assert [e for e in sink.events[1:] if e[0] == "Pod"] == [("Pod", "ADDED", "default/p")]


async def test_terminal_pods_are_filtered_by_the_server(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("done").phase("Succeeded").obj())
    api.put("pods", make_pod("live").obj())
    sink = RecordingSink()
    await source.start(sink)
    assert list(sink.pods) == ["default/live"]
    pod_list = next(r for r in api.requests if r.path == "/api/v1/pods")
    assert pod_list.query["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"


async def test_watch_asks_for_bookmarks_and_resumes_from_the_last_one(api: FakeApi, source: KubeClusterSource) -> None:
    sink = RecordingSink()
    await source.start(sink)
    await eventually(lambda: api.watcher_count("nodes") == 1)
    api.bookmark("nodes")
    bookmark_rv = str(api.rv)
    await eventually(lambda: source.reflectors["Node"].resource_version == bookmark_rv)

    await api.drop_watches("nodes")
    await eventually(lambda: api.watcher_count("nodes") == 1)

    watches = [r.query for r in api.requests if r.path == "/api/v1/nodes" and r.query.get("watch")]
    assert watches[0]["allowWatchBookmarks"] == "true"
    assert watches[-1]["resourceVersion"] == bookmark_rv
    assert source.reflectors["Node"].relists == 1  # resumed, not listed again


async def test_gone_relists_and_diffs_against_the_store(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("nodes", make_node("keep").obj())
    api.put("nodes", make_node("change").capacity(cpu="1").obj())
    api.put("nodes", make_node("remove").obj())
    sink = RecordingSink()
    await source.start(sink)
    await eventually(lambda: api.watcher_count("nodes") == 1)

    # Things change unseen and the history is compacted away; then the watch breaks.
    api.put("nodes", make_node("change").capacity(cpu="2").obj(), silent=True)
    api.objects["nodes"].pop("remove")
    api.put("nodes", make_node("new").obj(), silent=True)
    api.expire_history()
    await api.drop_watches("nodes")

    await eventually(lambda: source.reflectors["Node"].relists == 2)
    await eventually(lambda: api.watcher_count("nodes") == 1)
    after = sink.events[3:]
    assert sorted(after) == sorted(
        [("Node", "DELETED", "remove"), ("Node", "MODIFIED", "change"), ("Node", "ADDED", "new")]
    )
    assert sink.nodes["change"].allocatable["cpu"] == 2000


async def test_reconnects_with_capped_exponential_backoff_after_server_errors(
    api: FakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Four failed watches in a row wait about 0.1, 0.2, 0.4 (the cap) and 0.4 s, each jittered into [d/2, d]."""
    options = KubeSourceOptions(
        qps=0,
        burst=1,
        events=EventOptions(hostname="test-host"),
        reflector=ReflectorOptions(initial_backoff=0.1, max_backoff=0.4, min_watch_timeout=60),
    )
    source = KubeClusterSource(api.connection, options=options, clock=lambda: 1_700_000_000.0)
    sink = RecordingSink()
    try:
        await source.start(sink)
        await eventually(lambda: api.watcher_count("pods") == 1)
        api.failures["/api/v1/pods"] = [503, 503, 503, 503]
        with caplog.at_level(logging.DEBUG, logger="kubeapi.reflector"):
            await api.drop_watches("pods")
            await eventually(lambda: api.watcher_count("pods") == 1 and not api.failures["/api/v1/pods"])
        api.put("pods", make_pod("after").obj())
        await eventually(lambda: "default/after" in sink.pods)
    finally:
        await source.stop()

    want_caps = [0.1, 0.2, 0.4, 0.4]
    logged = [
        float(m)
        for r in caplog.records
        for m in re.findall(r"watch pods failed.*retrying in ([0-9.]+)s", r.getMessage())
    ]
    assert len(logged) == len(want_caps)
    for delay, cap in zip(logged, want_caps, strict=True):
        assert cap / 2 - 0.05 <= delay <= cap + 0.05  # the log rounds to 0.1 s
    watches = [r for r in api.requests if r.path == "/api/v1/pods" and r.query.get("watch")]
    retries = watches[-len(want_caps) - 1 :]  # four refused watches, then the one that succeeded
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(retries)]
    assert all(gap >= cap / 2 for gap, cap in zip(gaps, want_caps, strict=True)), gaps


async def test_initial_list_retries_until_the_server_answers(api: FakeApi, source: KubeClusterSource) -> None:
    api.fail_next["/api/v1/nodes"] = 500
    api.put("nodes", make_node("n1").obj())
    sink = RecordingSink()
    await source.start(sink)
    assert list(sink.nodes) == ["n1"]


async def test_malformed_objects_are_logged_once_and_skipped(
    api: FakeApi, source: KubeClusterSource, caplog: pytest.LogCaptureFixture
) -> None:
    bad = make_node("bad").obj()
    bad["status"]["allocatable"] = {"cpu": "lots"}
    api.put("nodes", bad)
    api.put("nodes", make_node("good").obj())
    sink = RecordingSink()
    with caplog.at_level(logging.WARNING):
        await source.start(sink)
        await eventually(lambda: api.watcher_count("nodes") == 1)
        api.put("nodes", make_node("other").obj(), silent=True)
        api.expire_history()
        await api.drop_watches("nodes")  # the relist sees it again but must not log it again
        await eventually(lambda: source.reflectors["Node"].relists == 2)

    assert sorted(sink.nodes) == ["good", "other"]
    logged = [r.getMessage() for r in caplog.records if "bad" in r.getMessage()]
    assert len(logged) == 1
    assert "Node bad ignored (Invalid): Node bad: status.allocatable.cpu" in logged[0]
    assert sink.object_errors.count("Node", "Invalid") == 1
    await source.events.flush()
    posted = [r.body for r in api.requests if r.method == "POST" and "/events" in r.path]
    assert [(e["regarding"]["kind"], e["regarding"]["name"], e["reason"], e["type"]) for e in posted] == [
        ("Node", "bad", "InvalidObject", "Warning")
    ]
    assert "status.allocatable.cpu" in posted[0]["note"]


async def test_a_version_that_fails_to_parse_takes_the_object_out(api: FakeApi, source: KubeClusterSource) -> None:
    # A stale copy (the old allocatable) must not stay in use: the node is treated as absent until fixed.
    api.put("nodes", make_node("n").capacity(cpu="4").obj())
    sink = RecordingSink()
    await source.start(sink)
    bad = make_node("n").obj()
    bad["status"]["allocatable"] = {"cpu": "99999999999999999999999"}
    api.put("nodes", bad)
    api.put("pods", make_pod("marker").obj())
    await eventually(lambda: "default/marker" in sink.pods)
    assert "n" not in sink.nodes
    assert ("Node", "DELETED", "n") in sink.events
    api.put("nodes", make_node("n").capacity(cpu="8").obj())
    await eventually(lambda: "n" in sink.nodes)
    assert sink.nodes["n"].allocatable["cpu"] == 8000


async def test_each_bad_version_is_reported_once(api: FakeApi, source: KubeClusterSource) -> None:
    sink = RecordingSink()
    await source.start(sink)
    bad = make_node("n").obj()
    bad["status"]["allocatable"] = {"cpu": "-1"}
    api.put("nodes", bad)
    api.put("nodes", bad)  # a new resourceVersion, the same problem: reported again
    api.put("nodes", make_node("n").obj())  # fixed
    api.put("nodes", bad)  # broken again
    api.put("pods", make_pod("marker").obj())
    await eventually(lambda: "default/marker" in sink.pods)
    assert sink.object_errors.count("Node", "Invalid") == 3
    assert "n" not in sink.nodes


async def test_a_failing_handler_does_not_stop_the_watch(api: FakeApi, source: KubeClusterSource) -> None:
    class Exploding(RecordingSink):
        def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
            raise RuntimeError("boom")

    sink = Exploding()
    await source.start(sink)
    api.put("nodes", make_node("n").obj())
    api.put("pods", make_pod("p").obj())
    await eventually(lambda: "default/p" in sink.pods)
    assert sink.object_errors.count("Node", "HandlerError") == 1
    assert "n" not in source.reflectors["Node"].store  # treated as absent


def test_built_in_kinds_are_read_as_protobuf_and_custom_ones_as_json(source: KubeClusterSource) -> None:
    source.watch_kind("storage.k8s.io", "v1", "storageclasses", dict, "StorageClass")
    source.watch_kind("", "v1", "configmaps", dict, "TemplatesConfigMap")  # any name for a built-in collection
    source.watch_kind("x.io", "v1", "widgets", dict, "Widget")
    source.watch_kind("resource.k8s.io", "v1", "resourceclaimtemplates", dict, "ResourceClaimTemplate")

    assert {kind.kind: kind.protobuf for kind, _ in source._kinds if kind.kind != "Node"} == {
        "StorageClass": True,
        "TemplatesConfigMap": True,
        "Widget": False,
        "ResourceClaimTemplate": False,
    }


async def test_extra_kinds_reach_on_object(api: FakeApi, source: KubeClusterSource) -> None:
    def parse(obj: Any) -> Any:
        if not obj.get("spec"):
            raise ValueError("spec is required")
        return obj

    kind = ObjectKind("Widget", "x.io", "v1", "widgets", namespaced=False, parse=parse)
    api.put("widgets", {"metadata": {"name": "w1"}, "spec": {"size": 1}})
    api.put("widgets", {"metadata": {"name": "broken"}})
    sink = RecordingSink()
    await source.start(sink, [kind])
    api.put("widgets", {"metadata": {"name": "w2"}, "spec": {"size": 2}})
    await eventually(lambda: "w2" in sink.objects)
    assert sorted(sink.objects) == ["w1", "w2"]


async def test_an_extra_kind_is_watched_in_its_namespace_with_its_field_selector(
    api: FakeApi, source: KubeClusterSource
) -> None:
    """A plugin's subscription to one object (DeviceShare's templates ConfigMap) lists one namespace, by name."""
    api.put("widgets", {"metadata": {"name": "w1", "namespace": "ns1"}, "spec": {"size": 1}})
    kind = ObjectKind(
        "Widget", "x.io", "v1", "widgets", True, lambda obj: obj, namespace="ns1", field_selector="metadata.name=w1"
    )
    sink = RecordingSink()
    await asyncio.wait_for(source.start(sink, [kind]), 5)
    assert "w1" in sink.objects
    widget_lists = [r for r in api.requests if r.path.endswith("/widgets")]
    assert widget_lists[0].path == "/apis/x.io/v1/namespaces/ns1/widgets"
    assert widget_lists[0].query["fieldSelector"] == "metadata.name=w1"


# ----- binding and reporting -----


async def test_bind_posts_a_raw_binding_with_the_uid_precondition(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("p").uid("u-1").obj())
    sink = RecordingSink()
    await source.start(sink)

    await source.client.bind(sink.pods["default/p"], "n1")

    binding = next(r for r in api.requests if r.path.endswith("/binding"))
    assert binding.path == "/api/v1/namespaces/default/pods/p/binding"
    assert binding.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    await eventually(lambda: sink.pods["default/p"].node_name == "n1")


async def test_binding_twice_is_a_cluster_error(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("p").obj())
    sink = RecordingSink()
    await source.start(sink)
    pod = sink.pods["default/p"]
    await source.client.bind(pod, "n1")
    with pytest.raises(ClusterError, match="409 Conflict"):
        await source.client.bind(pod, "n2")


async def test_report_unschedulable_patches_the_condition_once_and_records_an_event(
    api: FakeApi, source: KubeClusterSource
) -> None:
    api.put("pods", make_pod("p").uid("u-1").obj())
    sink = RecordingSink()
    await source.start(sink)
    pod = sink.pods["default/p"]
    message = "0/3 nodes are available: 3 Insufficient cpu."

    await source.report_unschedulable(pod, reason="Unschedulable", message=message)
    await source.report_unschedulable(pod, reason="Unschedulable", message=message)
    await source.events.flush()

    patches = [r for r in api.requests if r.path.endswith("/status")]
    assert len(patches) == 1
    assert patches[0].body == {
        "metadata": {"uid": "u-1"},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": "2023-11-14T22:13:20Z",
                }
            ]
        },
    }
    events = [r for r in api.requests if "/events" in r.path]
    assert [r.method for r in events] == ["POST", "PATCH"]  # a series, not two Events
    created = events[0].body
    assert created["reason"] == "FailedScheduling"
    assert created["type"] == "Warning"
    assert created["action"] == "Scheduling"
    assert created["note"] == message
    assert created["reportingController"] == "default-scheduler"
    assert created["reportingInstance"] == "default-scheduler-test-host"
    assert created["regarding"]["uid"] == "u-1"
    assert events[1].body == {"series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:20.000000Z"}}


async def test_a_changed_message_is_patched_again(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("p").obj())
    sink = RecordingSink()
    await source.start(sink)
    pod = sink.pods["default/p"]
    await source.report_unschedulable(pod, reason="Unschedulable", message="a")
    await source.report_unschedulable(pod, reason="Unschedulable", message="b")
    patches = [r for r in api.requests if r.path.endswith("/status")]
    assert [p.body["status"]["conditions"][0]["message"] for p in patches] == ["a", "b"]
    assert "lastTransitionTime" not in patches[1].body["status"]["conditions"][0]


async def test_a_condition_someone_else_wrote_is_written_back(api: FakeApi, source: KubeClusterSource) -> None:
    """A plugin (Coscheduling's pending-member condition) wrote another message since ours: the same report
    as before is patched again rather than taken as already shown."""
    obj = make_pod("p").obj()
    api.put("pods", obj)
    sink = RecordingSink()
    await source.start(sink)
    pod = sink.pods["default/p"]
    await source.report_unschedulable(pod, reason="Unschedulable", message="a")
    other = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "b"}
    api.put("pods", {**obj, "status": {**obj.get("status", {}), "conditions": [other]}})
    await eventually(lambda: sink.pods["default/p"].conditions.get("PodScheduled") == "False")
    await source.report_unschedulable(pod, reason="Unschedulable", message="a")
    patches = [r for r in api.requests if r.path.endswith("/status")]
    assert [p.body["status"]["conditions"][0]["message"] for p in patches] == ["a", "a"]


async def test_no_report_for_a_pod_bound_meanwhile(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("p").node("n1").obj())
    sink = RecordingSink()
    await source.start(sink)
    await source.report_unschedulable(sink.pods["default/p"], reason="Unschedulable", message="x")
    await source.events.flush()
    assert not [r for r in api.requests if r.method != "GET"]


async def test_report_scheduled_records_a_normal_event(api: FakeApi, source: KubeClusterSource) -> None:
    api.put("pods", make_pod("p").obj())
    sink = RecordingSink()
    await source.start(sink)
    await source.report_scheduled(sink.pods["default/p"], "n1")
    await source.events.flush()
    event = next(r for r in api.requests if "/events" in r.path)
    assert event.path == "/apis/events.k8s.io/v1/namespaces/default/events"
    assert (event.body["type"], event.body["reason"], event.body["action"], event.body["note"]) == (
        "Normal",
        "Scheduled",
        "Binding",
        "Successfully assigned default/p to n1",
    )
    assert event.body["metadata"]["name"].startswith("p.")


# ----- event details -----


@pytest.mark.parametrize(
    ("message", "want"),
    [
        pytest.param("short", "short", id="untouched"),
        pytest.param("x" * 1024, "x" * 1024, id="exactly-the-limit"),
        pytest.param("x" * 1025, "x" * 1020 + " ...", id="cut-with-suffix"),
        pytest.param("é" * 600, "é" * 510 + " ...", id="multibyte-cut-on-a-character"),
    ],
)
def test_truncate_note_to_1024_bytes(message: str, want: str) -> None:
    from kubeapi.events import truncate_note

    got = truncate_note(message)
    assert got == want
    assert len(got.encode()) <= 1024


async def test_an_optional_kind_that_cannot_be_listed_does_not_hold_up_start(
    api: FakeApi, source: KubeClusterSource
) -> None:
    """The colocation controllers' kinds (NodeSLO without its CRD, say) must not stop scheduling."""
    api.put("nodes", make_node("n1").obj())
    api.put("widgets", {"metadata": {"name": "w1", "namespace": "ns1"}, "spec": {"size": 1}})
    source.watch_kind("missing.io", "v1", "gadgets", lambda obj: obj, "Gadget", optional=True)
    source.watch_kind(
        "x.io",
        "v1",
        "widgets",
        lambda obj: obj,
        "Widget",
        optional=True,
        namespace="ns1",
        field_selector="metadata.name=w1",
    )
    sink = RecordingSink()
    await asyncio.wait_for(source.start(sink), 5)
    assert "n1" in sink.nodes and "w1" in sink.objects
    assert source.listed("Widget") and source.listed("Node")
    assert not source.listed("Gadget")
    widget_lists = [r for r in api.requests if r.path.endswith("/widgets")]
    assert widget_lists[0].path == "/apis/x.io/v1/namespaces/ns1/widgets"
    assert widget_lists[0].query["fieldSelector"] == "metadata.name=w1"
    assert source.watches("Gadget") and not source.watches("Sprocket")


async def test_pod_groups_are_optional_for_the_scheduler_and_the_controller(
    api: FakeApi, source: KubeClusterSource
) -> None:
    """No PodGroup CRD on the server: scheduling starts anyway (annotation gangs need none)."""
    from apis.scheduling import podgroup as pg
    from koord_scheduler.app.controllers import ControllerClient, ControllerFlags, build_podgroup

    api.put("nodes", make_node("n1").obj())
    flags = ControllerFlags(frozenset(), scheduling=True, config_namespace="ns", config_name="cm")
    config = KubeSchedulerConfiguration()
    client = ControllerClient(5.0, 10)
    assert build_podgroup(flags, source, config, client=client, scheduler_kinds={pg.KIND: None}) is None
    assert source.watches(pg.KIND)
    kind = ObjectKind(pg.KIND, pg.GROUP, pg.VERSION, pg.PLURAL, True, pg.parse_pod_group)
    sink = RecordingSink()
    await asyncio.wait_for(source.start(sink, [kind]), 5)
    assert "n1" in sink.nodes
    assert not source.listed(pg.KIND)


async def test_deviceresource_controller_watches_devices_when_no_plugin_does(
    api: FakeApi, source: KubeClusterSource
) -> None:
    """Without DeviceShare in a profile, the controller registers the Device watch itself and is fed by it."""
    from apis.scheduling.device import DEVICE_KIND
    from koord_scheduler.app.controllers import ControllerClient, ControllerFlags, build_deviceresource
    from koord_scheduler.controllers.fanout import FanoutSink

    api.put("nodes", make_node("n1").obj())
    api.put(
        "devices",
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": "n1"},
            "spec": {
                "devices": [
                    {"type": "gpu", "minor": 0, "health": True, "resources": {"koordinator.sh/gpu-core": "100"}}
                ]
            },
        },
    )
    flags = ControllerFlags(frozenset({"deviceresource"}), scheduling=True, config_namespace="ns", config_name="cm")
    built = build_deviceresource(flags, source, client=ControllerClient(5.0, 10), scheduler_kinds={})
    assert built is not None and source.watches(DEVICE_KIND)
    sink = RecordingSink()
    await asyncio.wait_for(source.start(FanoutSink(None, built.controller, object_errors=sink.object_errors)), 5)
    assert built.controller.ready()
    assert set(built.controller.devices) == {"n1"} and set(built.controller.nodes) == {"n1"}
    await built.http.close()
    off = ControllerFlags(frozenset(), scheduling=True, config_namespace="ns", config_name="cm")
    assert build_deviceresource(off, source, client=ControllerClient(5.0, 10)) is None
