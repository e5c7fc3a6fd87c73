"""CPU normalization and resource amplification of one node: the annotations the ``noderesource``
controller's ``CPUNormalization`` and ``ResourceAmplification`` plugins write, as pure functions.

Koordinator ``pkg/slo-controller/noderesource/plugins/{cpunormalization,resourceamplification}``.

**CPU normalization** (``node.koordinator.sh/cpu-normalization-ratio``, two decimals): on when the node
label ``node.koordinator.sh/cpu-normalization-enabled`` says so, else when the node's strategy says so;
off writes ``"1.00"``. On, the ratio is the ``ratioModel`` entry of the CPU model the koordlet reported in
the NodeResourceTopology annotation ``node.koordinator.sh/cpu-basic-info``, picked by hyper-threading and
turbo (both: ``hyperThreadTurboEnabledRatio``; HT: ``hyperThreadEnabledRatio``; turbo:
``turboEnabledRatio``; neither: ``baseRatio``), else ``defaultRatio``; it must be within [1, 5]. When
something is missing (no basic info, no ratio, a bad label) the annotation is left as it is.

**Resource amplification** (``node.koordinator.sh/resource-amplification-ratio``, a JSON object of
ratios with two decimals): the strategy's ``resourceAmplificationRatio`` when enabled; the CPU ratio
(1 when unset) is multiplied by the node's CPU normalization ratio and kept when above 1. Every ratio
must be at least 1. No ratio, or an invalid one, removes the annotation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from apis.configuration.normalization import (
    LABEL_CPU_NORMALIZATION_ENABLED,
    CPUNormalizationStrategy,
    ResourceAmplificationStrategy,
)

MIN_RATIO, MAX_RATIO = 1.0, 5.0
DEFAULT_RATIO = "1.00"
RATIO_EPSILON = 0.01
"""Koordinator's ``NormalizationRatioDiffEpsilon``: closer ratios are not rewritten."""
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


@dataclass(frozen=True, slots=True)
class CPUBasicInfo:
    """``extension.CPUBasicInfo`` (what the controller reads of it)."""

    cpu_model: str = ""
    hyper_thread: bool = False
    turbo: bool = False


def parse_cpu_basic_info(text: str) -> CPUBasicInfo:
    """The annotation's JSON. Raises ``ValueError`` naming the field."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("cpu-basic-info: expected a JSON object")
    model, ht, turbo = raw.get("cpuModel", ""), raw.get("hyperThreadEnabled", False), raw.get("turboEnabled", False)
    if not isinstance(model, str):
        raise ValueError("cpu-basic-info.cpuModel: expected a string")
    for name, flag in (("hyperThreadEnabled", ht), ("turboEnabled", turbo)):
        if not isinstance(flag, bool):
            raise ValueError(f"cpu-basic-info.{name}: expected a boolean")
    return CPUBasicInfo(model, ht, turbo)


def go_parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``. Raises ``ValueError``."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise ValueError(f"invalid boolean {text!r}")


def model_ratio(info: CPUBasicInfo, strategy: CPUNormalizationStrategy) -> float:
    """The ``ratioModel`` ratio for the CPU. Raises ``ValueError`` when the model or the ratio is missing."""
    ratios = strategy.ratio_model.get(info.cpu_model)
    if ratios is None:
        raise ValueError(f"no ratio for CPU {info.cpu_model!r}")
    if info.hyper_thread and info.turbo:
        found, name = ratios.hyper_thread_turbo, "hyperThreadTurboEnabledRatio"
    elif info.hyper_thread:
        found, name = ratios.hyper_thread, "hyperThreadEnabledRatio"
    elif info.turbo:
        found, name = ratios.turbo, "turboEnabledRatio"
    else:
        found, name = ratios.base, "baseRatio"
    if found is None:
        raise ValueError(f"missing {name} for CPU {info.cpu_model!r}")
    return found


def normalization_ratio(info: CPUBasicInfo, strategy: CPUNormalizationStrategy) -> float:
    """The model's ratio, else ``defaultRatio``. Raises ``ValueError`` when neither applies."""
    try:
        return model_ratio(info, strategy)
    except ValueError:
        if strategy.default_ratio is not None:
            return strategy.default_ratio
        raise


def format_ratio(ratio: float) -> str:
    """Go's ``strconv.FormatFloat(ratio, 'f', 2, 64)``."""
    return f"{ratio:.2f}"


@dataclass(frozen=True, slots=True)
class RatioDecision:
    """``ratio``: the annotation to write (None: leave the node as it is); ``note``: why."""

    ratio: str | None
    note: str


def decide_cpu_normalization(
    strategy: CPUNormalizationStrategy, labels: Mapping[str, str], cpu_basic_info: str | None
) -> RatioDecision:
    """The node's ``cpu-normalization-ratio`` (see the module docstring)."""
    label = labels.get(LABEL_CPU_NORMALIZATION_ENABLED)
    try:
        enabled = strategy.enable if label is None else go_parse_bool(label)
    except ValueError as exc:
        return RatioDecision(None, f"label {LABEL_CPU_NORMALIZATION_ENABLED}: {exc}")
    if not enabled:
        return RatioDecision(DEFAULT_RATIO, "cpu normalization disabled")
    if not cpu_basic_info:
        return RatioDecision(None, "no cpu-basic-info on the NodeResourceTopology yet")
    try:
        info = parse_cpu_basic_info(cpu_basic_info)
        ratio = normalization_ratio(info, strategy)
    except ValueError as exc:
        return RatioDecision(None, f"cpu normalization: {exc}")
    if not MIN_RATIO <= ratio <= MAX_RATIO:
        return RatioDecision(None, f"cpu normalization ratio {ratio} outside [{MIN_RATIO}, {MAX_RATIO}]")
    return RatioDecision(format_ratio(ratio), f"cpu normalization ratio {format_ratio(ratio)} for {info.cpu_model!r}")


def parse_ratio(text: str | None) -> float | None:
    """A ratio annotation: None when absent. Raises ``ValueError`` for a non-number or a ratio <= 0."""
    if text is None:
        return None
    ratio = float(text)
    if not ratio > 0:
        raise ValueError(f"illegal cpu normalization ratio {text!r}")
    return ratio


def normalization_needs_sync(old: str | None, new: str | None) -> bool:
    """``NeedSyncMeta``: a ratio appears or goes, or moves by more than 0.01."""
    try:
        have = parse_ratio(old)
    except ValueError:
        return True
    try:
        want = parse_ratio(new)
    except ValueError:
        return False
    if have is None or want is None:
        return (have is None) != (want is None)
    return abs(have - want) > RATIO_EPSILON


def amplification_ratios(strategy: ResourceAmplificationStrategy, cpu_normalization: float | None) -> dict[str, float]:
    """The ratios to write (empty: none). Raises ``ValueError`` for a ratio below 1."""
    ratios = dict(strategy.ratios) if strategy.enable else {}
    cpu = ratios.get("cpu", 0.0)
    final = cpu if cpu > 0 else 1.0
    if cpu_normalization is not None and cpu_normalization > 0:
        final *= cpu_normalization
    if final > 1:
        ratios["cpu"] = final
    for name, ratio in ratios.items():
        if ratio < 1:
            raise ValueError(f"amplification ratio of {name} is {ratio}, below 1")
    return ratios


def format_amplification(ratios: Mapping[str, float]) -> str:
    """``json.Marshal(map[ResourceName]Ratio)``: sorted keys, each ratio with two decimals."""
    return "{" + ",".join(f"{json.dumps(name)}:{ratios[name]:.2f}" for name in sorted(ratios)) + "}"
