"""``cpu-normalization-config``, ``resource-amplification-config`` and ``host-application-config`` of
``slo-controller-config``.

Koordinator ``apis/configuration`` (``CPUNormalizationCfg``, ``ResourceAmplificationCfg``). Both hold their
cluster strategy inline at the top level plus ``nodeConfigs: [{name, nodeSelector, ...}]``, as
``colocation-config`` does, and a node takes the first entry whose selector matches its labels, merged
over the cluster strategy (:mod:`.sloconfig`).

- CPU normalization: ``{enable, defaultRatio, ratioModel: {<cpu model>: {baseRatio,
  hyperThreadEnabledRatio, turboEnabledRatio, hyperThreadTurboEnabledRatio}}}``; default
  ``{enable: false, ratioModel: {}}``.
- Resource amplification: ``{enable, resourceAmplificationRatio: {<resource>: <ratio>}}``; default
  ``{enable: false}``.

A node entry's ``ratioModel`` replaces the cluster's entry for each CPU model it names (Go decodes a map
value whole), where the other fields merge field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.slo.common import WireModel
from apis.slo.nodeslo import HostApplicationSpec

HOST_APPLICATION_KEY = "host-application-config"
CPU_NORMALIZATION_KEY = "cpu-normalization-config"
RESOURCE_AMPLIFICATION_KEY = "resource-amplification-config"

LABEL_CPU_NORMALIZATION_ENABLED = "node.koordinator.sh/cpu-normalization-enabled"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
ANNOTATION_RESOURCE_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"


class HostApplicationCfgWire(WireModel):
    """``host-application-config``: ``{applications: [...], nodeConfigs: [{name, nodeSelector, applications}]}``;
    a matching node entry's list replaces the cluster's (an entry without one gives none)."""

    applications: list[HostApplicationSpec] | None = None


class ModelRatioWire(WireModel):
    base_ratio: float | None = None
    hyper_thread_enabled_ratio: float | None = None
    turbo_enabled_ratio: float | None = None
    hyper_thread_turbo_enabled_ratio: float | None = None


class CPUNormalizationStrategyWire(WireModel):
    enable: bool | None = None
    default_ratio: float | None = None
    ratio_model: dict[str, ModelRatioWire] | None = None


class ResourceAmplificationStrategyWire(WireModel):
    enable: bool | None = None
    resource_amplification_ratio: dict[str, float] | None = None


DEFAULT_CPU_NORMALIZATION: dict[str, Any] = {"enable": False, "ratioModel": {}}
DEFAULT_RESOURCE_AMPLIFICATION: dict[str, Any] = {"enable": False}

MAP_VALUES_REPLACED = ("ratioModel",)
"""Fields whose map values a node entry replaces whole instead of merging."""


@dataclass(frozen=True, slots=True)
class ModelRatio:
    base: float | None = None
    hyper_thread: float | None = None
    turbo: float | None = None
    hyper_thread_turbo: float | None = None


@dataclass(frozen=True, slots=True)
class CPUNormalizationStrategy:
    enable: bool = False
    default_ratio: float | None = None
    ratio_model: Mapping[str, ModelRatio] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceAmplificationStrategy:
    enable: bool = False
    ratios: Mapping[str, float] = field(default_factory=dict)


def cpu_normalization_from_wire(wire: Mapping[str, Any]) -> CPUNormalizationStrategy:
    models: dict[str, ModelRatio] = {}
    for name, entry in (wire.get("ratioModel") or {}).items():
        ratios = entry or {}
        models[str(name)] = ModelRatio(
            ratios.get("baseRatio"),
            ratios.get("hyperThreadEnabledRatio"),
            ratios.get("turboEnabledRatio"),
            ratios.get("hyperThreadTurboEnabledRatio"),
        )
    default = wire.get("defaultRatio")
    return CPUNormalizationStrategy(bool(wire.get("enable")), None if default is None else float(default), models)


def resource_amplification_from_wire(wire: Mapping[str, Any]) -> ResourceAmplificationStrategy:
    ratios = {str(k): float(v) for k, v in (wire.get("resourceAmplificationRatio") or {}).items()}
    return ResourceAmplificationStrategy(bool(wire.get("enable")), ratios)
