"""InterPodAffinity's namespace lister: the Namespace store fed by watch events, the plugin subscribing to
it through the handle, and per-term counts dropped when namespace labels change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apis.core.errors import ParseError
from koord_scheduler.framework.types import EventType, ObjectHandler, ObjectKind
from koord_scheduler.plugins.interpodaffinity import plugin as ipa
from koord_scheduler.plugins.interpodaffinity.namespaces import (
    NAMESPACE_KIND,
    NamespaceLabelsEntry,
    NamespaceStore,
    parse_namespace,
)
from tests.builders import make_node, make_pod
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot

TEAM_A = {"namespaceSelector": {"matchLabels": {"team": "a"}}}


def ns(name: str, **labels: str) -> NamespaceLabelsEntry:
    return parse_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


class Handle(FakeHandle):
    """A FakeHandle that records ``watch`` subscriptions, as the scheduler's handle takes them."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.watches: list[tuple[ObjectKind, ObjectHandler]] = []

    def watch(self, kind: ObjectKind, handler: ObjectHandler) -> None:
        self.watches.append((kind, handler))


def test_parse_keeps_name_and_labels() -> None:
    assert ns("blue", team="a") == NamespaceLabelsEntry("blue", {"team": "a"})


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"metadata": {"labels": {"team": "a"}}}, id="no-name"),
        pytest.param({"metadata": {"name": "x", "labels": {"team": 1}}}, id="label-not-a-string"),
        pytest.param({"metadata": "x"}, id="metadata-not-an-object"),
    ],
)
def test_parse_rejects_malformed_namespaces_naming_the_field(raw: dict[str, Any]) -> None:
    with pytest.raises((ParseError, ValueError)) as err:
        parse_namespace(raw)
    assert "Namespace" in str(err.value) and "metadata" in str(err.value)


@pytest.mark.parametrize(
    ("events", "want_blue", "versions"),
    [
        pytest.param([(EventType.ADDED, None, ns("blue", team="a"))], {"team": "a"}, 1, id="added"),
        pytest.param(
            [
                (EventType.ADDED, None, ns("blue", team="a")),
                (EventType.MODIFIED, ns("blue", team="a"), ns("blue", team="b")),
            ],
            {"team": "b"},
            2,
            id="relabelled",
        ),
        pytest.param(
            [
                (EventType.ADDED, None, ns("blue", team="a")),
                (EventType.MODIFIED, ns("blue", team="a"), ns("blue", team="a")),
            ],
            {"team": "a"},
            1,
            id="same-labels-no-new-version",
        ),
        pytest.param(
            [(EventType.ADDED, None, ns("blue", team="a")), (EventType.DELETED, ns("blue", team="a"), None)],
            None,
            2,
            id="deleted-unknown-again",
        ),
        pytest.param([(EventType.ADDED, None, "not a namespace")], None, 0, id="foreign-object-ignored"),
    ],
)
def test_store_follows_watch_events(events: list[tuple[EventType, Any, Any]], want_blue: Any, versions: int) -> None:
    store = NamespaceStore()
    for event in events:
        store.on_event(*event)
    assert store("blue") == want_blue
    assert store("unknown") is None
    assert store.version == versions


def required_affinity_pod() -> Any:
    from tests.unit.scheduler.plugins.interpodaffinity.test_inter_pod_affinity import edit_terms

    return edit_terms(make_pod("p").pod_affinity("region", {"foo": "bar"}), **TEAM_A)


def test_plugin_watches_namespaces_and_a_label_change_is_seen_by_the_next_cycle() -> None:
    nodes = [make_node("n1").labels({"region": "r1"}).build(), make_node("n2").labels({"region": "r2"}).build()]
    snap = make_snapshot(nodes, [make_pod("e", "blue").labels({"foo": "bar"}).node("n1").build()])
    handle = Handle(snap)
    plugin = ipa.new(None, handle)
    assert [kind for kind, _ in handle.watches] == [NAMESPACE_KIND]
    deliver: Callable[..., None] = handle.watches[0][1]
    pod = required_affinity_pod()

    def feasible() -> list[str]:
        return sorted(n for n, s in filter_statuses(plugin, pod, snap).items() if s.is_success)

    assert feasible() == [], "unknown namespace: the selector selects no pod"
    deliver(EventType.ADDED, None, ns("blue", team="a"))
    assert feasible() == ["n1"], "blue now selected: its pod on n1 satisfies the affinity"
    deliver(EventType.MODIFIED, ns("blue", team="a"), ns("blue", team="b"))
    assert feasible() == [], "relabelled away: cached counts must not be reused"
