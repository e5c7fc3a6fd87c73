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
            "      nodeSelector: pool=a\n",
            "profiles[0].pluginConfig[0].args.nodeSelector: Forbidden: not implemented",
            id="unsupported-node-selector",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      arbitrationArgs: {enabled: true, interval: 0s}\n",
            "profiles[0].pluginConfig[0].args.arbitrationArgs.interval: Invalid value",
            id="zero-arbitration-interval",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      arbitrationArgs: {enabled: true, period: 1s}\n",
            "profiles[0].pluginConfig[0].args.arbitrationArgs.period: Invalid value",
            id="unknown-arbitration-field",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      maxMigratingPerNode: -1\n",
            "profiles[0].pluginConfig[0].args.maxMigratingPerNode: Invalid value: -1",
            id="negative-per-node",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      maxUnavailablePerWorkload: ten\n",
            "profiles[0].pluginConfig[0].args.maxUnavailablePerWorkload: Invalid value",
            id="bad-int-or-percent",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      objectLimiters: {pod: {duration: 5m}}\n",
            'profiles[0].pluginConfig[0].args.objectLimiters: Unsupported value: "pod"',
            id="unknown-limiter",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      objectLimiters: {workload: {duration: 5 minutes}}\n",
            "profiles[0].pluginConfig[0].args.objectLimiters[workload].duration: Invalid value",
            id="bad-limiter-duration",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      skipEvictionGates: [Bogus]\n",
            'profiles[0].pluginConfig[0].args.skipEvictionGates: Unsupported value: "Bogus"',
            id="unknown-gate",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      schedulerNames: [koord-scheduler, '']\n",
            "profiles[0].pluginConfig[0].args.schedulerNames[1]: Invalid value",
            id="empty-scheduler-name",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      priorityThreshold: {name: high}\n",
            "profiles[0].pluginConfig[0].args.priorityThreshold.name: Forbidden",
            id="priority-class-name",
        ),
        pytest.param(
            HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
            "      evictionPolicy: Drain\n",
            'profiles[0].pluginConfig[0].args.evictionPolicy: Unsupported value: "Drain"',
            id="unknown-evictor",
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


def test_migration_controller_fields_load() -> None:
    text = (
        HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
        "      dryRun: true\n      nodeFit: true\n      evictLocalStoragePods: true\n"
        "      schedulerNames: [koord-scheduler]\n      evictionPolicy: SoftEviction\n"
        "      skipEvictionGates: [NodeFit, LocalStorage]\n"
    )
    _, args = parse_descheduler_config(text)
    got = args["MigrationController"][0]
    assert isinstance(got, MigrationControllerArgs)
    assert (got.dry_run, got.node_fit, got.evict_local_storage_pods) == (True, True, True)
    assert got.scheduler_names == ["koord-scheduler"]
    assert got.eviction_policy == "SoftEviction"
    assert got.skip_eviction_gates == ["NodeFit", "LocalStorage"]


def test_arbitration_fields_load() -> None:
    text = (
        HEAD + "profiles:\n- name: p\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
        "      maxMigratingGlobally: 4\n      maxMigratingPerNode: 1\n      maxMigratingPerNamespace: 2\n"
        "      maxMigratingPerWorkload: 20%\n      maxUnavailablePerWorkload: 2\n"
        "      skipCheckExpectedReplicas: true\n      evictSystemCriticalPods: true\n      ignorePvcPods: true\n"
        "      priorityThreshold: {value: 1000}\n      labelSelector: {matchLabels: {app: web}}\n"
        "      skipEvictionGates: [PVC, MaxMigratingGlobally]\n"
        "      objectLimiters: {workload: {duration: 10m, maxMigrating: 2, burst: 2}, namespace: {duration: 1m}}\n"
    )
    _, args = parse_descheduler_config(text)
    [migration] = args["MigrationController"]
    assert isinstance(migration, MigrationControllerArgs)
    assert (migration.max_migrating_per_workload, migration.max_unavailable_per_workload) == ("20%", 2)
    assert migration.object_limiters == {
        "workload": {"duration": "10m", "maxMigrating": 2, "burst": 2},
        "namespace": {"duration": "1m"},
    }
    assert migration.skip_eviction_gates == ["PVC", "MaxMigratingGlobally"]


@pytest.mark.parametrize(
    ("arbitration", "want"),
    [
        (None, 0.5),  # Koordinator's default: enabled, every 500ms
        ({"enabled": True}, 0.5),
        ({"enabled": True, "interval": "2s"}, 2.0),
        ({"enabled": False, "interval": "2s"}, None),
        ({"interval": "2s"}, None),  # enabled is false unless given
    ],
)
def test_arbitration_interval(arbitration: dict[str, object] | None, want: float | None) -> None:
    assert MigrationControllerArgs(arbitration_args=arbitration).arbitration_interval() == want
