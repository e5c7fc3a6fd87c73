"""koordlet's states informer: a bad object costs that object only, and a NodeSLO out of Koordinator's
ranges is reported and not used (the last good spec, or the defaults, stay in force)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from koordlet_fakes import make_raw_pod

from apis.slo import merge_node_slo_spec
from koordlet.statesinformer.informer import StatesInformer
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
