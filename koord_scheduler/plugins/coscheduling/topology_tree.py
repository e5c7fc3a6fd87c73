"""The cluster network topology as a tree of nodes' labels (Koordinator
``pkg/scheduler/frameworkext/networktopology/tree.go``): pure functions, no I/O.

The root is the whole cluster (``ClusterTopologyLayer``); below it one level per layer of the
ClusterNetworkTopology, ordered from the root down by following ``parentTopologyLayer`` up from
``NodeTopologyLayer``; the leaves are Kubernetes Nodes. A node's member of a layer is the value of the
first of the layer's label keys that the node carries. As Koordinator:

- a node without a value for the layer right above the nodes (typically the accelerator group) gets a
  virtual member named after the node, so every leaf sits at the same depth;
- a node without a value for any other layer is left out of the tree (it cannot be planned for);
- members are identified by (layer, name) across the tree: two members of a layer with the same name
  under different parents are one member, the first parent seen keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.scheduling.network_topology import LAYER_CLUSTER, LAYER_NODE, ClusterNetworkTopologyRecord, TopologyLayer


class TopologySpecError(ValueError):
    """A ClusterNetworkTopology whose layers do not chain up from ``NodeTopologyLayer``."""


@dataclass(slots=True, eq=False)
class TreeNode:
    """One member of one layer; the evaluation fields are filled per planning (on a copy)."""

    layer: str
    name: str
    parent: TreeNode | None = None
    children: dict[str, TreeNode] = field(default_factory=dict)
    offer_slot: int = 0
    """How many of the job's pods the nodes below can take."""
    score: int = 0
    existing_pod_num: int = 0
    """Pods below with the same network-topology selector as the job's."""


@dataclass(slots=True)
class TopologyTree:
    root: TreeNode
    layer_index: dict[str, int]
    """Layer -> depth from the root layer (0) down to the node layer."""
    leaves: dict[str, TreeNode]
    """Node name -> its leaf."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Node name -> why it is not in the tree."""

    def is_ancestor(self, a: str, b: str) -> bool:
        """Layer ``a`` is above layer ``b`` (an unknown layer counts as the topmost, as Koordinator's)."""
        return self.layer_index.get(a, 0) < self.layer_index.get(b, 0)

    def copy(self) -> TopologyTree:
        """A deep copy with the evaluation fields reset (one per planning)."""
        leaves: dict[str, TreeNode] = {}
        root = _copy(self.root, None, leaves)
        return TopologyTree(root, dict(self.layer_index), leaves, dict(self.skipped))


def _copy(origin: TreeNode, parent: TreeNode | None, leaves: dict[str, TreeNode]) -> TreeNode:
    node = TreeNode(origin.layer, origin.name, parent)
    for name, child in origin.children.items():
        node.children[name] = _copy(child, node, leaves)
    if node.layer == LAYER_NODE:
        leaves[node.name] = node
    return node


def order_layers(layers: tuple[TopologyLayer, ...]) -> tuple[TopologyLayer, ...]:
    """The layers from the root's child down to ``NodeTopologyLayer``, following each layer's parent.
    Raises :class:`TopologySpecError` when a layer on the way is missing (including the node layer)."""
    by_name: dict[str, TopologyLayer] = {}
    current: TopologyLayer | None = None
    for layer in layers:
        if layer.name == LAYER_NODE:
            current = layer
        by_name[layer.name] = layer
    ordered: list[TopologyLayer] = []
    want = LAYER_NODE
    for _ in layers:
        if current is None:
            raise TopologySpecError(f"topology layer {want!r} not found in spec")
        ordered.append(current)
        want = current.parent
        current = by_name.get(want)
    ordered.reverse()
    return tuple(ordered)


def build_tree(topology: ClusterNetworkTopologyRecord, nodes: Iterable[tuple[str, Mapping[str, str]]]) -> TopologyTree:
    """The tree of ``nodes`` (name, labels), in the given order. Raises :class:`TopologySpecError`."""
    layers = order_layers(topology.layers)
    root = TreeNode(LAYER_CLUSTER, "")
    index: dict[tuple[str, str], TreeNode] = {(LAYER_CLUSTER, ""): root}
    tree = TopologyTree(root, {layer.name: i for i, layer in enumerate(layers)}, {})
    for node_name, labels in nodes:
        path = _path(layers, node_name, labels)
        if isinstance(path, str):
            tree.skipped[node_name] = path
            continue
        parent = root
        for key in path:
            member = index.get(key)
            if member is None:
                member = TreeNode(key[0], key[1], parent)
                parent.children[key[1]] = member
                index[key] = member
                if key[0] == LAYER_NODE:
                    tree.leaves[key[1]] = member
            parent = member
    return tree


def _path(layers: tuple[TopologyLayer, ...], node_name: str, labels: Mapping[str, str]) -> list[tuple[str, str]] | str:
    """(layer, member) from the top layer down to the node, or why the node has none."""
    path: list[tuple[str, str]] = []
    for i, layer in enumerate(layers):
        if layer.name == LAYER_NODE:
            name = node_name
        else:
            name = next((labels[k] for k in layer.label_keys if labels.get(k)), "")
        if not name:
            if i != len(layers) - 2:
                return f"node {node_name!r} missing network topology layer {layer.name!r}"
            name = node_name  # a virtual member, so every leaf sits at the same depth
        path.append((layer.name, name))
    return path
