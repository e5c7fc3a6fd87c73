"""NodeSLO thresholds are checked against Koordinator's ranges; a NodeSLO that breaks them is rejected
(the previous one stays in force, as when Koordinator's API server refuses the update), logged once."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.slo.nodeslo import NodeSLOSpec, default_node_slo_spec
from apis.slo.validation import (
    CPU_BURST_RANGES,
    IO_CFG_RANGES,
    QOS_CLASS_RANGES,
    QOS_CLASSES,
    THRESHOLD_RANGES,
    NodeSLOError,
    NodeSLOValidator,
    node_slo_spec_problems,
    parse_node_slo,
)

CRD = Path(__file__).resolve().parent / "fixtures" / "slo.koordinator.sh_nodeslos.yaml"
OUR_CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "slo.koordinator.sh_nodeslos.yaml"


def node_slo(name: str = "n1", **thresholds: Any) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": name},
        "spec": {"resourceUsedThresholdWithBE": {"enable": True, **thresholds}},
    }


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param(
            node_slo(cpuSuppressThresholdPercent=500)["spec"],
            ["spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: 500 is out of range: must be [0, 100]"],
            id="suppress-500",
        ),
        pytest.param(
            node_slo(cpuSuppressThresholdPercent=-5)["spec"],
            ["spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: -5 is out of range: must be [0, 100]"],
            id="suppress-negative",
        ),
        pytest.param(
            node_slo(memoryEvictThresholdPercent=101)["spec"],
            ["spec.resourceUsedThresholdWithBE.memoryEvictThresholdPercent: 101 is out of range: must be [0, 100]"],
            id="memory-evict-101",
        ),
        pytest.param(
            node_slo(memoryEvictThresholdPercent=70, memoryEvictLowerPercent=75)["spec"],
            [
                "spec.resourceUsedThresholdWithBE.memoryEvictLowerPercent: 75 must be below "
                "memoryEvictThresholdPercent (70)"
            ],
            id="memory-lower-above-threshold",
        ),
        pytest.param(
            {"cpuBurstStrategy": {"cpuBurstPercent": 20000}},
            ["spec.cpuBurstStrategy.cpuBurstPercent: 20000 is out of range: must be [0, 10000]"],
            id="burst-too-high",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"beClass": {"memoryQOS": {"wmarkMinAdj": -30}}}},
            ["spec.resourceQOSStrategy.beClass.memoryQOS.wmarkMinAdj: -30 is out of range: must be [-25, 50]"],
            id="wmark-min-adj",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"lsClass": {"blkioQOS": {"blocks": [{"ioCfg": {"ioWeightPercent": 0}}]}}}},
            [
                "spec.resourceQOSStrategy.lsClass.blkioQOS.blocks[0].ioCfg.ioWeightPercent: 0 is out of range: "
                "must be [1, 100]"
            ],
            id="io-weight-zero",
        ),
        pytest.param(node_slo(cpuSuppressThresholdPercent=100, memoryEvictThresholdPercent=0)["spec"], [], id="edges"),
        pytest.param(default_node_slo_spec().to_wire(), [], id="koordinator-defaults"),
    ],
)
def test_ranges(spec: dict[str, Any], want: list[str]) -> None:
    slo = {"metadata": {"name": "n1"}, "spec": spec}
    got = [str(p) for p in node_slo_spec_problems(parse_node_slo_unchecked(slo))]
    assert got == want


def parse_node_slo_unchecked(raw: dict[str, Any]) -> NodeSLOSpec:
    return NodeSLOSpec.model_validate(raw["spec"])


def test_wrong_type_names_the_field() -> None:
    with pytest.raises(NodeSLOError) as caught:
        parse_node_slo(node_slo(cpuSuppressThresholdPercent="high"))
    assert caught.value.name == "n1"
    assert [p.field for p in caught.value.problems] == ["spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent"]


def test_validator_keeps_the_previous_spec_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    validator = NodeSLOValidator()
    good = validator.accept(node_slo(cpuSuppressThresholdPercent=60))
    assert good is not None
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            kept = validator.accept(node_slo(cpuSuppressThresholdPercent=500))
            assert kept is good
    assert len(caplog.records) == 1
    assert "NodeSLO n1: spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: 500" in caplog.text
    assert validator.accept(node_slo("other", cpuSuppressThresholdPercent=-5)) is None  # nothing good yet
    fixed = validator.accept(node_slo(cpuSuppressThresholdPercent=70))
    assert fixed is not None and fixed is not good


def _crd_bounds(crd: Path = CRD) -> dict[str, tuple[int, int | None]]:
    doc = next(d for d in yaml.safe_load_all(crd.read_text()) if d)
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    out: dict[str, tuple[int, int | None]] = {}

    def walk(node: dict[str, Any], path: str) -> None:
        if "minimum" in node:
            out[path] = (int(node["minimum"]), int(node["maximum"]) if "maximum" in node else None)
        for key, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{key}")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    for key, child in spec.items():
        walk(child, key)
    return out


def test_ranges_are_koordinators_crd_bounds() -> None:
    ours: dict[str, tuple[int, int | None]] = {}
    ours.update({f"resourceUsedThresholdWithBE.{k}": v for k, v in THRESHOLD_RANGES.items()})
    ours.update({f"cpuBurstStrategy.{k}": v for k, v in CPU_BURST_RANGES.items()})
    for cls in QOS_CLASSES:
        for section, ranges in QOS_CLASS_RANGES.items():
            ours.update({f"resourceQOSStrategy.{cls}.{section}.{k}": v for k, v in ranges.items()})
        ours.update({f"resourceQOSStrategy.{cls}.blkioQOS.blocks[].ioCfg.{k}": v for k, v in IO_CFG_RANGES.items()})
    assert ours == _crd_bounds()


def test_our_crd_carries_koordinators_bounds() -> None:
    # The API server then refuses a NodeSLO out of range, as Koordinator's does; the koordlet's own
    # check (above) covers NodeSLOs that never went through this schema.
    assert _crd_bounds(OUR_CRD) == _crd_bounds(CRD)
