"""The default constraints' selector from watched Services and controllers (kube-scheduler's
``helper.DefaultSelector``): a table over the store, parse errors, and the plugin subscribing through the
handle so a Service-selected bare pod is spread."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core.types import Operator, SelectorRequirement
from koord_scheduler.framework.types import EventType, ObjectHandler, ObjectKind
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from koord_scheduler.plugins.podtopologyspread.workloads import (
    REPLICA_SET_KIND,
    REPLICATION_CONTROLLER_KIND,
    SERVICE_KIND,
    STATEFUL_SET_KIND,
    WORKLOAD_KINDS,
    WorkloadSelector,
    WorkloadStore,
)
from tests.builders import PodBuilder, make_node, make_pod
from tests.fwtest import FakeHandle, make_snapshot, scores


def service(name: str, selector: Any, namespace: str = "default") -> WorkloadSelector:
    spec = {} if selector is None else {"selector": selector}
    parsed: WorkloadSelector = SERVICE_KIND.parse({"metadata": {"name": name, "namespace": namespace}, "spec": spec})
    return parsed


def controller(kind: ObjectKind, name: str, selector: Any) -> WorkloadSelector:
    parsed: WorkloadSelector = kind.parse(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}
    )
    return parsed


def req(key: str, *values: str, op: Operator = Operator.IN) -> SelectorRequirement:
    return SelectorRequirement(key, op, values)


WEB = make_pod("p").label("app", "web")
RS_OWNED = make_pod("p").labels({"app": "web", "pod-template-hash": "h"}).owner("ReplicaSet", "web-rs")


@pytest.mark.parametrize(
    ("objects", "builder", "want_labels", "want_expressions"),
    [
        pytest.param([service("s", {"app": "web"})], WEB, {"app": "web"}, (), id="service-selecting-the-pod"),
        pytest.param([service("s", {"app": "db"})], WEB, None, None, id="service-not-selecting"),
        pytest.param(
            [service("s", {"app": "web"}, namespace="other")], WEB, None, None, id="service-in-another-namespace"
        ),
        pytest.param([service("s", None)], WEB, None, None, id="service-without-selector-selects-nothing"),
        pytest.param([service("s", {})], WEB, None, None, id="service-empty-selector-selects-nothing"),
        pytest.param(
            [service("s1", {"app": "web"}), service("s2", {"tier": "fe"})],
            make_pod("p").labels({"app": "web", "tier": "fe"}),
            {"app": "web", "tier": "fe"},
            (),
            id="services-merged",
        ),
        pytest.param(
            [
                controller(
                    REPLICA_SET_KIND,
                    "web-rs",
                    {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                )
            ],
            RS_OWNED,
            {},
            (req("app", "web"), req("tier", op=Operator.EXISTS)),
            id="replicaset-requirements",
        ),
        pytest.param([], RS_OWNED, None, None, id="replicaset-unknown-adds-nothing"),
        pytest.param(
            [controller(REPLICA_SET_KIND, "other-rs", {"matchLabels": {"app": "web"}})],
            RS_OWNED,
            None,
            None,
            id="replicaset-other-name",
        ),
        pytest.param(
            [service("s", {"app": "web"}), controller(REPLICA_SET_KIND, "web-rs", {"matchLabels": {"app": "web"}})],
            RS_OWNED,
            {"app": "web"},
            (req("app", "web"),),
            id="service-and-replicaset",
        ),
        pytest.param(
            [controller(STATEFUL_SET_KIND, "db", {"matchLabels": {"app": "db"}})],
            make_pod("p").label("app", "db").owner("StatefulSet", "db"),
            {},
            (req("app", "db"),),
            id="statefulset",
        ),
        pytest.param(
            [controller(REPLICATION_CONTROLLER_KIND, "rc", {"app": "old"})],
            make_pod("p").label("app", "old").owner("ReplicationController", "rc", api_version="v1"),
            {"app": "old"},
            (),
            id="replicationcontroller-map",
        ),
        pytest.param(
            [controller(REPLICA_SET_KIND, "web-rs", {"matchLabels": {"app": "web"}})],
            make_pod("p").label("app", "web").owner("ReplicaSet", "web-rs", controller=False),
            None,
            None,
            id="owner-not-controller",
        ),
        pytest.param(
            [controller(REPLICA_SET_KIND, "j", {"matchLabels": {"app": "web"}})],
            make_pod("p").label("app", "web").owner("Job", "j", api_version="batch/v1"),
            None,
            None,
            id="job-owner-not-a-listed-kind",
        ),
    ],
)
def test_default_selector(
    objects: list[WorkloadSelector], builder: PodBuilder, want_labels: Any, want_expressions: Any
) -> None:
    store = WorkloadStore()
    for obj in objects:
        store.on_event(EventType.ADDED, None, obj)
    got = store.default_selector(builder.build())
    if want_labels is None:
        assert got is None
    else:
        assert got is not None
        assert (dict(got.match_labels), got.match_expressions) == (want_labels, want_expressions)


def test_store_forgets_deleted_and_unselected_services() -> None:
    store = WorkloadStore()
    pod = WEB.build()
    store.on_event(EventType.ADDED, None, service("s", {"app": "web"}))
    assert store.default_selector(pod) is not None
    store.on_event(EventType.MODIFIED, service("s", {"app": "web"}), service("s", None))
    assert store.default_selector(pod) is None, "a Service whose selector was removed selects nothing"
    store.on_event(EventType.ADDED, None, service("s", {"app": "web"}))
    store.on_event(EventType.DELETED, service("s", {"app": "web"}), None)
    assert store.default_selector(pod) is None


@pytest.mark.parametrize(
    ("kind", "spec", "field"),
    [
        pytest.param(SERVICE_KIND, {"selector": {"app": 1}}, "spec.selector", id="service-selector-value"),
        pytest.param(SERVICE_KIND, {"selector": ["app"]}, "spec.selector", id="service-selector-not-a-map"),
        pytest.param(
            REPLICA_SET_KIND,
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            "spec.selector",
            id="replicaset-bad-operator",
        ),
        pytest.param(STATEFUL_SET_KIND, "x", "spec", id="spec-not-an-object"),
    ],
)
def test_malformed_objects_are_refused_naming_the_field(kind: ObjectKind, spec: Any, field: str) -> None:
    with pytest.raises(ValueError) as err:
        kind.parse({"metadata": {"name": "bad", "namespace": "default"}, "spec": spec})
    assert field in str(err.value) and kind.kind in str(err.value)


class Handle(FakeHandle):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.watches: dict[str, ObjectHandler] = {}

    def watch(self, kind: ObjectKind, handler: ObjectHandler) -> None:
        self.watches[kind.kind] = handler


def test_plugin_spreads_a_bare_pod_its_service_selects() -> None:
    """System defaulting: zone spread (maxSkew 5) and hostname spread (maxSkew 3) for pods a Service
    selects. Two web pods on a1: a1 scores lowest once the Service is known; before, the pod had no
    constraints (PreScore skipped)."""
    zone = "topology.kubernetes.io/zone"
    nodes = [
        make_node(n).labels({zone: z, "kubernetes.io/hostname": n}).build()
        for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"))
    ]
    running = [make_pod(f"w{i}").label("app", "web").node("a1").build() for i in range(2)]
    snap = make_snapshot(nodes, running)
    handle = Handle(snap)
    plugin = pts.new(None, handle)
    assert set(handle.watches) == {k.kind for k in WORKLOAD_KINDS}
    pod = WEB.build()
    assert scores(plugin, pod, snap) == {}
    handle.watches["Service"](EventType.ADDED, None, service("web", {"app": "web"}))
    got = scores(plugin, pod, snap)
    assert got["b1"] == 100 and got["a1"] < got["a2"] < got["b1"], got
