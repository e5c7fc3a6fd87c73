"""HTTPExtender request/response round trips against a real HTTP extender in a thread."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config.extender import Extender
from apis.core.types import Node, Pod
from koord_scheduler.extenders import ExtenderError, HTTPExtender, extender_score
from tests.builders import make_node, make_pod
from tests.extender_fake import Reply, node_names, serve_extender


def nodes(*names: str) -> list[Node]:
    return [make_node(n).capacity(cpu="4", memory="8Gi", pods=110).build() for n in names]


POD = make_pod("p").uid("uid-p").req(cpu="1").build()


def client(url: str, **fields: Any) -> HTTPExtender:
    return HTTPExtender(Extender.model_validate({"urlPrefix": url, **fields}))


def test_filter_node_cache_capable_sends_names_only() -> None:
    with serve_extender({"filter": lambda b: {"NodeNames": node_names(b)[:1], "FailedNodes": {"b": "busy"}}}) as fake:
        reply = client(fake.url, filterVerb="filter", nodeCacheCapable=True).filter(POD, nodes("a", "b"))
    body = fake.calls("filter")[0]
    assert (body["NodeNames"], body["Nodes"]) == (["a", "b"], None)
    assert body["Pod"]["metadata"] == {"name": "p", "namespace": "default", "uid": "uid-p"}
    assert body["Pod"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    assert (reply.node_names, reply.failed) == (("a",), {"b": "busy"})


def test_filter_without_node_cache_sends_whole_nodes_and_reads_items() -> None:
    def answer(body: dict[str, Any]) -> Any:
        return {"Nodes": {"items": [i for i in body["Nodes"]["items"] if i["metadata"]["name"] == "b"]}}

    with serve_extender({"filter": answer}) as fake:
        reply = client(fake.url, filterVerb="filter").filter(POD, nodes("a", "b"))
    body = fake.calls("filter")[0]
    assert body["NodeNames"] is None
    assert body["Nodes"]["items"][0]["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert reply.node_names == ("b",)


def test_replies_are_read_case_insensitively() -> None:
    with serve_extender({"filter": lambda b: {"nodenames": ["a"], "failedAndUnresolvableNodes": {"b": "gone"}}}) as f:
        reply = client(f.url, filterVerb="filter", nodeCacheCapable=True).filter(POD, nodes("a", "b"))
    assert (reply.node_names, reply.failed_and_unresolvable) == (("a",), {"b": "gone"})


@pytest.mark.parametrize(
    ("reply", "fields", "want_message"),
    [
        pytest.param(Reply(b"{not json"), {}, "sent malformed JSON to filter", id="malformed-json"),
        pytest.param(Reply(b"[]"), {}, "ExtenderFilterResult: expected a JSON object", id="wrong-shape"),
        pytest.param(
            Reply(b"boom", status=500), {}, "failed filter with extender at URL {url}/filter, code 500", id="http-500"
        ),
        pytest.param(Reply(b'{"Error": "no capacity"}'), {}, "no capacity", id="error-field"),
        pytest.param(Reply(b"{}", delay=1.0), {"httpTimeout": "200ms"}, "context deadline exceeded", id="timeout"),
    ],
)
def test_filter_failures_name_the_extender(reply: Reply, fields: dict[str, Any], want_message: str) -> None:
    with serve_extender({"filter": reply}) as fake:
        ext = client(fake.url, filterVerb="filter", **fields)
        with pytest.raises(ExtenderError) as err:
            ext.filter(POD, nodes("a"))
    assert want_message.format(url=fake.url) in str(err.value)
    assert err.value.url == fake.url


def test_unreachable_extender_names_the_url() -> None:
    ext = client("http://127.0.0.1:9/ext", filterVerb="filter", httpTimeout="1s")
    with pytest.raises(ExtenderError, match=r'Post "http://127.0.0.1:9/ext/filter"'):
        ext.filter(POD, nodes("a"))


def test_prioritize_round_trip() -> None:
    with serve_extender({"prio": lambda b: [{"Host": n, "Score": i} for i, n in enumerate(node_names(b))]}) as f:
        got = client(f.url, prioritizeVerb="prio", weight=2, nodeCacheCapable=True).prioritize(POD, nodes("a", "b"))
    assert got == [("a", 0), ("b", 1)]


@pytest.mark.parametrize(
    "body",
    [b'[{"Host": "a", "Score": "high"}]', b'{"Host": "a"}', b'[{"Score": 1}]'],
    ids=["score-not-int", "not-a-list", "no-host"],
)
def test_malformed_prioritize_reply(body: bytes) -> None:
    with serve_extender({"prio": Reply(body)}) as f, pytest.raises(ExtenderError, match="malformed prio reply"):
        client(f.url, prioritizeVerb="prio", weight=1).prioritize(POD, nodes("a"))


def test_bind_sends_binding_args_and_reports_error() -> None:
    with serve_extender({"bind": lambda b: {"Error": "" if b["Node"] == "a" else "refused"}}) as f:
        ext = client(f.url, bindVerb="bind")
        ext.bind(POD, "a")
        with pytest.raises(ExtenderError, match="refused"):
            ext.bind(POD, "b")
    assert f.calls("bind")[0] == {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "a"}


@pytest.mark.parametrize("cache_capable", [True, False], ids=["meta-victims", "whole-victims"])
def test_preempt_round_trip(cache_capable: bool) -> None:
    victim = make_pod("v").uid("uid-v").node("a").build()

    def answer(body: dict[str, Any]) -> Any:
        if cache_capable:
            assert body["NodeNameToVictims"] is None
            uids = [p["UID"] for p in body["NodeNameToMetaVictims"]["a"]["Pods"]]
        else:
            assert body["NodeNameToMetaVictims"] is None
            uids = [p["metadata"]["uid"] for p in body["NodeNameToVictims"]["a"]["Pods"]]
        return {"NodeNameToMetaVictims": {"a": {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 1}}}

    with serve_extender({"preempt": answer}) as f:
        ext = client(f.url, preemptVerb="preempt", nodeCacheCapable=cache_capable)
        got = ext.process_preemption(POD, {"a": [victim]}, {"a": 1})
    assert got == {"a": (("uid-v",), 1)}


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod("g").req(cpu="1", **{"example.com/gpu": "1"}).build(), True, id="requests-managed"),
        pytest.param(make_pod("l").limit(**{"example.com/gpu": "1"}).build(), True, id="limits-managed"),
        pytest.param(make_pod("c").req(cpu="1").build(), False, id="not-managed"),
    ],
)
def test_managed_resources_decide_interest(pod: Pod, want: bool) -> None:
    ext = client("http://x", filterVerb="f", managedResources=[{"name": "example.com/gpu"}])
    assert ext.is_interested(pod) is want
    assert client("http://x", filterVerb="f").is_interested(pod) is True


@pytest.mark.parametrize(
    ("score", "weight", "want"),
    [
        pytest.param(10, 1, 100, id="max-score-weight-1"),
        pytest.param(3, 2, 60, id="score*weight*10"),
        pytest.param(0, 5, 0, id="zero"),
        pytest.param(12, 1, 120, id="out-of-range-used-as-given"),
    ],
)
def test_extender_score_scaling(score: int, weight: int, want: int) -> None:
    assert extender_score(score, weight) == want
