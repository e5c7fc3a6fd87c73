"""Extenders in the scheduling and binding cycles, on the in-memory cluster with a real HTTP extender."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import Node, Pod
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.extender_fake import Reply, node_names, serve_extender

NOW = 1_800_000_000.0


def node(name: str, **extra: str) -> Node:
    return make_node(name).capacity(cpu="4", memory="16Gi", pods=110, **extra).build()


def pod(name: str = "p", **req: str) -> Pod:
    return make_pod(name).uid(f"uid-{name}").req(cpu="1", **req).build()


async def schedule(
    extenders: list[dict[str, Any]], nodes: list[Node], pods: list[Pod]
) -> tuple[Scheduler, MemoryCluster]:
    config = parse_scheduler_config(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "extenders": extenders},
        source="test",
    )
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(config, in_tree_registry(), cluster, clock=lambda: NOW)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return scheduler, cluster


def only(*keep: str) -> Any:
    return lambda b: {
        "NodeNames": [n for n in node_names(b) if n in keep],
        "FailedNodes": {n: "extender says no" for n in node_names(b) if n not in keep},
    }


async def test_filter_extender_narrows_after_filter_plugins() -> None:
    with serve_extender({"filter": only("b")}) as f:
        ext = {"urlPrefix": f.url, "filterVerb": "filter", "nodeCacheCapable": True}
        _, cluster = await schedule(
            [ext], [node("a"), node("b"), make_node("tiny").capacity(cpu="100m").build()], [pod()]
        )
    assert cluster.pods["default/p"].node_name == "b"
    assert sorted(node_names(f.calls("filter")[0])) == ["a", "b"]  # tiny failed NodeResourcesFit first


async def test_extender_reasons_appear_in_the_fit_error() -> None:
    with serve_extender({"filter": only()}) as f:
        ext = {"urlPrefix": f.url, "filterVerb": "filter", "nodeCacheCapable": True}
        scheduler, _ = await schedule([ext], [node("a"), node("b")], [pod()])
    outcome = scheduler.outcomes["default/p"]
    assert outcome.node is None
    assert outcome.message.startswith("0/2 nodes are available: 2 extender says no.")


@pytest.mark.parametrize(
    ("ignorable", "want_node"),
    [pytest.param(True, "a", id="ignorable-skipped"), pytest.param(False, None, id="non-ignorable-fails-cycle")],
)
async def test_failing_filter_extender(
    ignorable: bool, want_node: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with serve_extender({"filter": Reply(b"oops", 500)}) as f:
        ext = {"urlPrefix": f.url, "filterVerb": "filter", "ignorable": ignorable}
        with caplog.at_level(logging.WARNING):
            scheduler, _ = await schedule([ext], [node("a")], [pod()])
    outcome = scheduler.outcomes["default/p"]
    assert outcome.node == want_node
    if want_node is None:
        assert outcome.message == f"failed filter with extender at URL {f.url}/filter, code 500"
    assert any(f.url in r.getMessage() and "filter failed" in r.getMessage() for r in caplog.records)


async def test_unknown_node_in_filter_reply_is_an_error() -> None:
    with serve_extender({"filter": lambda b: {"NodeNames": ["ghost"]}}) as f:
        ext = {"urlPrefix": f.url, "filterVerb": "filter", "nodeCacheCapable": True}
        scheduler, _ = await schedule([ext], [node("a")], [pod()])
    assert "claims a filtered node 'ghost' which is not found" in scheduler.outcomes["default/p"].message


async def test_prioritize_steers_the_choice_with_weight() -> None:
    with serve_extender({"prio": lambda b: [{"Host": n, "Score": 10 if n == "c" else 0} for n in node_names(b)]}) as f:
        ext = {"urlPrefix": f.url, "prioritizeVerb": "prio", "weight": 5, "nodeCacheCapable": True}
        _, cluster = await schedule([ext], [node("a"), node("b"), node("c")], [pod()])
    assert cluster.pods["default/p"].node_name == "c"


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(b"nope", 503), id="http-error"),
        pytest.param(Reply(b"[{"), id="malformed"),
        pytest.param(Reply(b"{}", delay=1.0), id="timeout"),
    ],
)
async def test_failing_prioritizer_gives_no_scores_and_the_pod_schedules(
    reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    with serve_extender({"prio": reply}) as f:
        ext = {"urlPrefix": f.url, "prioritizeVerb": "prio", "weight": 1, "httpTimeout": "300ms"}
        with caplog.at_level(logging.WARNING):
            scheduler, _ = await schedule([ext], [node("a"), node("b")], [pod()])
    assert scheduler.outcomes["default/p"].node in ("a", "b")
    assert sum(f.url in r.getMessage() for r in caplog.records) == 1  # reported once for the cycle


async def test_out_of_range_and_unknown_hosts_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    answer = [{"Host": "a", "Score": 50}, {"Host": "ghost", "Score": 1}]
    with serve_extender({"prio": lambda b: answer}) as f:
        ext = {"urlPrefix": f.url, "prioritizeVerb": "prio", "weight": 1}
        with caplog.at_level(logging.WARNING):
            _, cluster = await schedule([ext], [node("a"), node("b")], [pod()])
    assert cluster.pods["default/p"].node_name == "a"  # used as given, as kube-scheduler does
    [record] = [r.getMessage() for r in caplog.records if f.url in r.getMessage()]
    assert "unknown node(s) ['ghost']" in record and "a=50" in record


async def test_binding_extender_binds_instead_of_the_default_binder() -> None:
    with serve_extender({"bind": lambda b: {}}) as f:
        scheduler, cluster = await schedule([{"urlPrefix": f.url, "bindVerb": "bind"}], [node("a")], [pod()])
    assert f.calls("bind") == [{"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "a"}]
    assert scheduler.outcomes["default/p"].node == "a"
    assert cluster.pods["default/p"].node_name == ""  # the extender, not the default binder, binds


async def test_failing_binding_extender_fails_the_binding_cycle() -> None:
    with serve_extender({"bind": lambda b: {"Error": "cannot bind"}}) as f:
        scheduler, _ = await schedule([{"urlPrefix": f.url, "bindVerb": "bind"}], [node("a")], [pod()])
    assert scheduler.outcomes["default/p"].node is None
    assert "cannot bind" in scheduler.outcomes["default/p"].message


async def test_ignorable_failing_binder_leaves_binding_to_the_plugins() -> None:
    with serve_extender({"bind": Reply(b"", 500)}) as f:
        ext = {"urlPrefix": f.url, "bindVerb": "bind", "ignorable": True}
        _, cluster = await schedule([ext], [node("a")], [pod()])
    assert cluster.pods["default/p"].node_name == "a"


async def test_managed_resources_limit_which_pods_are_sent() -> None:
    gpu = {"example.com/gpu": "1"}
    with serve_extender({"filter": only("b")}) as f:
        ext = {
            "urlPrefix": f.url,
            "filterVerb": "filter",
            "nodeCacheCapable": True,
            "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
        }
        _, cluster = await schedule([ext], [node("a"), node("b")], [pod("plain"), pod("gpu", **gpu)])
    assert [c["Pod"]["metadata"]["name"] for c in f.calls("filter")] == ["gpu"]
    # Nodes have no example.com/gpu: NodeResourcesFit ignores it, as the extender asked.
    assert cluster.pods["default/gpu"].node_name == "b"
    assert cluster.pods["default/plain"].node_name in ("a", "b")


async def test_ignorable_extenders_are_called_last() -> None:
    order: list[str] = []
    with (
        serve_extender({"f": lambda b: order.append("ignorable") or {"NodeNames": node_names(b)}}) as first,
        serve_extender({"f": lambda b: order.append("strict") or {"NodeNames": node_names(b)}}) as second,
    ):
        exts = [
            {"urlPrefix": first.url, "filterVerb": "f", "ignorable": True, "nodeCacheCapable": True},
            {"urlPrefix": second.url, "filterVerb": "f", "nodeCacheCapable": True},
        ]
        await schedule(exts, [node("a")], [pod()])
    assert order == ["strict", "ignorable"]
