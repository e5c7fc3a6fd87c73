"""koordlet's states informer: a bad object costs that object only, and a NodeSLO out of Koordinator's
ranges is reported and not used (the last good spec, or the defaults, stay in force)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from koordlet_fakes import make_raw_pod

from apis.slo import merge_node_slo_spec
from koordlet.statesinformer.informer import StatesInformer
from koordlet.statesinformer.kube import KubeSource
from koordlet.system.layout import CgroupDriver, CgroupLayout

UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
UID_C = "cccccccc-bbbb-cccc-dddd-eeeeeeeeeeee"


def informer() -> StatesInformer:
    return StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.CGROUPFS))


def node_slo(version: str = "1", **thresholds: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "node-1", "resourceVersion": version},
        "spec": {"resourceUsedThresholdWithBE": {"enable": True, **thresholds}},
    }


def thresholds(states: StatesInformer) -> tuple[int | None, int | None]:
    strategy = states.node_slo.resource_used_threshold_with_be
    assert strategy is not None
    return strategy.cpu_suppress_threshold_percent, strategy.memory_evict_threshold_percent


def test_a_node_slo_out_of_range_is_reported_and_the_defaults_stay(caplog: pytest.LogCaptureFixture) -> None:
    states = informer()
    defaults = thresholds(states)
    with caplog.at_level(logging.WARNING):
        states.set_node_slo(node_slo(cpuSuppressThresholdPercent=500, memoryEvictThresholdPercent=-5))

    assert thresholds(states) == defaults
    assert states.node_slo == merge_node_slo_spec(None)
    assert states.rejected == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert "NodeSLO node-1: spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: 500 is out of range" in line
    assert "spec.resourceUsedThresholdWithBE.memoryEvictThresholdPercent: -5 is out of range" in line


def test_a_bad_node_slo_after_a_good_one_keeps_the_good_one() -> None:
    states = informer()
    states.set_node_slo(node_slo("1", cpuSuppressThresholdPercent=60, memoryEvictThresholdPercent=80))
    assert thresholds(states) == (60, 80)
    states.set_node_slo(node_slo("2", cpuSuppressThresholdPercent=500))
    assert thresholds(states) == (60, 80)
    states.set_node_slo(node_slo("3", cpuSuppressThresholdPercent="high"))  # wrong type
    assert thresholds(states) == (60, 80)
    assert states.rejected == 2
    states.set_node_slo(node_slo("4", cpuSuppressThresholdPercent=70))
    assert thresholds(states)[0] == 70


def broken_pod(name: str, uid: str) -> dict[str, Any]:
    """A pod whose ``spec.containers`` is not a list of objects."""
    raw = make_raw_pod(name, uid)
    raw["spec"] = {"containers": ["not an object"]}
    return raw


def test_a_pod_that_does_not_parse_is_left_out_of_the_list() -> None:
    states = informer()
    bad = broken_pod("bad", UID_B)
    states.replace_pods([make_raw_pod("a", UID_A), bad, make_raw_pod("c", UID_C)])
    assert sorted(p.name for p in states.get_all_pods()) == ["a", "c"]
    assert states.rejected == 1


class _Listing:
    def __init__(self, text: str) -> None:
        self.data = text.encode()


class _Stream:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def stream(self, *_: Any, **__: Any) -> list[bytes]:
        return [line.encode() + b"\n" for line in self.lines]

    def release_conn(self) -> None:
        pass


def deep_pod(name: str, uid: str, depth: int) -> str:
    """A pod with a field ``x`` nested ``depth`` levels: no Python ``json`` can encode it."""
    raw = make_raw_pod(name, uid)
    head = json.dumps(raw)[:-1]  # without the closing brace
    return head + ', "x": ' + '{"a":' * depth + "1" + "}" * depth + "}"


def test_the_list_and_watch_skip_what_cannot_be_decoded_or_applied(caplog: pytest.LogCaptureFixture) -> None:
    states = informer()
    source = KubeSource(None, states, watch_pods=False, on_listed=lambda: None)
    items = [json.dumps(make_raw_pod("a", UID_A)), deep_pod("deep", UID_B, 1100)]
    listing = '{"metadata":{"resourceVersion":"7"},"items":[' + ",".join(items) + "]}"
    events = [
        '{"type":"MODIFIED","object":' + deep_pod("deep", UID_B, 2000) + "}",
        '{"type":"ADDED","object":' + json.dumps(broken_pod("bad", UID_B)) + "}",
        '{"type":"ADDED","object":' + json.dumps(make_raw_pod("c", UID_C)) + "}",
    ]
    calls: list[str] = []

    def list_call(**kw: Any) -> Any:
        calls.append("watch" if kw.get("watch") else "list")
        if kw.get("watch") or calls.count("list") > 1:
            source.stop()  # one watch (or a second list), then stop
        return _Stream(events) if kw.get("watch") else _Listing(listing)

    def on_event(kind: str, obj: dict[str, Any]) -> None:
        states.upsert_pod(obj)

    with caplog.at_level(logging.WARNING):
        source._list_watch("pods", list_call, states.replace_pods, on_event)

    assert calls == ["list", "watch"]  # nothing made it list again
    assert sorted(p.name for p in states.get_all_pods()) == ["a", "c"]
    assert states.rejected == 3
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "pods default/deep ignored: reading it failed: ValueError: x.a.a.a.a.a…: nested deeper than 1024" in messages
    assert "pods default/bad ignored: reading it failed" in messages
