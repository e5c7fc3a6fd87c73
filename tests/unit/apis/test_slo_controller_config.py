"""slo-controller-config: per-key parsing, Koordinator's merge rules, ranges, last-good-value on error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.configuration import (
    COLOCATION_KEY,
    CPU_BURST_KEY,
    RESOURCE_QOS_KEY,
    RESOURCE_THRESHOLD_KEY,
    SYSTEM_KEY,
    ColocationStrategy,
    default_slo_config,
    parse_slo_config,
    render_node_slo_spec,
    resolve_colocation,
)

DEFAULT_THRESHOLD = {
    "enable": False,
    "cpuSuppressThresholdPercent": 65,
    "cpuSuppressPolicy": "cpuset",
    "memoryEvictThresholdPercent": 70,
    "cpuEvictPolicy": "evictByRealLimit",
}
CHART = {
    "colocation-config": '{\n  "enable": true\n}\n',
    "resource-threshold-config": '{"clusterStrategy": {"enable": true}}',
}


def threshold(data: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    config, problems = parse_slo_config({RESOURCE_THRESHOLD_KEY: json.dumps(data)})
    assert problems == []
    return render_node_slo_spec(config, labels, {})["resourceUsedThresholdWithBE"]


def test_defaults_without_config_map() -> None:
    config, problems = parse_slo_config(None)
    assert problems == []
    assert not config.present
    assert render_node_slo_spec(config, {}, {}) == {
        "resourceUsedThresholdWithBE": DEFAULT_THRESHOLD,
        "resourceQOSStrategy": {},
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
    }
    assert resolve_colocation(config, {}, {}) == ColocationStrategy(enable=False)


def test_chart_config_map() -> None:
    config, problems = parse_slo_config(CHART)
    assert problems == []
    assert render_node_slo_spec(config, {}, {})["resourceUsedThresholdWithBE"] == {**DEFAULT_THRESHOLD, "enable": True}
    assert resolve_colocation(config, {}, {}) == ColocationStrategy(enable=True)


S2 = {
    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 50},
    "nodeStrategies": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "memoryEvictThresholdPercent": 80}],
}
S3 = {
    "clusterStrategy": {"enable": True},
    "nodeStrategies": [
        {"name": "s1", "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 40},
        {"name": "s2", "nodeSelector": {}, "cpuSuppressThresholdPercent": 30, "memoryEvictThresholdPercent": 90},
    ],
}


@pytest.mark.parametrize(
    ("data", "labels", "want"),
    [
        pytest.param({}, {}, DEFAULT_THRESHOLD, id="S1-empty-key-object"),
        pytest.param(
            S2,
            {"pool": "a"},
            {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 50, "memoryEvictThresholdPercent": 80},
            id="S2-node-strategy",
        ),
        pytest.param(
            S2, {}, {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 50}, id="S2-other-node-cluster"
        ),
        pytest.param(
            S3,
            {"pool": "a"},
            {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 40},
            id="S3-first-match-wins",
        ),
        pytest.param(
            S3,
            {"pool": "b"},
            {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 30, "memoryEvictThresholdPercent": 90},
            id="S3-empty-selector-matches-all",
        ),
        pytest.param(
            {"nodeStrategies": [{"name": "x", "memoryEvictThresholdPercent": 90}]},
            {"pool": "a"},
            DEFAULT_THRESHOLD,
            id="missing-selector-matches-no-node",
        ),
        pytest.param(
            {"clusterStrategy": {"enable": False, "cpuSuppressThresholdPercent": 0}},
            {},
            {**DEFAULT_THRESHOLD, "cpuSuppressThresholdPercent": 0},
            id="explicit-zero-overrides",
        ),
        pytest.param(
            {"clusterStrategy": {"cpuSuppressThresholdPercent": None, "typoField": 3}},
            {},
            DEFAULT_THRESHOLD,
            id="null-and-unknown-fields-ignored",
        ),
    ],
)
def test_threshold_merge(data: dict[str, Any], labels: dict[str, str], want: dict[str, Any]) -> None:
    assert threshold(data, labels) == want


def test_s5_nested_qos_merge() -> None:
    data = {
        "clusterStrategy": {"beClass": {"memoryQOS": {"enable": True, "wmarkRatio": 95, "wmarkScalePermill": 20}}},
        "nodeStrategies": [
            {"nodeSelector": {"matchLabels": {"pool": "a"}}, "beClass": {"memoryQOS": {"wmarkRatio": 90}}}
        ],
    }
    config, problems = parse_slo_config({RESOURCE_QOS_KEY: json.dumps(data)})
    assert problems == []
    assert render_node_slo_spec(config, {"pool": "a"}, {})["resourceQOSStrategy"] == {
        "beClass": {"memoryQOS": {"enable": True, "wmarkRatio": 90, "wmarkScalePermill": 20}}
    }


def test_arrays_replace_whole() -> None:
    data = {
        "metricAggregatePolicy": {"durations": ["5m", "15m"]},
        "nodeConfigs": [{"nodeSelector": {}, "metricAggregatePolicy": {"durations": ["1m"]}}],
    }
    config, _ = parse_slo_config({COLOCATION_KEY: json.dumps(data)})
    assert config.key(COLOCATION_KEY).cluster["metricAggregatePolicy"] == {"durations": ["5m", "15m"]}
    assert resolve_colocation(config, {}, {}).metric_aggregate_durations == ("1m",)


@pytest.mark.parametrize(
    ("key", "text", "want_message"),
    [
        pytest.param(RESOURCE_THRESHOLD_KEY, "{not json", "not valid JSON", id="invalid-json"),
        pytest.param(RESOURCE_THRESHOLD_KEY, "", "not valid JSON", id="empty-string"),
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            '{"clusterStrategy": {"cpuSuppressThresholdPercent": 150}}',
            "clusterStrategy.cpuSuppressThresholdPercent: 150 is out of range (must be at most 100)",
            id="threshold-above-100",
        ),
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            '{"nodeStrategies": [{"nodeSelector": {}, "memoryEvictLowerPercent": 80}]}',
            "nodeStrategies[0].memoryEvictLowerPercent: 80 must be below memoryEvictThresholdPercent (70)",
            id="lower-above-threshold-after-merge",
        ),
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            '{"clusterStrategy": {"cpuSuppressPolicy": "bogus"}}',
            "clusterStrategy.cpuSuppressPolicy: 'bogus' is not one of cpuset, cfsQuota",
            id="bad-enum",
        ),
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            '{"clusterStrategy": {"enable": "yes please"}}',
            "clusterStrategy.enable:",
            id="wrong-type",
        ),
        pytest.param(
            COLOCATION_KEY,
            '{"resourceDiffThreshold": 0}',
            "resourceDiffThreshold: 0 is out of range (must be above 0)",
            id="diff-threshold-zero",
        ),
        pytest.param(
            COLOCATION_KEY, '{"degradeTimeMinutes": 0}', "degradeTimeMinutes: 0 is out of range", id="degrade-zero"
        ),
        pytest.param(
            COLOCATION_KEY,
            '{"nodeConfigs": [{"nodeSelector": {"matchExpressions": [{"key": "a"}]}}]}',
            "nodeConfigs[0].nodeSelector",
            id="bad-selector",
        ),
        pytest.param(
            RESOURCE_QOS_KEY,
            '{"clusterStrategy": {"lsClass": {"cpuQOS": {"groupIdentity": 5}}}}',
            "clusterStrategy.lsClass.cpuQOS.groupIdentity: 5 is out of range",
            id="qos-group-identity",
        ),
        pytest.param(
            CPU_BURST_KEY,
            '{"clusterStrategy": {"cfsQuotaBurstPercent": 50}}',
            "clusterStrategy.cfsQuotaBurstPercent: 50 is out of range (must be at least 100)",
            id="burst-below-100",
        ),
        pytest.param(
            SYSTEM_KEY,
            '{"clusterStrategy": {"watermarkScaleFactor": 500}}',
            "clusterStrategy.watermarkScaleFactor: 500 is out of range (must be at most 400)",
            id="system-watermark",
        ),
        pytest.param(SYSTEM_KEY, "[1, 2]", "expected a JSON object", id="not-an-object"),
    ],
)
def test_bad_key_keeps_last_good_value_and_others_work(key: str, text: str, want_message: str) -> None:
    good = {
        COLOCATION_KEY: '{"enable": true, "cpuReclaimThresholdPercent": 70}',
        RESOURCE_THRESHOLD_KEY: json.dumps(S2),
        RESOURCE_QOS_KEY: '{"clusterStrategy": {"lsClass": {"cpuQOS": {"enable": true}}}}',
        CPU_BURST_KEY: '{"clusterStrategy": {"policy": "auto"}}',
        SYSTEM_KEY: '{"clusterStrategy": {"minFreeKbytesFactor": 100}}',
    }
    first, problems = parse_slo_config(good)
    assert problems == []
    other = next(k for k in good if k != key)
    changed_other = {**good, key: text, other: good[other].replace("}", ', "extra": 1}', 1)}
    if other == CPU_BURST_KEY:
        changed_other[other] = '{"clusterStrategy": {"policy": "cpuBurstOnly"}}'
    second, problems = parse_slo_config(changed_other, first)
    assert [p.key for p in problems] == [key]
    assert want_message in problems[0].message
    assert second.key(key) == first.key(key)
    assert second.texts[key] == good[key]
    if other == CPU_BURST_KEY:
        assert second.key(other).cluster["policy"] == "cpuBurstOnly"


def test_missing_key_goes_back_to_default() -> None:
    first, _ = parse_slo_config({CPU_BURST_KEY: '{"clusterStrategy": {"policy": "auto"}}'})
    second, problems = parse_slo_config({}, first)
    assert problems == []
    assert second.key(CPU_BURST_KEY) == default_slo_config().key(CPU_BURST_KEY)


@pytest.mark.parametrize(
    ("labels", "annotations", "want"),
    [
        pytest.param(
            {"node.koordinator.sh/cpu-reclaim-ratio": "0.57"},
            {},
            {"cpu_reclaim_threshold_percent": 56},
            id="ratio-label-truncates",
        ),
        pytest.param({"node.koordinator.sh/memory-reclaim-ratio": "-1"}, {}, {}, id="negative-ratio-ignored"),
        pytest.param(
            {},
            {"node.koordinator.sh/colocation-strategy": '{"degradeTimeMinutes": 3}'},
            {"degrade_time_minutes": 3},
            id="annotation-overlay",
        ),
        pytest.param({}, {"node.koordinator.sh/colocation-strategy": "{bad"}, {}, id="bad-annotation-ignored"),
        pytest.param({"pool": "a"}, {}, {"enable": False}, id="node-config-can-disable"),
    ],
)
def test_resolve_colocation(labels: dict[str, str], annotations: dict[str, str], want: dict[str, Any]) -> None:
    import dataclasses

    data = {"enable": True, "nodeConfigs": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "enable": False}]}
    config, _ = parse_slo_config({COLOCATION_KEY: json.dumps(data)})
    want_strategy = dataclasses.replace(ColocationStrategy(enable=True), **want)
    assert resolve_colocation(config, labels, annotations) == want_strategy


def test_node_config_cannot_enable_when_cluster_is_off() -> None:
    data = {"enable": False, "nodeConfigs": [{"nodeSelector": {}, "enable": True}]}
    config, _ = parse_slo_config({COLOCATION_KEY: json.dumps(data)})
    assert resolve_colocation(config, {}, {}).enable is False


def test_network_bandwidth_annotation() -> None:
    config, _ = parse_slo_config({})
    spec = render_node_slo_spec(config, {}, {"node.koordinator.sh/network-bandwidth": "10G"})
    assert spec["systemStrategy"] == {"totalNetworkBandwidth": "10G"}
    spec = render_node_slo_spec(config, {}, {"node.koordinator.sh/network-bandwidth": "lots"})
    assert spec["systemStrategy"] == {"totalNetworkBandwidth": "0"}


KOORD_THRESHOLD = {
    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
    "nodeStrategies": [
        {"nodeSelector": {"matchLabels": {"xxx": "yyy"}}, "cpuSuppressThresholdPercent": 40},
        {"nodeSelector": {"matchLabels": {"zzz": "zzz"}}, "cpuSuppressThresholdPercent": 50},
    ],
}
KOORD_BURST = {
    "clusterStrategy": {"cfsQuotaBurstPeriodSeconds": 120},
    "nodeStrategies": [
        {"nodeSelector": {"matchLabels": {"xxx": "yyy"}}, "cpuBurstPercent": 100},
        {"nodeSelector": {"matchLabels": {"zzz": "zzz"}}, "cpuBurstPercent": 200},
    ],
}
DEFAULT_BURST = {
    "policy": "none",
    "cpuBurstPercent": 1000,
    "cfsQuotaBurstPercent": 300,
    "cfsQuotaBurstPeriodSeconds": -1,
    "sharePoolThresholdPercent": 50,
}


@pytest.mark.parametrize(
    ("key", "data", "labels", "field", "want"),
    [
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            KOORD_THRESHOLD,
            {},
            "resourceUsedThresholdWithBE",
            {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 60},
            id="koordinator-threshold-only-cluster-config",
        ),
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            KOORD_THRESHOLD,
            {"xxx": "yyy"},
            "resourceUsedThresholdWithBE",
            {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 40},
            id="koordinator-threshold-node-config-xxx",
        ),
        pytest.param(
            RESOURCE_THRESHOLD_KEY,
            KOORD_THRESHOLD,
            {"zzz": "zzz"},
            "resourceUsedThresholdWithBE",
            {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 50},
            id="koordinator-threshold-node-config-zzz",
        ),
        pytest.param(
            CPU_BURST_KEY,
            KOORD_BURST,
            {},
            "cpuBurstStrategy",
            {**DEFAULT_BURST, "cfsQuotaBurstPeriodSeconds": 120},
            id="koordinator-burst-cluster-config",
        ),
        pytest.param(
            CPU_BURST_KEY,
            KOORD_BURST,
            {"xxx": "yyy"},
            "cpuBurstStrategy",
            {**DEFAULT_BURST, "cfsQuotaBurstPeriodSeconds": 120, "cpuBurstPercent": 100},
            id="koordinator-burst-merged-xxx",
        ),
        pytest.param(
            CPU_BURST_KEY,
            KOORD_BURST,
            {"zzz": "zzz"},
            "cpuBurstStrategy",
            {**DEFAULT_BURST, "cfsQuotaBurstPeriodSeconds": 120, "cpuBurstPercent": 200},
            id="koordinator-burst-merged-zzz",
        ),
    ],
)
def test_koordinator_nodeslo_tables(
    key: str, data: dict[str, Any], labels: dict[str, str], field: str, want: dict[str, Any]
) -> None:
    """Koordinator pkg/slo-controller/nodeslo resource_strategy_test.go (calculate*CfgMerged cases)."""
    config, problems = parse_slo_config({key: json.dumps(data)})
    assert problems == []
    assert render_node_slo_spec(config, labels, {})[field] == want
