"""CPU normalization and resource amplification: Koordinator's cpunormalization and resourceamplification
plugin test tables, transcribed as facts, and the noderesource decision that writes them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.configuration import parse_slo_config
from apis.configuration.normalization import (
    CPUNormalizationStrategy,
    ModelRatio,
    ResourceAmplificationStrategy,
)
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.scheduler.controllers.noderesource import decide_node_resources, normalized
from koord_scheduler.scheduler.controllers.normalization import (
    CPUBasicInfo,
    amplification_ratios,
    decide_cpu_normalization,
    format_amplification,
    model_ratio,
    normalization_needs_sync,
    normalization_ratio,
)
from tests.builders import make_node

FULL = ModelRatio(base=1.5, hyper_thread=1.0, turbo=1.65, hyper_thread_turbo=1.1)
XXX = '{"cpuModel": "XXX", "hyperThreadEnabled": true, "turboEnabled": true}'
ENABLED = "node.koordinator.sh/cpu-normalization-enabled"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"
AMPLIFICATION = "node.koordinator.sh/resource-amplification-ratio"


@pytest.mark.parametrize(
    ("info", "models", "want"),
    [
        pytest.param(CPUBasicInfo("CPU XXX"), {}, None, id="nil-model"),
        pytest.param(CPUBasicInfo("CPU XXX"), {"CPU YYY": ModelRatio(base=1.0)}, None, id="no-ratio-for-model"),
        pytest.param(
            CPUBasicInfo("CPU XXX", True, True),
            {"CPU XXX": ModelRatio(base=1.5)},
            None,
            id="missing-ratio-for-turbo-and-ht-on",
        ),
        pytest.param(CPUBasicInfo("CPU XXX", True, True), {"CPU XXX": FULL}, 1.1, id="got-ratio-for-turbo-and-ht-on"),
        pytest.param(CPUBasicInfo("CPU XXX", True, False), {"CPU XXX": FULL}, 1.0, id="got-ratio-for-ht-on"),
        pytest.param(CPUBasicInfo("CPU XXX", False, True), {"CPU XXX": FULL}, 1.65, id="got-ratio-for-turbo-on"),
        pytest.param(CPUBasicInfo("CPU XXX"), {"CPU XXX": FULL}, 1.5, id="got-ratio-for-basic-setting"),
        pytest.param(CPUBasicInfo("CPU XXX"), {"CPU XXX": ModelRatio()}, None, id="missing-ratio-for-basic-setting"),
    ],
)
def test_ratio_from_model(info: CPUBasicInfo, models: dict[str, ModelRatio], want: float | None) -> None:
    strategy = CPUNormalizationStrategy(True, None, models)
    if want is None:
        with pytest.raises(ValueError):
            model_ratio(info, strategy)
    else:
        assert model_ratio(info, strategy) == want


@pytest.mark.parametrize(
    ("default", "models", "want"),
    [
        pytest.param(None, {}, None, id="nil-model-and-nil-default-ratio"),
        pytest.param(2.5, {}, 2.5, id="nil-model-and-valid-default-ratio"),
        pytest.param(2.5, {"CPU XXX": FULL}, 1.5, id="model-takes-precedence-over-the-default-ratio"),
        pytest.param(2.5, {"CPU XXX": ModelRatio()}, 2.5, id="use-the-default-ratio-with-invalid-model"),
    ],
)
def test_ratio_with_default(default: float | None, models: dict[str, ModelRatio], want: float | None) -> None:
    strategy = CPUNormalizationStrategy(True, default, models)
    if want is None:
        with pytest.raises(ValueError):
            normalization_ratio(CPUBasicInfo("CPU XXX"), strategy)
    else:
        assert normalization_ratio(CPUBasicInfo("CPU XXX"), strategy) == want


@pytest.mark.parametrize(
    ("strategy", "labels", "info", "want"),
    [
        pytest.param(CPUNormalizationStrategy(), {ENABLED: "{]"}, XXX, None, id="failed-to-get-node-config"),
        pytest.param(CPUNormalizationStrategy(False), {}, XXX, "1.00", id="node-strategy-is-disabled"),
        pytest.param(CPUNormalizationStrategy(True), {}, None, None, id="failed-to-get-nrt"),
        pytest.param(CPUNormalizationStrategy(True), {}, "{]", None, id="failed-to-parse-cpu-basic-info"),
        pytest.param(
            CPUNormalizationStrategy(True, None, {"XXX": ModelRatio(base=1.0)}), {}, XXX, None, id="failed-to-get-ratio"
        ),
        pytest.param(
            CPUNormalizationStrategy(True, None, {"XXX": ModelRatio(hyper_thread_turbo=10)}),
            {},
            XXX,
            None,
            id="failed-to-validate-ratio",
        ),
        pytest.param(CPUNormalizationStrategy(True, None, {"XXX": FULL}), {}, XXX, "1.10", id="get-ratio-correctly"),
        pytest.param(
            CPUNormalizationStrategy(False, None, {"XXX": FULL}),
            {ENABLED: "true"},
            XXX,
            "1.10",
            id="strategy-disabled-but-node-enabled",
        ),
        pytest.param(
            CPUNormalizationStrategy(True, None, {"XXX": FULL}),
            {ENABLED: "false"},
            XXX,
            "1.00",
            id="strategy-enabled-but-node-disabled",
        ),
    ],
)
def test_decide_cpu_normalization(
    strategy: CPUNormalizationStrategy, labels: dict[str, str], info: str | None, want: str | None
) -> None:
    assert decide_cpu_normalization(strategy, labels, info).ratio == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param("invalid", "1.20", True, id="need-sync-when-failed-to-parse-old-ratio"),
        pytest.param("1.20", "invalid", False, id="abort-sync-when-failed-to-parse-new-ratio"),
        pytest.param(None, None, False, id="no-need-sync-when-both-have-no-ratio"),
        pytest.param(None, "1.20", True, id="need-sync-when-old-has-no-ratio"),
        pytest.param("1.20", None, True, id="need-sync-when-new-has-no-ratio"),
        pytest.param("1.20", "1.20", False, id="skip-sync-when-ratio-is-unchanged"),
        pytest.param("1.20", "1.205", False, id="skip-sync-when-ratios-are-close"),
        pytest.param("1.20", "1.50", True, id="need-sync-when-ratio-is-different"),
    ],
)
def test_normalization_needs_sync(old: str | None, new: str | None, want: bool) -> None:
    assert normalization_needs_sync(old, new) is want


@pytest.mark.parametrize(
    ("strategy", "normalization", "want"),
    [
        pytest.param(ResourceAmplificationStrategy(), 1.22, '{"cpu":1.22}', id="ratio-with-cpu-normalization"),
        pytest.param(ResourceAmplificationStrategy(), None, None, id="ratio-without-cpu-normalization"),
        pytest.param(
            ResourceAmplificationStrategy(True, {"cpu": 1.1, "memory": 2.1}),
            None,
            '{"cpu":1.10,"memory":2.10}',
            id="with-amplification-ratio",
        ),
        pytest.param(
            ResourceAmplificationStrategy(True, {"cpu": 1.5, "memory": 2.5}),
            1.2,
            '{"cpu":1.80,"memory":2.50}',
            id="with-both-cpu-normalization-and-amplification",
        ),
        pytest.param(
            ResourceAmplificationStrategy(True, {"memory": 3.5}),
            1.5,
            '{"cpu":1.50,"memory":3.50}',
            id="cpu-normalization-and-amplification-memory-ratio",
        ),
        pytest.param(
            ResourceAmplificationStrategy(True, {"memory": 3.5, "storage": 1.8}),
            1.5,
            '{"cpu":1.50,"memory":3.50,"storage":1.80}',
            id="other-resource-type-ratio",
        ),
        pytest.param(
            ResourceAmplificationStrategy(True, {"cpu": 0.8, "memory": 3.5, "storage": 1.8}),
            1.5,
            '{"cpu":1.20,"memory":3.50,"storage":1.80}',
            id="final-cpu-ratio-above-1",
        ),
        pytest.param(
            ResourceAmplificationStrategy(True, {"cpu": 0.5, "memory": 3.5, "storage": 1.8}),
            1.5,
            ValueError,
            id="final-cpu-ratio-below-1-invalid",
        ),
        pytest.param(
            ResourceAmplificationStrategy(True, {"memory": 3.5, "storage": 0.8}),
            1.5,
            ValueError,
            id="one-resource-amplification-ratio-invalid",
        ),
        pytest.param(ResourceAmplificationStrategy(False, {"memory": 3.5}), None, None, id="disabled-strategy"),
    ],
)
def test_amplification(strategy: ResourceAmplificationStrategy, normalization: float | None, want: Any) -> None:
    if want is ValueError:
        with pytest.raises(ValueError):
            amplification_ratios(strategy, normalization)
        return
    ratios = amplification_ratios(strategy, normalization)
    assert (format_amplification(ratios) if ratios else None) == want


CONFIG_MAP = {
    "colocation-config": '{"enable": true}',
    "cpu-normalization-config": json.dumps(
        {"enable": True, "ratioModel": {"XXX": {"hyperThreadTurboEnabledRatio": 1.2}}}
    ),
    "resource-amplification-config": json.dumps({"enable": True, "resourceAmplificationRatio": {"memory": 1.5}}),
}


def decide(node_annotations: dict[str, str], config: dict[str, str] = CONFIG_MAP, **kwargs: Any) -> Any:
    parsed, problems = parse_slo_config(config)
    assert problems == []
    builder = make_node("n").capacity(cpu="10", memory="40Gi")
    for key, value in node_annotations.items():
        builder.annotation(key, value)
    metric = NodeMetricRecord(
        "n", update_time=1000.0, has_node_metric=True, system_usage={"cpu": 500, "memory": 2 << 30}
    )
    return decide_node_resources(
        builder.build(), [], metric, parsed, now=1010.0, last_sync=None, cpu_basic_info=XXX, **kwargs
    )


def test_one_write_carries_ratios_and_normalized_batch_cpu() -> None:
    write = decide({}).write
    assert write.path == "/api/v1/nodes/n/status"
    assert write.body["metadata"] == {"annotations": {RATIO: "1.20", AMPLIFICATION: '{"cpu":1.20,"memory":1.50}'}}
    # batch-cpu 10000 - 4000 - 500 = 5500, times 1.2
    assert write.body["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "6600"


def test_annotations_alone_are_written_without_touching_status() -> None:
    status = {
        "cpu": "10",
        "memory": "40Gi",
        "kubernetes.io/batch-cpu": "6600",
        "kubernetes.io/batch-memory": str(24 << 30),
        "kubernetes.io/mid-cpu": "0",
        "kubernetes.io/mid-memory": "0",
    }
    parsed, _ = parse_slo_config(CONFIG_MAP)
    node = make_node("n").capacity(status).annotation(RATIO, "1.00").build()
    metric = NodeMetricRecord(
        "n", update_time=1000.0, has_node_metric=True, system_usage={"cpu": 500, "memory": 2 << 30}
    )
    write = decide_node_resources(node, [], metric, parsed, now=1010.0, last_sync=1000.0, cpu_basic_info=XXX).write
    assert write is not None and "status" not in write.body
    assert write.body["metadata"]["annotations"][RATIO] == "1.20"


def test_nothing_when_every_annotation_is_in_place() -> None:
    status = {
        "cpu": "10",
        "memory": "40Gi",
        "kubernetes.io/batch-cpu": "6600",
        "kubernetes.io/batch-memory": str(24 << 30),
        "kubernetes.io/mid-cpu": "0",
        "kubernetes.io/mid-memory": "0",
    }
    parsed, _ = parse_slo_config(CONFIG_MAP)
    node = (
        make_node("n")
        .capacity(status)
        .annotation(RATIO, "1.205")
        .annotation(AMPLIFICATION, '{"cpu":1.20,"memory":1.50}')
        .build()
    )
    metric = NodeMetricRecord(
        "n", update_time=1000.0, has_node_metric=True, system_usage={"cpu": 500, "memory": 2 << 30}
    )
    decision = decide_node_resources(node, [], metric, parsed, now=1010.0, last_sync=1000.0, cpu_basic_info=XXX)
    assert decision.write is None


def test_colocation_off_keeps_the_ratio_and_removes_amplification() -> None:
    config = {**CONFIG_MAP, "colocation-config": '{"enable": false}'}
    write = decide({RATIO: "1.20", AMPLIFICATION: '{"cpu":1.20}'}, config).write
    assert write.body["metadata"] == {"annotations": {AMPLIFICATION: None}}


def test_unknown_model_leaves_the_ratio_and_amplifies_by_the_current_one() -> None:
    config = {**CONFIG_MAP, "cpu-normalization-config": json.dumps({"enable": True, "ratioModel": {}})}
    write = decide({RATIO: "1.30"}, config).write
    assert RATIO not in write.body["metadata"]["annotations"]
    assert write.body["metadata"]["annotations"][AMPLIFICATION] == '{"cpu":1.30,"memory":1.50}'
    assert write.body["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "5500"  # no new ratio: not scaled


@pytest.mark.parametrize(("batch", "ratio", "want"), [(5500, 1.2, 6600), (1001, 1.15, 1152), (3, 1.5, 5)])
def test_normalized_batch_cpu_rounds_up(batch: int, ratio: float, want: int) -> None:
    assert normalized(batch, ratio) == want
