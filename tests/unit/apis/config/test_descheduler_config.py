"""DeschedulerConfiguration (descheduler/v1alpha2): Koordinator's own file loads unchanged; unknown and
unsupported fields are refused with their path."""

from __future__ import annotations

import pytest

from apis.config.descheduler import (
    LowNodeLoadArgs,
    MigrationControllerArgs,
    load_descheduler_config,
    parse_descheduler_config,
)
from apis.config.errors import ConfigError
from tests.fixtures import KOORDINATOR_DESCHEDULER

HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


def test_koordinator_config_map_loads_unchanged() -> None:
    config, args = load_descheduler_config(KOORDINATOR_DESCHEDULER / "descheduler-config.yaml")
    assert config.descheduling_interval == 10.0
    assert config.profiles is not None and config.profiles[0].name == "koord-descheduler"
    low = args["LowNodeLoad"][0]
    assert isinstance(low, LowNodeLoadArgs)
    assert low.low_thresholds == {"cpu": 45, "memory": 55} and low.high_thresholds == {"cpu": 75, "memory": 80}
    assert low.evictable_namespaces is not None and low.evictable_namespaces.exclude == [
        "kube-system",
        "koordinator-system",
    ]
    migration = args["MigrationController"][0]
    assert isinstance(migration, MigrationControllerArgs)
    assert migration.qps() == 10.0 and migration.evict_burst == 1


def test_low_node_load_defaults_follow_koordinator() -> None:
    args = LowNodeLoadArgs(low_thresholds={"cpu": 45}, high_thresholds={"cpu": 75})
    assert args.node_fit is True and args.node_metric_expiration_seconds == 180
    assert args.weights() == {"cpu": 1, "memory": 1}
    anomaly = args.anomaly()
    assert (anomaly.consecutive_abnormalities, anomaly.consecutive_normalities, anomaly.timeout) == (5, 3, 60.0)
    [pool] = args.pools()
    assert pool.low_thresholds == {"cpu": 45} and pool.resource_weights == {"cpu": 1, "memory": 1}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param(
            HEAD + "deschedulingIntervall: 10s\n", "deschedulingIntervall: Unknown field", id="unknown-top-level"
        ),
        pytest.param(
            HEAD
            + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled:\n      - name: HighNodeUtilization\n",
            'profiles[0].plugins.balance.enabled[0].name: Unsupported value: "HighNodeUtilization"',
            id="plugin-not-implemented",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      lowThresholds: {cpu: 50}\n      highThresholds: {cpu: 40}\n",
            "profiles[0].pluginConfig[0].args.lowThresholds[cpu]: Invalid value: 50",
            id="low-above-high",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: LowNodeLoad\n    args:\n"
            "      lowThresholds: {cpu: 50}\n      lowThreshold: {cpu: 40}\n",
            "profiles[0].pluginConfig[0].args.lowThreshold: Unknown field",
            id="unknown-args-field",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      maxMigratingPerNode: 2\n",
            "profiles[0].pluginConfig[0].args.maxMigratingPerNode: Forbidden: not implemented",
            id="unsupported-arbitration",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      evictionPolicy: Delete\n",
            'profiles[0].pluginConfig[0].args.evictionPolicy: Unsupported value: "Delete"',
            id="unsupported-evictor",
        ),
        pytest.param(
            "apiVersion: descheduler/v1alpha1\nkind: DeschedulerConfiguration\n",
            'apiVersion: Unsupported value: "descheduler/v1alpha1"',
            id="old-api-version",
        ),
    ],
)
def test_refused_with_path(text: str, want: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_descheduler_config(text)
    assert want in str(info.value)
