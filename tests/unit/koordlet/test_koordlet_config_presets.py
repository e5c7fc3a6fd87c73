"""Every file in ``config/koordlet/`` goes through the loader koordlet itself uses, so presets cannot rot.

- ``feature-gates-*.yaml``: ``koordlet.app.cli._config_gates`` + ``FeatureGates.resolve`` (what ``main``
  does), and ``main --config`` end to end;
- ``*nodeslo*.yaml``: the states informer's ``set_node_slo`` (validate + merge over the defaults);
- the QoS preset and sample together switch every strategy on, and the flags they document exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from koordlet.app.cli import _config_gates, build_parser, main
from koordlet.app.flags import KoordletArgumentParser, UsageError
from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates, QOSManager, builtin_registry
from koordlet.qosmanager.plugins.allocatable import allocatable_evict_config
from koordlet.qosmanager.plugins.cpuburst.policy import policy_switches
from koordlet.qosmanager.plugins.cpuevict.policy import be_cpu_evict_config, cpu_evict_config
from koordlet.qosmanager.plugins.memoryevict.policy import memory_evict_config
from koordlet.statesinformer import StatesInformer
from koordlet.system import CgroupDriver, CgroupFS, CgroupVersion

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "config" / "koordlet"
GATE_PRESETS = sorted(CONFIG.glob("feature-gates-*.yaml"))
NODESLO_SAMPLES = sorted(CONFIG.glob("*nodeslo*.yaml"))
QOS_PRESET = CONFIG / "feature-gates-qos-all.yaml"
QOS_NODESLO = CONFIG / "sample-nodeslo-qos-all.yaml"
QOS_STRATEGIES = (
    "BECPUSuppress",
    "CPUBurst",
    "BECPUEvict",
    "BEMemoryEvict",
    "CPUEvict",
    "MemoryEvict",
    "CPUAllocatableEvict",
    "MemoryAllocatableEvict",
    "CgroupReconcile",
    "BatchResource",
)


def resolve(path: Path) -> FeatureGates:
    registry = builtin_registry()
    return FeatureGates.resolve({**KOORDLET_FEATURES, **registry.feature_specs()}, _config_gates(path))


def test_every_config_file_is_covered() -> None:
    files = {p for p in CONFIG.iterdir() if p.is_file()}
    assert files == set(GATE_PRESETS) | set(NODESLO_SAMPLES), "a config/koordlet file no test loads"
    assert QOS_PRESET in GATE_PRESETS and QOS_NODESLO in NODESLO_SAMPLES


@pytest.mark.parametrize("path", GATE_PRESETS, ids=lambda p: p.name)
def test_gate_preset_loads_through_the_config_loader(path: Path) -> None:
    gates = resolve(path)
    for name, value in (_config_gates(path) or {}).items():
        if name not in ("AllAlpha", "AllBeta"):
            assert gates.enabled(name) is value, name


@pytest.mark.parametrize("path", GATE_PRESETS, ids=lambda p: p.name)
def test_gate_preset_accepted_by_main(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A missing cgroup root is refused right after the gates resolve: reaching that message proves main
    # accepted the file, without starting the agent.
    code = main(["--node-name", "n", "--standalone", "--config", str(path), "--cgroup-root", "/nonexistent-cg"])
    err = capsys.readouterr().err
    assert code == 2 and err == "koordlet: --cgroup-root /nonexistent-cg: no such directory\n", err


def test_qos_preset_enables_every_qos_strategy() -> None:
    gates = resolve(QOS_PRESET)
    assert all(gates.enabled(name) for name in QOS_STRATEGIES)
    registry_names = {entry.name for entry in builtin_registry()}
    assert set(QOS_STRATEGIES) <= registry_names  # each is a real plugin, not just a gate


@pytest.mark.parametrize("path", NODESLO_SAMPLES, ids=lambda p: p.name)
def test_nodeslo_sample_loads_through_the_states_informer(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    assert data["kind"] == "NodeSLO"
    informer = StatesInformer("node-1", CgroupFS("/nonexistent", CgroupVersion.V1, CgroupDriver.CGROUPFS).layout)
    informer.set_node_slo(data)
    assert informer.node_slo.resource_used_threshold_with_be is not None


def test_qos_nodeslo_sample_turns_every_strategy_on() -> None:
    informer = StatesInformer("node-1", CgroupFS("/nonexistent", CgroupVersion.V1, CgroupDriver.CGROUPFS).layout)
    informer.set_node_slo(yaml.safe_load(QOS_NODESLO.read_text()))
    slo = informer.node_slo
    threshold = slo.resource_used_threshold_with_be
    assert threshold is not None and threshold.enable  # BECPUSuppress
    assert threshold.cpu_suppress_policy == "cfsQuota"
    assert memory_evict_config(threshold) is not None  # BEMemoryEvict / MemoryEvict
    assert be_cpu_evict_config(threshold, 1.0) is not None  # BECPUEvict
    assert cpu_evict_config(threshold, 1.0) is not None  # CPUEvict
    assert allocatable_evict_config(threshold, "cpu") is not None  # CPUAllocatableEvict
    assert allocatable_evict_config(threshold, "memory") is not None  # MemoryAllocatableEvict
    assert slo.cpu_burst_strategy is not None and policy_switches(slo.cpu_burst_strategy.policy) == (True, True)
    strategy = slo.resource_qos_strategy
    assert strategy is not None and strategy.be_class is not None  # CgroupReconcile memory QoS
    assert strategy.be_class.memory_qos is not None and strategy.be_class.memory_qos.enable


def _known(parser: KoordletArgumentParser, flag: str) -> bool:
    """Whether the parser defines ``flag`` (public API only: an unknown flag comes back as extra)."""
    try:
        _, extra = parser.parse_known_args([flag])
    except UsageError as err:
        return "expected one argument" in err.message
    return not extra


def test_documented_qos_flags_exist() -> None:
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    parser = build_parser()
    manager.init_flags(parser)
    preset_flags = set(re.findall(r"(--[a-z][a-z0-9-]+)", QOS_PRESET.read_text()))
    docs = (REPO / "docs" / "qos.md").read_text()
    known = {flag for flag in preset_flags | set(re.findall(r"(--[a-z][a-z0-9-]+)", docs)) if _known(parser, flag)}
    for flag in (
        "--cpu-suppress-interval-seconds",
        "--memory-evict-interval-seconds",
        "--memory-evict-cool-time-seconds",
        "--cpu-evict-interval-seconds",
        "--cpu-evict-cool-time-seconds",
        "--reconcile-interval-seconds",
        "--runtime-hooks-reconcile-interval",
        "--sysfs-root",
        "--qos-dry-run",
    ):
        assert flag in known and flag in preset_flags and f"`{flag}" in docs, flag
    assert preset_flags <= known | {"--config"}, preset_flags - known
