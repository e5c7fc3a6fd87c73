"""Preemption extenders: victims sent, kept candidates read back and resolved by UID."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config.extender import Extender
from koord_scheduler.extenders import ExtenderError, HTTPExtender
from koord_scheduler.extenders.preemption import process_preemption
from koord_scheduler.framework.snapshot import ClusterSnapshot
from tests.builders import make_node, make_pod
from tests.extender_fake import Reply, serve_extender

PREEMPTOR = make_pod("high").uid("uid-high").priority(100).req(cpu="2").build()
VICTIMS = {
    "a": make_pod("va").uid("uid-va").node("a").req(cpu="2").build(),
    "b": make_pod("vb").uid("uid-vb").node("b").req(cpu="2").build(),
}


def snapshot() -> ClusterSnapshot:
    snap = ClusterSnapshot()
    for name in ("a", "b"):
        snap.upsert_node(make_node(name).capacity(cpu="2").build())
        snap.add_pod(VICTIMS[name])
    return snap


CANDIDATES = {n: ([p], 0) for n, p in VICTIMS.items()}


def preempter(url: str, **fields: Any) -> HTTPExtender:
    return HTTPExtender(Extender.model_validate({"urlPrefix": url, "preemptVerb": "preempt", **fields}))


def keep(*nodes: str, uid: str | None = None) -> Any:
    def answer(body: dict[str, Any]) -> Any:
        meta = body["NodeNameToMetaVictims"]
        return {
            "NodeNameToMetaVictims": {
                n: {"Pods": [{"UID": uid}] if uid else v["Pods"], "NumPDBViolations": v["NumPDBViolations"]}
                for n, v in meta.items()
                if n in nodes
            }
        }

    return answer


def test_extender_narrows_candidates_and_victims_resolve_by_uid() -> None:
    with serve_extender({"preempt": keep("b")}) as f:
        got = process_preemption([preempter(f.url, nodeCacheCapable=True)], PREEMPTOR, snapshot(), CANDIDATES)
    assert got == {"b": ([VICTIMS["b"]], 0)}
    assert f.calls("preempt")[0]["NodeNameToMetaVictims"]["a"] == {"Pods": [{"UID": "uid-va"}], "NumPDBViolations": 0}


def test_empty_answer_ends_the_chain() -> None:
    with serve_extender({"preempt": keep()}) as first, serve_extender({"preempt": keep("a")}) as second:
        exts = [preempter(first.url, nodeCacheCapable=True), preempter(second.url, nodeCacheCapable=True)]
        assert process_preemption(exts, PREEMPTOR, snapshot(), CANDIDATES) == {}
    assert second.calls("preempt") == []


@pytest.mark.parametrize(
    ("answer", "want_error", "want_if_ignorable"),
    [
        pytest.param(
            keep("a", uid="uid-nope"), "claims to preempt pod (UID: uid-nope) on node: a", CANDIDATES, id="unknown-uid"
        ),
        pytest.param(
            lambda b: {"NodeNameToMetaVictims": {"a": {"Pods": []}}},
            "expected at least one victim",
            {},
            id="no-victims",
        ),
        pytest.param(Reply(b"<html>", 200), "malformed JSON", CANDIDATES, id="malformed"),
    ],
)
def test_bad_preempt_answers(answer: Any, want_error: str, want_if_ignorable: dict[str, Any]) -> None:
    with serve_extender({"preempt": answer}) as f:
        strict = preempter(f.url, nodeCacheCapable=True)
        with pytest.raises(ExtenderError) as err:
            process_preemption([strict], PREEMPTOR, snapshot(), CANDIDATES)
        ignorable = preempter(f.url, nodeCacheCapable=True, ignorable=True)
        got = process_preemption([ignorable], PREEMPTOR, snapshot(), CANDIDATES)
    assert want_error in str(err.value)
    # A failing ignorable extender is skipped; a node it kept without victims is dropped.
    assert got == want_if_ignorable
