"""Every koordlet feature gate is built, not applicable on this node, or not implemented, and says so.

The gate list is Koordinator's, read from its Go source copied into ``tests/fixtures`` (see README.md there):
``pkg/features/koordlet_features.go`` and ``pkg/koordlet/runtimehooks/config.go`` at v1.8.0 and at
a7a1b76 (which adds three gates after the tag).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from koordlet.app.gates import METRIC, report_gates
from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates, FeatureSpec, Maturity, builtin_registry
from koordlet.qosmanager.gatetable import (
    GATE_TABLE,
    INTERFACE_TEXT,
    PYKOORD_GATES,
    GateState,
    Implementation,
    Interface,
    classify,
    implementation_of,
    refused_gates,
)
from tests.fixtures import KOORDINATOR_GATES_HEAD, KOORDINATOR_GATES_V180

DOCS = Path(__file__).resolve().parents[3] / "docs" / "qos.md"
_SPEC = re.compile(r"^\s*(\w+):\s*\{Default:\s*(true|false),\s*PreRelease:\s*featuregate\.(Alpha|Beta|GA)\}", re.M)


def koordinator_gates(folder: Path) -> dict[str, FeatureSpec]:
    """Gate name → (default, maturity) from the two Go maps of defaults."""
    out: dict[str, FeatureSpec] = {}
    for name in ("koordlet_features.go", "runtimehooks_config.go"):
        for gate, default, maturity in _SPEC.findall((folder / name).read_text()):
            out[gate] = FeatureSpec(default == "true", Maturity(maturity.upper()))
    return out


V180 = koordinator_gates(KOORDINATOR_GATES_V180)
HEAD = koordinator_gates(KOORDINATOR_GATES_HEAD)
ADDED_AFTER_V180 = {"PerCPUMetric", "NodeMetricPromMetrics", "OOMScoreAdj"}


def test_fixture_lists_are_koordinators():
    assert len(V180) == 36  # 26 koordlet gates + 10 runtime-hook gates at v1.8.0
    assert set(HEAD) - set(V180) == ADDED_AFTER_V180
    assert V180["RdtResctrl"] == FeatureSpec(True, Maturity.BETA)
    assert V180["GroupIdentity"] == FeatureSpec(True, Maturity.BETA)


def test_every_koordinator_gate_is_in_exactly_one_class():
    built = {n for n, e in GATE_TABLE.items() if e.implementation is Implementation.BUILT}
    missing = {n for n, e in GATE_TABLE.items() if e.implementation is Implementation.NOT_IMPLEMENTED}
    assert not built & missing
    assert built | missing == set(HEAD)
    assert set(V180) <= set(GATE_TABLE)


@pytest.mark.parametrize("name", sorted(HEAD))
def test_defaults_and_maturity_match_koordinator(name):
    assert KOORDLET_FEATURES[name] == HEAD[name]


def test_pykoord_only_gates_are_plugins_of_ours():
    assert set(PYKOORD_GATES) == {e.name for e in builtin_registry()} - set(HEAD)


def _default_text(spec: FeatureSpec) -> str:
    return f"{'on' if spec.default else 'off'} ({spec.maturity.value.capitalize()})"


def _status_text(name: str) -> str:
    entry = implementation_of(name)
    if entry.implementation is Implementation.NOT_IMPLEMENTED:
        return f"not implemented: {entry.what}"
    needs = "".join(f"; needs {INTERFACE_TEXT[i]}, else not applicable on this node" for i in entry.requires)
    return f"built: {entry.what}{needs}"


def expected_docs_rows() -> list[str]:
    rows = [f"| `{n}` | {_default_text(KOORDLET_FEATURES[n])} | {_status_text(n)} |" for n in GATE_TABLE]
    for name in PYKOORD_GATES:
        spec = builtin_registry().feature_specs()[name]
        rows.append(f"| `{name}` | none (pykoord's own gate: {_default_text(spec)}) | {_status_text(name)} |")
    return rows


def test_docs_table_matches_the_gate_table():
    """docs/qos.md has one gate table; it says for every gate what the code says (regenerate the rows
    from ``expected_docs_rows`` when a gate changes class)."""
    text = DOCS.read_text()
    header = "| Gate | Koordinator default | pykoord status |"
    assert text.count(header) == 1
    block = text.split(header, 1)[1].splitlines()[2:]
    rows = [line for line in block[: next(i for i, ln in enumerate(block) if not ln.startswith("|"))]]
    assert rows == expected_docs_rows()


def _gates(*overrides: dict[str, bool | str]) -> FeatureGates:
    return FeatureGates.resolve({**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, *overrides)


def test_explicitly_enabled_unimplemented_gates_are_refused_bulk_ones_are_not():
    assert refused_gates(_gates({"AuditEvents": True, "TerwayQoS": "true", "CPUBurst": True})) == [
        "AuditEvents",
        "TerwayQoS",
    ]
    assert refused_gates(_gates({"AuditEvents": False})) == []
    assert refused_gates(_gates({"AllAlpha": True, "AllBeta": True})) == []


def test_not_applicable_gates_are_reported_with_the_missing_interface_and_switched_off():
    registry = CollectorRegistry()
    probes = {Interface.NVML: lambda: "no GPUs found by NVML", Interface.PSI: lambda: None}
    gates = _gates({"Accelerators": True, "PSICollector": True})
    effective, report = report_gates(gates, probes, registry=registry, node="n1")
    rows = {r.name: r for r in report.rows}
    assert rows["Accelerators"].state is GateState.NOT_APPLICABLE
    assert rows["Accelerators"].detail == "no GPUs found by NVML"
    assert rows["PSICollector"].state is GateState.ACTIVE
    assert rows["AuditEvents"].state is GateState.OFF
    assert "feature gate Accelerators is on but not applicable on this node: no GPUs found by NVML" in report.lines()
    assert not effective.enabled("Accelerators") and effective.enabled("PSICollector")

    def sample(gate: str) -> float | None:
        return registry.get_sample_value(METRIC, {"node": "n1", "gate": gate})

    assert (sample("Accelerators"), sample("PSICollector"), sample("AuditEvents")) == (0.0, 1.0, 0.0)
    assert all(sample(name) is not None for name in GATE_TABLE)


def test_on_by_default_or_bulk_unimplemented_gates_are_listed_once():
    report = classify(_gates({"AllAlpha": True}), {})
    listed = [line for line in report.lines() if "not implemented" in line]
    assert len(listed) == 1
    want = sorted(n for n, e in GATE_TABLE.items() if e.implementation is Implementation.NOT_IMPLEMENTED)
    assert listed[0].endswith(", ".join(want))


def test_each_probe_runs_once_and_an_absent_probe_counts_as_present():
    calls: list[str] = []

    def probe() -> str | None:
        calls.append("x")
        return "missing"

    gates = _gates({"AllAlpha": True, "AllBeta": True})
    report = classify(gates, {Interface.NVML: probe})
    assert calls == ["x"]
    states = {r.name: r.state for r in report.rows}
    assert states["Accelerators"] is GateState.NOT_APPLICABLE
    assert states["PSICollector"] is GateState.ACTIVE


def test_every_interface_has_text():
    assert set(INTERFACE_TEXT) == set(Interface)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--feature-gates", "TerwayQoS=true,CPUBurst=true"], id="flag"),
        pytest.param(["-feature-gates=TerwayQoS=true"], id="go-spelling"),
        pytest.param(["--config", "CONFIG"], id="config-file"),
    ],
)
def test_cli_refuses_an_unimplemented_gate_by_name(argv, tmp_path, capsys):
    from koordlet.app.cli import main

    config = tmp_path / "gates.yaml"
    config.write_text("featureGates:\n  TerwayQoS: true\n")
    argv = [str(config) if a == "CONFIG" else a for a in argv]
    rc = main(["--node-name", "n", "--standalone", "--metrics-port", "-1", "--cgroup-root", "/nonexistent", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "not implemented" in err[0] and "TerwayQoS" in err[0], err


def test_cli_accepts_unimplemented_gates_in_bulk_and_off(tmp_path, capsys):
    """AllAlpha and an explicit false get past the gate check (the next check, the cgroup root, stops it)."""
    from koordlet.app.cli import main

    for gates in ("AllAlpha=true,AllBeta=true", "TerwayQoS=false"):
        rc = main(
            ["--node-name", "n", "--standalone", "--cgroup-root", str(tmp_path / "none"), "--feature-gates", gates]
        )
        err = capsys.readouterr().err
        assert rc == 2 and "--cgroup-root" in err and "not implemented" not in err, err
