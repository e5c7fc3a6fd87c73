"""SchedulingHint: the scheduling-hint annotation (Koordinator's JSON shape) narrows a pod's nodes and
names nodes tried first; parsing and the preferred-node choice as tables, then end to end."""

from __future__ import annotations

import json

import pytest

from apis.config import ConfigError, parse_scheduler_config
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.framework.types import PreFilterResult
from koord_scheduler.plugins.schedulinghint.plugin import (
    ANNOTATION_SCHEDULING_HINT,
    DEPRECATED_ANNOTATION_SCHEDULING_HINT,
    SchedulingHint,
    parse_hint,
    preferred_nodes,
)
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod

NEW, OLD = ANNOTATION_SCHEDULING_HINT, DEPRECATED_ANNOTATION_SCHEDULING_HINT


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({NEW: ""}, None, id="empty-ignored"),
        pytest.param(
            {NEW: '{"nodeNames": ["a", "b"], "preferredNodeNames": ["b"]}'},
            SchedulingHint(("a", "b"), ("b",)),
            id="new-annotation",
        ),
        pytest.param({OLD: '{"preferredNodeNames": ["x"]}'}, SchedulingHint((), ("x",)), id="deprecated-annotation"),
        pytest.param(
            {NEW: '{"nodeNames": ["new"]}', OLD: '{"nodeNames": ["old"]}'}, SchedulingHint(("new",)), id="new-wins"
        ),
        pytest.param({NEW: "", OLD: '{"nodeNames": ["old"]}'}, SchedulingHint(("old",)), id="empty-new-falls-back"),
        pytest.param(
            {NEW: '{"extensions": {"Reservation": {"skipRestoreNodeInfo": true}}}'},
            SchedulingHint(extensions={"Reservation": {"skipRestoreNodeInfo": True}}),
            id="extensions-kept",
        ),
    ],
)
def test_parse_hint(annotations: dict[str, str], want: SchedulingHint | None) -> None:
    assert parse_hint(annotations) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("{", "invalid JSON", id="not-json"),
        pytest.param("[]", "must be a JSON object", id="not-object"),
        pytest.param('{"nodeNames": "a"}', "nodeNames must be a list of node names", id="names-not-list"),
        pytest.param('{"preferredNodeNames": [1]}', "preferredNodeNames must be a list", id="names-not-strings"),
    ],
)
def test_parse_hint_errors_name_the_annotation(text: str, want: str) -> None:
    with pytest.raises(ValueError, match=want) as caught:
        parse_hint({NEW: text})
    assert NEW in str(caught.value)


@pytest.mark.parametrize(
    ("preferred", "result", "limit", "want"),
    [
        pytest.param(("a", "b", "c"), None, 100, ["a", "b", "c"], id="all-nodes"),
        pytest.param(("a", "b", "c"), None, 2, ["a", "b"], id="truncated-to-max"),
        pytest.param(("a", "b", "c"), PreFilterResult(frozenset({"c", "a"})), 100, ["a", "c"], id="in-prefilter"),
        pytest.param(("a", "b"), PreFilterResult(frozenset({"z"})), 100, [], id="none-in-prefilter"),
        pytest.param(("a", "b", "c"), PreFilterResult(frozenset({"c"})), 2, [], id="truncate-before-intersect"),
        pytest.param(("a",), PreFilterResult(None), 100, ["a"], id="result-all-nodes"),
    ],
)
def test_preferred_nodes(
    preferred: tuple[str, ...], result: PreFilterResult | None, limit: int, want: list[str]
) -> None:
    assert preferred_nodes(SchedulingHint(preferred_node_names=preferred), result, limit) == want


def profile(args: str = "") -> str:
    plugin_config = f"\n  pluginConfig:\n  - name: SchedulingHint\n    args: {{{args}}}" if args else ""
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {{enabled: [{{name: SchedulingHint}}]}}{plugin_config}
"""


async def schedule(pods: list[object], *, busy: str = "", config: str = "", small: str = "") -> MemoryCluster:
    nodes = [make_node(n).capacity(cpu="4", memory="8Gi", pods=110).build() for n in ("n1", "n2", "n3")]
    existing = [make_pod("filler").req(cpu="4").node(busy).build()] if busy else []
    if small:
        existing.append(make_pod("small").req(cpu="1", memory="1Gi").node(small).build())
    cluster = MemoryCluster.from_objects(nodes, [*existing, *pods])  # type: ignore[list-item]
    parsed = parse_scheduler_config(config or profile(), source="test")
    scheduler = build_scheduler(parsed, build_registry(use_entry_points=False), cluster, clock=lambda: 1.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return cluster


def hinted(name: str, hint: dict[str, object], *, cpu: str = "1") -> object:
    return make_pod(name).req(cpu=cpu).annotation(NEW, json.dumps(hint)).build()


async def test_preferred_node_is_taken_first() -> None:
    cluster = await schedule([hinted(f"p{i}", {"preferredNodeNames": ["n3"]}) for i in range(3)])
    # LeastAllocated would spread the pods; the hint sends each to n3 while it fits.
    assert {cluster.pods[f"default/p{i}"].node_name for i in range(3)} == {"n3"}


async def test_preferred_nodes_in_order_skipping_those_that_do_not_fit() -> None:
    cluster = await schedule([hinted("p", {"preferredNodeNames": ["n2", "n1"]})], busy="n2")
    assert cluster.pods["default/p"].node_name == "n1"


async def test_no_preferred_node_fits_falls_back_to_every_node() -> None:
    cluster = await schedule([hinted("p", {"preferredNodeNames": ["n2"]})], busy="n2")
    assert cluster.pods["default/p"].node_name in {"n1", "n3"}


async def test_node_names_restrict_the_pod() -> None:
    cluster = await schedule([hinted(f"p{i}", {"nodeNames": ["n2"]}) for i in range(2)])
    assert {cluster.pods[f"default/p{i}"].node_name for i in range(2)} == {"n2"}


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param("", "n3", id="default-tries-n3-after-n2"),
        pytest.param("maxHintNodes: 1", "n1", id="n3-cut-off-so-scores-pick-the-emptier-n1"),
    ],
)
async def test_max_hint_nodes_drops_trailing_preferred_nodes(args: str, want: str) -> None:
    cluster = await schedule(
        [hinted("p", {"preferredNodeNames": ["n2", "n3"]})],
        busy="n2",
        small="n3",
        config=profile(args) if args else "",
    )
    assert cluster.pods["default/p"].node_name == want


async def test_malformed_hint_leaves_the_pod_pending() -> None:
    pod = make_pod("p").req(cpu="1").annotation(NEW, "{not json").build()
    cluster = await schedule([pod])
    assert cluster.pods["default/p"].node_name == ""


def test_max_hint_nodes_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"maxHintNodes: Invalid value: 0: must be a positive value"):
        parsed = parse_scheduler_config(profile("maxHintNodes: 0"), source="test")
        build_scheduler(
            parsed, build_registry(use_entry_points=False), MemoryCluster.from_objects([], []), clock=lambda: 1.0
        )
