"""Go's encoding/json key matching: case-insensitive keys, the later of two keys for one field wins,
objects decoded twice into one field merge. Each expectation was checked against Go 1.26's
``json.Unmarshal`` into a struct with the same JSON tags."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.configuration import RESOURCE_THRESHOLD_KEY, parse_slo_config, render_node_slo_spec
from apis.configuration.colocation import strategy_wire
from apis.core.gojson import GoFields, merge_decoded
from apis.slo.nodeslo import NodeSLOSpec, ResourceThresholdStrategy

FIELDS = GoFields.of(("cpuEvictTimeWindowSeconds", "clusterStrategy", "m", "l"))


@pytest.mark.parametrize(
    ("document", "want"),
    [
        pytest.param('{"cpuEvictTimeWindowSeconds": 1}', {"cpuEvictTimeWindowSeconds": 1}, id="exact"),
        pytest.param('{"CPUEvictTimeWindowSeconds": 1}', {"cpuEvictTimeWindowSeconds": 1}, id="case-folded"),
        pytest.param(
            '{"cpuEvictTimeWindowSeconds": 1, "CPUEvictTimeWindowSeconds": 2}',
            {"cpuEvictTimeWindowSeconds": 2},
            id="exact-then-folded-later-wins",
        ),
        pytest.param(
            '{"CPUEvictTimeWindowSeconds": 2, "cpuEvictTimeWindowSeconds": 1}',
            {"cpuEvictTimeWindowSeconds": 1},
            id="folded-then-exact-later-wins",
        ),
        pytest.param(
            '{"CPUEVICTTIMEWINDOWSECONDS": 3, "CPUEvictTimeWindowSeconds": 2}',
            {"cpuEvictTimeWindowSeconds": 2},
            id="two-folded-later-wins",
        ),
        pytest.param(
            '{"clusterStrategy": {"a": 1}, "ClusterStrategy": {"b": 2}}',
            {"clusterStrategy": {"a": 1, "b": 2}},
            id="objects-merge",
        ),
        pytest.param(
            '{"clusterStrategy": {"a": 1}, "ClusterStrategy": null}', {"clusterStrategy": None}, id="null-replaces"
        ),
        pytest.param(
            '{"m": {"x": "1"}, "M": {"y": "2"}, "l": [1, 2], "L": [3]}',
            {"m": {"x": "1", "y": "2"}, "l": [3]},
            id="maps-merge-arrays-replace",
        ),
        pytest.param('{"unknownField": 1, "Unknown": 2}', {"unknownField": 1, "Unknown": 2}, id="unmatched-kept"),
    ],
)
def test_fold(document: str, want: dict[str, Any]) -> None:
    assert FIELDS.fold(json.loads(document)) == want


def test_merge_puts_later_keys_last() -> None:
    # {"a":1,"A":2} then {"a":3}: Go took a=1, A=2, a=3 in that order, so the nested fold must see a last.
    assert list(merge_decoded({"a": 1, "A": 2}, {"a": 3})) == ["A", "a"]


def test_first_of_two_fields_that_fold_alike_keeps_the_folded_spelling() -> None:
    fields = GoFields.of(("nodeID", "nodeId"))
    assert fields.fold({"NODEID": 1}) == {"nodeID": 1}
    assert fields.fold({"nodeId": 2}) == {"nodeId": 2}


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param({"CPUEvictTimeWindowSeconds": 60}, 60, id="cpu-evict-manual-spelling"),
        pytest.param({"cpuEvictTimeWindowSeconds": 60, "CPUEvictTimeWindowSeconds": 30}, 30, id="later-wins"),
        pytest.param({"CPUEvictTimeWindowSeconds": 30, "cpuEvictTimeWindowSeconds": 60}, 60, id="exact-later-wins"),
    ],
)
def test_nodeslo_strategy_reads_keys_as_go(raw: dict[str, Any], want: int) -> None:
    assert ResourceThresholdStrategy.model_validate(raw).cpu_evict_time_window_seconds == want
    spec = NodeSLOSpec.model_validate({"ResourceUsedThresholdWithBE": raw})
    assert spec.resource_used_threshold_with_be is not None
    assert spec.resource_used_threshold_with_be.cpu_evict_time_window_seconds == want


def test_python_names_are_not_folded() -> None:
    assert ResourceThresholdStrategy.model_validate({"CPU_EVICT_TIME_WINDOW_SECONDS": 5}).to_wire() == {}


def test_cpu_evict_manual_config_map_reaches_the_nodeslo() -> None:
    # Koordinator's cpu-evict manual, resource-threshold-config as written there.
    text = """{
      "clusterStrategy": {
        "enable": true,
        "cpuEvictBESatisfactionLowerPercent": 60,
        "cpuEvictBESatisfactionUpperPercent": 80,
        "cpuEvictBEUsageThresholdPercent": 90,
        "CPUEvictTimeWindowSeconds": 60
      }
    }"""
    config, problems = parse_slo_config({RESOURCE_THRESHOLD_KEY: text})
    assert problems == []
    spec = render_node_slo_spec(config, {}, {})["resourceUsedThresholdWithBE"]
    assert spec["cpuEvictTimeWindowSeconds"] == 60
    assert "CPUEvictTimeWindowSeconds" not in spec


def test_config_map_structure_keys_fold() -> None:
    text = json.dumps(
        {
            "ClusterStrategy": {"Enable": True},
            "NodeStrategies": [
                {"Name": "pool-a", "NodeSelector": {"MatchLabels": {"pool": "a"}}, "CPUSuppressThresholdPercent": 50}
            ],
        }
    )
    config, problems = parse_slo_config({RESOURCE_THRESHOLD_KEY: text})
    assert problems == []
    want_cluster = render_node_slo_spec(config, {"pool": "b"}, {})["resourceUsedThresholdWithBE"]
    want_node = render_node_slo_spec(config, {"pool": "a"}, {})["resourceUsedThresholdWithBE"]
    assert (want_cluster["enable"], want_cluster["cpuSuppressThresholdPercent"]) == (True, 65)
    assert (want_node["enable"], want_node["cpuSuppressThresholdPercent"]) == (True, 50)
    assert config.key(RESOURCE_THRESHOLD_KEY).nodes[0].name == "pool-a"


def test_colocation_config_keys_fold() -> None:
    assert strategy_wire({"Enable": True, "CPUReclaimThresholdPercent": 70}) == {
        "enable": True,
        "cpuReclaimThresholdPercent": 70,
    }
