"""The ``slo-controller-config`` ConfigMap as a whole, and the NodeSLO spec rendered from it.

Keys handled (Koordinator ``apis/configuration``): ``colocation-config`` (cluster strategy inline at the
top level plus ``nodeConfigs``), and ``resource-threshold-config``, ``resource-qos-config``,
``cpu-burst-config``, ``system-config`` (``{clusterStrategy, nodeStrategies}``). In every node entry
``name`` and ``nodeSelector`` sit beside the strategy fields.

Merging follows Koordinator's ``MergeCfg`` (see :func:`~apis.configuration.colocation.overlay`): the
cluster strategy is overlaid on the defaults, each node entry on the merged cluster strategy, and a node
takes the **first** entry whose selector matches its labels (a missing selector matches no node, ``{}``
matches every node). Unknown fields are dropped, as Go's decoder drops them, and keys match fields
regardless of case, as Go matches them (:mod:`apis.core.gojson`).

Each key stands alone: a key that is not valid JSON, has a value of the wrong type or a value out of
range (:mod:`.ranges`) keeps its last good value and is reported as a :class:`KeyProblem`, while the
other keys take their new values. A missing key gets Koordinator's default; so does every key when the
ConfigMap does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from apis.configuration import ranges
from apis.configuration.colocation import (
    DEFAULT_COLOCATION_WIRE,
    ColocationStrategy,
    colocation_from_wire,
    node_overrides,
    overlay,
    strategy_wire,
)
from apis.configuration.normalization import (
    CPU_NORMALIZATION_KEY,
    DEFAULT_CPU_NORMALIZATION,
    DEFAULT_RESOURCE_AMPLIFICATION,
    HOST_APPLICATION_KEY,
    MAP_VALUES_REPLACED,
    RESOURCE_AMPLIFICATION_KEY,
    CPUNormalizationStrategyWire,
    HostApplicationCfgWire,
    ResourceAmplificationStrategyWire,
)
from apis.core import boundedjson
from apis.core.errors import ParseError
from apis.core.gojson import GoFields
from apis.core.parse import parse_label_selector
from apis.core.quantity import parse_quantity
from apis.core.selectors import label_selector_matches
from apis.core.types import LabelSelector
from apis.slo.common import WireModel
from apis.slo.nodeslo import CPUBurstStrategy, ResourceQOSStrategy, ResourceThresholdStrategy, SystemStrategy

CONFIG_MAP_NAME = "slo-controller-config"
DEFAULT_NAMESPACE = "koordinator-system"

COLOCATION_KEY = "colocation-config"
RESOURCE_THRESHOLD_KEY = "resource-threshold-config"
RESOURCE_QOS_KEY = "resource-qos-config"
CPU_BURST_KEY = "cpu-burst-config"
SYSTEM_KEY = "system-config"
KEYS = (
    COLOCATION_KEY,
    RESOURCE_THRESHOLD_KEY,
    RESOURCE_QOS_KEY,
    CPU_BURST_KEY,
    SYSTEM_KEY,
    HOST_APPLICATION_KEY,
    CPU_NORMALIZATION_KEY,
    RESOURCE_AMPLIFICATION_KEY,
)

ANNOTATION_NETWORK_BANDWIDTH = "node.koordinator.sh/network-bandwidth"

Json = dict[str, Any]


# Koordinator decodes these keys with Go's encoding/json: a key that differs only in case still matches.
_COLOCATION_FIELDS = GoFields.of(("nodeConfigs",))
_STRATEGY_KEY_FIELDS = GoFields.of(("clusterStrategy", "nodeStrategies"))
_PROFILE_FIELDS = GoFields.of(("name", "nodeSelector"))
_SELECTOR_FIELDS = GoFields.of(("matchLabels", "matchExpressions"))
_EXPRESSION_FIELDS = GoFields.of(("key", "operator", "values"))


@dataclass(frozen=True, slots=True)
class _Section:
    """How one key is read: its strategy model (None: the colocation strategy), its default (JSON), its
    rules, its NodeSLO field, and whether the cluster strategy is inline beside ``nodeConfigs`` (else
    ``{clusterStrategy, nodeStrategies}``)."""

    model: type[WireModel] | None
    default: Json
    rules: tuple[ranges.Rule, ...]
    spec_field: str
    inline: bool = False
    node_replaces: bool = False
    """A node entry's fields replace the cluster strategy instead of merging over it."""


_SECTIONS: dict[str, _Section] = {
    COLOCATION_KEY: _Section(None, DEFAULT_COLOCATION_WIRE, ranges.COLOCATION_RULES, "", inline=True),
    HOST_APPLICATION_KEY: _Section(HostApplicationCfgWire, {}, (), "hostApplications", inline=True, node_replaces=True),
    CPU_NORMALIZATION_KEY: _Section(CPUNormalizationStrategyWire, DEFAULT_CPU_NORMALIZATION, (), "", inline=True),
    RESOURCE_AMPLIFICATION_KEY: _Section(
        ResourceAmplificationStrategyWire, DEFAULT_RESOURCE_AMPLIFICATION, (), "", inline=True
    ),
    RESOURCE_THRESHOLD_KEY: _Section(
        ResourceThresholdStrategy,
        {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        ranges.THRESHOLD_RULES,
        "resourceUsedThresholdWithBE",
    ),
    RESOURCE_QOS_KEY: _Section(ResourceQOSStrategy, {}, ranges.QOS_RULES, "resourceQOSStrategy"),
    CPU_BURST_KEY: _Section(
        CPUBurstStrategy,
        {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        ranges.CPU_BURST_RULES,
        "cpuBurstStrategy",
    ),
    SYSTEM_KEY: _Section(SystemStrategy, {"totalNetworkBandwidth": "0"}, ranges.SYSTEM_RULES, "systemStrategy"),
}
"""Defaults are the controller's (``sloconfig.Default*``); the resource-qos default is ``{}`` because the
koordlet fills in the per-class defaults when it reads the NodeSLO."""


@dataclass(frozen=True, slots=True)
class NodeProfile:
    """One node entry: its name, selector and strategy already merged over the cluster strategy."""

    name: str
    selector: LabelSelector | None
    strategy: Json = field(hash=False)


@dataclass(frozen=True, slots=True)
class StrategyKey:
    """One key's value: the cluster strategy (defaults overlaid) and the node entries, in order."""

    cluster: Json = field(hash=False)
    nodes: tuple[NodeProfile, ...] = ()

    def for_node(self, labels: Mapping[str, str]) -> Json:
        """The strategy of the first entry matching ``labels``, else the cluster strategy."""
        for profile in self.nodes:
            if label_selector_matches(profile.selector, labels):
                return profile.strategy
        return self.cluster


@dataclass(frozen=True, slots=True)
class KeyProblem:
    """A key that could not be taken; ``message`` names the field (``clusterStrategy.x: ...``)."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass(frozen=True, slots=True)
class SloConfig:
    """The ConfigMap's current value. ``present``: the ConfigMap exists. ``texts``: each key's text as
    last taken (None: absent), so an unchanged key is not parsed again."""

    present: bool
    keys: Mapping[str, StrategyKey]
    texts: Mapping[str, str | None]

    def key(self, name: str) -> StrategyKey:
        return self.keys[name]


def _default_key(name: str) -> StrategyKey:
    return StrategyKey(dict(_SECTIONS[name].default))


def default_slo_config() -> SloConfig:
    """Every key at Koordinator's default: what a cluster without the ConfigMap runs with."""
    return SloConfig(False, {k: _default_key(k) for k in KEYS}, dict.fromkeys(KEYS))


def parse_slo_config(
    data: Mapping[str, str] | None, previous: SloConfig | None = None
) -> tuple[SloConfig, list[KeyProblem]]:
    """The config for ConfigMap ``data`` (None: no ConfigMap), and the keys that were refused.

    A refused key keeps its value from ``previous`` (the default when there is none)."""
    previous = previous or default_slo_config()
    if data is None:
        return default_slo_config(), []
    keys: dict[str, StrategyKey] = {}
    texts: dict[str, str | None] = {}
    problems: list[KeyProblem] = []
    for name in KEYS:
        text = data.get(name)
        if text is not None and text == previous.texts.get(name):
            keys[name], texts[name] = previous.keys[name], text
            continue
        if text is None:
            keys[name], texts[name] = _default_key(name), None
            continue
        try:
            keys[name] = _parse_key(name, text)
            texts[name] = text
        except Exception as exc:  # whatever odd input raises, the key keeps its last good value
            message = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            problems.append(KeyProblem(name, message))
            keys[name], texts[name] = previous.keys[name], previous.texts.get(name)
    return SloConfig(True, keys, texts), problems


def _parse_key(name: str, text: str) -> StrategyKey:
    try:
        raw = boundedjson.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    section = _SECTIONS[name]
    if section.inline:  # colocation, cpu-normalization, resource-amplification: the cluster strategy inline
        entries_field = "nodeConfigs"
        raw = _COLOCATION_FIELDS.fold(raw)
        cluster_raw = {k: v for k, v in raw.items() if k != entries_field}
        read: Callable[[Json], Json] = strategy_wire if section.model is None else _model_reader(section.model)
        cluster_path = ""
    else:
        assert section.model is not None
        entries_field = "nodeStrategies"
        raw = _STRATEGY_KEY_FIELDS.fold(raw)
        cluster_raw = raw.get("clusterStrategy") or {}
        if not isinstance(cluster_raw, dict):
            raise ValueError("clusterStrategy: expected an object")
        read = _model_reader(section.model)
        cluster_path = "clusterStrategy."
    cluster = overlay(section.default, _read(read, cluster_raw, cluster_path))
    _check(cluster, section.rules, cluster_path)
    entries = raw.get(entries_field) or []
    if not isinstance(entries, list):
        raise ValueError(f"{entries_field}: expected a list")
    profiles = tuple(
        _profile(
            entry,
            f"{entries_field}[{i}]",
            cluster={} if section.node_replaces else cluster,
            read=read,
            rules=section.rules,
        )
        for i, entry in enumerate(entries)
    )
    return StrategyKey(cluster, profiles)


def _profile(
    entry: Any, path: str, *, cluster: Json, read: Callable[[Json], Json], rules: Sequence[ranges.Rule]
) -> NodeProfile:
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: expected an object")
    entry = _PROFILE_FIELDS.fold(entry)
    name = entry.get("name") or ""
    if not isinstance(name, str):
        raise ValueError(f"{path}.name: expected a string")
    try:
        selector = parse_label_selector(_selector_as_go(entry.get("nodeSelector")))
    except ParseError as exc:
        raise ValueError(f"{path}.nodeSelector: {exc}") from None
    fields = {k: v for k, v in entry.items() if k not in ("name", "nodeSelector")}
    patch = _read(read, fields, f"{path}.")
    merged = overlay(cluster, patch)
    for key in MAP_VALUES_REPLACED:  # Go decodes each map value whole: a node's model entry replaces the cluster's
        if isinstance(patch.get(key), dict):
            merged[key] = {**cluster.get(key, {}), **patch[key]}
    _check(merged, rules, f"{path}.")
    return NodeProfile(name, selector, merged)


def _selector_as_go(raw: Any) -> Any:
    """A ``metav1.LabelSelector`` with its keys matched as Go matches them."""
    if not isinstance(raw, dict):
        return raw
    selector = _SELECTOR_FIELDS.fold(raw)
    expressions = selector.get("matchExpressions")
    if isinstance(expressions, list):
        selector["matchExpressions"] = [_EXPRESSION_FIELDS.fold(e) if isinstance(e, dict) else e for e in expressions]
    return selector


def _model_reader(model: type[WireModel]) -> Callable[[Json], Json]:
    def read(raw: Json) -> Json:
        try:
            return model.model_validate(raw).to_wire()
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err.get("loc", ()))
            raise ValueError(f"{loc}: {err.get('msg', 'invalid value')}") from None

    return read


def _read(read: Callable[[Json], Json], raw: Json, path: str) -> Json:
    try:
        return read(raw)
    except ValueError as exc:
        raise ValueError(f"{path}{exc}") from None


def _check(obj: Json, rules: Sequence[ranges.Rule], path: str) -> None:
    problems = ranges.check(obj, rules)
    if problems:
        raise ValueError("; ".join(f"{path}{p}" for p in problems))


# ----- per node -----


def render_node_slo_spec(config: SloConfig, labels: Mapping[str, str], annotations: Mapping[str, str]) -> Json:
    """The NodeSLO ``spec`` for a node with these labels and annotations (wire JSON), without
    ``extensions`` (the controller passes the existing NodeSLO's through).

    ``node.koordinator.sh/network-bandwidth``, when it is a valid quantity, replaces
    ``systemStrategy.totalNetworkBandwidth``."""
    spec: Json = {}
    for name in (RESOURCE_THRESHOLD_KEY, RESOURCE_QOS_KEY, CPU_BURST_KEY, SYSTEM_KEY):
        spec[_SECTIONS[name].spec_field] = config.key(name).for_node(labels)
    applications = config.key(HOST_APPLICATION_KEY).for_node(labels).get("applications")
    if applications:  # omitempty: no list, no field
        spec["hostApplications"] = applications
    bandwidth = annotations.get(ANNOTATION_NETWORK_BANDWIDTH)
    if bandwidth:
        try:
            parse_quantity(bandwidth)
        except ValueError:
            pass
        else:
            spec["systemStrategy"] = {**spec["systemStrategy"], "totalNetworkBandwidth": bandwidth}
    return spec


def resolve_colocation(
    config: SloConfig, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ColocationStrategy:
    """The node's colocation strategy: cluster, first matching ``nodeConfigs`` entry, then the node's
    annotation and reclaim-ratio labels (see :mod:`.colocation`). ``enable`` is true only when both the
    cluster strategy and the node's resolved strategy enable it, as Koordinator requires."""
    key = config.key(COLOCATION_KEY)
    merged = node_overrides(key.for_node(labels), labels, annotations)
    strategy = colocation_from_wire(merged)
    if strategy.enable and not key.cluster.get("enable"):
        strategy = colocation_from_wire({**merged, "enable": False})
    return strategy
