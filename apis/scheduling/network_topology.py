"""``ClusterNetworkTopology`` (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped) and the gang's
network-topology annotations, wire-compatible with Koordinator's
``apis/scheduling/v1alpha1/cluster_network_topology_types.go`` and ``apis/extension/network_topology.go``.

The ClusterNetworkTopology names the layers of the data-centre network (e.g. spine > block > node) and,
for each, the node label keys that say which member of the layer a node belongs to. The scheduler reads
only the object named ``default`` (as Koordinator's tree manager). A gang asks for placement with the
annotation ``gang.scheduling.koordinator.sh/network-topology-spec``::

    {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]}

:class:`ClusterNetworkTopology` is the pydantic model (what the CRD is generated from);
:func:`parse_cluster_network_topology` and :func:`parse_network_topology_spec` give the lean records
the scheduler keeps, raising ``ValueError`` naming the object and field for bad input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError
from pydantic.config import JsonDict

from apis.core import boundedjson
from apis.scheduling.constants import API_VERSION
from apis.slo.common import ObjectMeta, WireModel

KIND = "ClusterNetworkTopology"
PLURAL = "clusternetworktopologies"
DEFAULT_NAME = "default"
"""The only ClusterNetworkTopology the scheduler reads."""

LAYER_CLUSTER = "ClusterTopologyLayer"
"""Built-in layer: the whole cluster (the root of the tree)."""
LAYER_NODE = "NodeTopologyLayer"
"""Built-in layer: one Kubernetes Node (the leaves of the tree)."""

ANNOTATION_NETWORK_TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
ANNOTATION_NETWORK_TOPOLOGY_INDEX = "gang.scheduling.koordinator.sh/network-topology-index"
"""A member's rank in the gang (e.g. the PyTorch rank): members are offered nodes in this order."""
ANNOTATION_NETWORK_TOPOLOGY_SELECTOR = "scheduling.koordinator.sh/network-topology-selector"
"""Pods with the same value are packed together by PreScore/Score."""

STRATEGY_MUST_GATHER = "MustGather"
STRATEGY_PREFER_GATHER = "PreferGather"

_INT32: JsonDict = {"format": "int32"}


class NetworkTopologyLayerSpec(WireModel):
    topology_layer: str
    """The type of the layer."""
    parent_topology_layer: str | None = None
    """The type of the parent layer of the layer."""
    label_key: list[str] | None = None
    """Keys of the Node label which represents the layer that the Node belongs to (the first set wins)."""


class ClusterNetworkTopologySpec(WireModel):
    network_topology_spec: list[NetworkTopologyLayerSpec]


class TopologyInfo(WireModel):
    topology_layer: str
    topology_name: str


class ClusterNetworkTopologyDetailStatus(WireModel):
    topology_info: TopologyInfo
    parent_topology_info: TopologyInfo | None = None
    child_topology_layer: str | None = None
    child_topology_names: list[str] | None = None
    node_num: int = Field(json_schema_extra=_INT32)


class ClusterNetworkTopologyStatus(WireModel):
    detail_status: list[ClusterNetworkTopologyDetailStatus] | None = None


class ClusterNetworkTopology(WireModel):
    api_version: str | None = API_VERSION
    kind: str | None = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterNetworkTopologySpec | None = None
    status: ClusterNetworkTopologyStatus | None = None


class NetworkTopologyGatherRule(WireModel):
    layer: str
    strategy: str
    pod_count_multiple: int = 0


class NetworkTopologySpec(WireModel):
    """The gang annotation's JSON."""

    gather_strategy: list[NetworkTopologyGatherRule] | None = None


# ----- lean records -----


@dataclass(frozen=True, slots=True)
class TopologyLayer:
    name: str
    parent: str
    label_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClusterNetworkTopologyRecord:
    """The layers as written (any order; :mod:`koord_scheduler.plugins.coscheduling.topology_tree` orders
    them from the root down and refuses a spec that does not chain up from ``NodeTopologyLayer``)."""

    name: str
    layers: tuple[TopologyLayer, ...]


@dataclass(frozen=True, slots=True)
class GatherRule:
    layer: str
    strategy: str
    pod_count_multiple: int = 0


@dataclass(frozen=True, slots=True)
class GangTopologySpec:
    rules: tuple[GatherRule, ...]


def parse_cluster_network_topology(obj: Mapping[str, Any]) -> ClusterNetworkTopologyRecord:
    """The lean view of a ClusterNetworkTopology; raises ``ValueError`` naming the object and field."""
    name = "?"
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if isinstance(meta, Mapping):
        name = str(meta.get("name") or "?")
    try:
        model = ClusterNetworkTopology.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{KIND} {name}: {where}: {first['msg']}") from None
    if not model.metadata.name:
        raise ValueError(f"{KIND}: metadata.name is required")
    if model.spec is None:
        raise ValueError(f"{KIND} {name}: spec.networkTopologySpec is required")
    layers = []
    for i, layer in enumerate(model.spec.network_topology_spec):
        if not layer.topology_layer:
            raise ValueError(f"{KIND} {name}: spec.networkTopologySpec[{i}].topologyLayer must not be empty")
        parent = layer.parent_topology_layer or ""
        layers.append(TopologyLayer(layer.topology_layer, parent, tuple(layer.label_key or ())))
    _refuse_cycles(name, layers)
    return ClusterNetworkTopologyRecord(model.metadata.name, tuple(layers))


def _refuse_cycles(name: str, layers: list[TopologyLayer]) -> None:
    """Following ``parentTopologyLayer`` from any layer must leave the spec (at ``ClusterTopologyLayer``);
    a chain that comes back to a layer it passed is a cycle, which Koordinator accepts silently (its tree
    then misses the cycle's layers). Raises ``ValueError`` naming the first layer of the cycle."""
    index = {layer.name: i for i, layer in enumerate(layers)}
    for start in layers:
        seen: list[str] = []
        current: str = start.name
        while current in index and current not in seen:
            seen.append(current)
            current = layers[index[current]].parent
        if current in seen:
            cycle = " -> ".join([*seen[seen.index(current) :], current])
            raise ValueError(
                f"{KIND} {name}: spec.networkTopologySpec[{index[current]}].parentTopologyLayer: "
                f"the layers' parents form a cycle ({cycle}); the chain must end at {LAYER_CLUSTER}"
            )


def parse_network_topology_spec(text: str) -> GangTopologySpec | None:
    """The gang annotation ``network-topology-spec``: None when empty, else the gather rules. Raises
    ``ValueError`` for text that is not the JSON object Koordinator decodes (the message names the field).
    Strategies other than MustGather and PreferGather are kept: Koordinator accepts and ignores them."""
    if not text.strip():
        return None
    try:
        raw = boundedjson.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg}): {text!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"want a JSON object with gatherStrategy, got {text!r}")
    try:
        model = NetworkTopologySpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}: {text!r}") from None
    rules = []
    for i, rule in enumerate(model.gather_strategy or ()):
        if rule.pod_count_multiple < 0:
            raise ValueError(f"gatherStrategy.{i}.podCountMultiple: must not be negative: {text!r}")
        rules.append(GatherRule(rule.layer, rule.strategy, rule.pod_count_multiple))
    return GangTopologySpec(tuple(rules))


def pod_topology_index(annotations: Mapping[str, str]) -> int:
    """The member's ``network-topology-index``, or -1 when absent or not an integer (as Koordinator's
    sort, which treats an unparsable index as none)."""
    text = annotations.get(ANNOTATION_NETWORK_TOPOLOGY_INDEX)
    if text is None:
        return -1
    try:
        return int(text)
    except ValueError:
        return -1
