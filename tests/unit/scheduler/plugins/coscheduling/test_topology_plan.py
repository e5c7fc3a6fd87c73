"""Tables for the network topology tree and the gang planner (Koordinator ``networktopology/tree.go`` and
``coscheduling/core/network_topology_solver.go``), hand-computed."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from apis.scheduling.network_topology import (
    ClusterNetworkTopologyRecord,
    GangTopologySpec,
    GatherRule,
    TopologyLayer,
)
from koord_scheduler.plugins.coscheduling import topology_plan as plan
from koord_scheduler.plugins.coscheduling.topology_tree import (
    TopologySpecError,
    TopologyTree,
    TreeNode,
    build_tree,
    order_layers,
)

SPINE, BLOCK, NODE = "SpineLayer", "BlockLayer", "NodeTopologyLayer"
LAYERS = (
    TopologyLayer(NODE, BLOCK, ()),
    TopologyLayer(BLOCK, SPINE, ("block",)),
    TopologyLayer(SPINE, "ClusterTopologyLayer", ("spine", "spine-alt")),
)


def labels(spine: str = "", block: str = "") -> dict[str, str]:
    out = {}
    if spine:
        out["spine"] = spine
    if block:
        out["block"] = block
    return out


def shape(node: TreeNode) -> object:
    """The tree as nested dicts: {"layer/name": children...}, leaves as "NodeTopologyLayer/name"."""
    if not node.children:
        return f"{node.layer}/{node.name}"
    return {f"{c.layer}/{c.name}": shape(c) for c in node.children.values()}


def tree_of(nodes: Mapping[str, dict[str, str]]) -> TopologyTree:
    return build_tree(ClusterNetworkTopologyRecord("default", LAYERS), nodes.items())


# ----- order_layers -----


@pytest.mark.parametrize(
    ("layers", "want"),
    [
        pytest.param(LAYERS, (SPINE, BLOCK, NODE), id="listed-bottom-up-ordered-top-down"),
        pytest.param(tuple(reversed(LAYERS)), (SPINE, BLOCK, NODE), id="any-listing-order"),
        pytest.param((TopologyLayer(NODE, "", ()),), (NODE,), id="node-layer-alone"),
    ],
)
def test_order_layers(layers: tuple[TopologyLayer, ...], want: tuple[str, ...]) -> None:
    assert tuple(layer.name for layer in order_layers(layers)) == want


@pytest.mark.parametrize(
    ("layers", "want"),
    [
        pytest.param((TopologyLayer(BLOCK, SPINE, ("b",)),), "'NodeTopologyLayer' not found", id="no-node-layer"),
        pytest.param(
            (TopologyLayer(NODE, BLOCK, ()), TopologyLayer(SPINE, "", ("s",))),
            "'BlockLayer' not found",
            id="parent-chain-broken",
        ),
    ],
)
def test_order_layers_refuses_a_broken_chain(layers: tuple[TopologyLayer, ...], want: str) -> None:
    with pytest.raises(TopologySpecError, match=want):
        order_layers(layers)


# ----- build_tree -----


@pytest.mark.parametrize(
    ("nodes", "want_shape", "want_skipped"),
    [
        pytest.param(
            {"n1": labels("s1", "b1"), "n2": labels("s1", "b2"), "n3": labels("s2", "b3")},
            {
                "SpineLayer/s1": {
                    "BlockLayer/b1": {"NodeTopologyLayer/n1": "NodeTopologyLayer/n1"},
                    "BlockLayer/b2": {"NodeTopologyLayer/n2": "NodeTopologyLayer/n2"},
                },
                "SpineLayer/s2": {"BlockLayer/b3": {"NodeTopologyLayer/n3": "NodeTopologyLayer/n3"}},
            },
            [],
            id="three-levels",
        ),
        pytest.param(
            {"n1": labels("s1", "")},
            {"SpineLayer/s1": {"BlockLayer/n1": {"NodeTopologyLayer/n1": "NodeTopologyLayer/n1"}}},
            [],
            id="missing-direct-parent-gets-virtual-member-named-after-node",
        ),
        pytest.param(
            {"n1": labels("", "b1"), "n2": labels("s1", "b1")},
            {"SpineLayer/s1": {"BlockLayer/b1": {"NodeTopologyLayer/n2": "NodeTopologyLayer/n2"}}},
            ["n1"],
            id="missing-upper-layer-leaves-node-out",
        ),
        pytest.param(
            {"n1": {"spine-alt": "s9", "block": "b1"}},
            {"SpineLayer/s9": {"BlockLayer/b1": {"NodeTopologyLayer/n1": "NodeTopologyLayer/n1"}}},
            [],
            id="second-label-key-used-when-first-absent",
        ),
        pytest.param(
            {"n1": labels("s1", "b1"), "n2": labels("s2", "b1")},
            {
                "SpineLayer/s1": {
                    "BlockLayer/b1": {
                        "NodeTopologyLayer/n1": "NodeTopologyLayer/n1",
                        "NodeTopologyLayer/n2": "NodeTopologyLayer/n2",
                    }
                },
                "SpineLayer/s2": "SpineLayer/s2",
            },
            [],
            id="same-member-name-under-two-parents-is-one-member-koordinator-quirk",
        ),
    ],
)
def test_build_tree(nodes: dict[str, dict[str, str]], want_shape: object, want_skipped: list[str]) -> None:
    tree = tree_of(nodes)
    assert shape(tree.root) == want_shape
    assert sorted(tree.skipped) == want_skipped
    assert tree.layer_index == {SPINE: 0, BLOCK: 1, NODE: 2}
    assert tree.is_ancestor(SPINE, BLOCK) and not tree.is_ancestor(NODE, BLOCK)


def test_copy_resets_evaluation_and_shares_nothing() -> None:
    tree = tree_of({"n1": labels("s1", "b1")})
    tree.leaves["n1"].offer_slot = 3
    copied = tree.copy()
    assert copied.leaves["n1"].offer_slot == 0
    assert copied.leaves["n1"] is not tree.leaves["n1"]
    assert copied.leaves["n1"].parent is copied.root.children["s1"].children["b1"]


# ----- requirements -----


@pytest.mark.parametrize(
    ("rules", "want_layer", "want_multiples"),
    [
        pytest.param((), "", {}, id="no-rules-whole-cluster"),
        pytest.param((GatherRule(BLOCK, "MustGather"),), BLOCK, {}, id="must-gather-block"),
        pytest.param(
            (GatherRule(SPINE, "MustGather"), GatherRule(BLOCK, "MustGather")),
            BLOCK,
            {},
            id="deepest-must-gather-wins",
        ),
        pytest.param(
            (GatherRule(SPINE, "MustGather"), GatherRule(BLOCK, "PreferGather", 2)),
            SPINE,
            {BLOCK: 2},
            id="prefer-gather-is-not-required-multiple-kept",
        ),
        pytest.param((GatherRule(BLOCK, "MustGather", 1),), BLOCK, {}, id="multiple-of-one-ignored"),
    ],
)
def test_requirements(rules: tuple[GatherRule, ...], want_layer: str, want_multiples: dict[str, int]) -> None:
    tree = tree_of({"n1": labels("s1", "b1")})
    got = plan.requirements(GangTopologySpec(rules), tree, 4)
    assert got == plan.JobRequirements(want_layer, 4, want_multiples)


# ----- place_pods -----

CLUSTER = {
    # spine s1: b1 = a0 a1 a2, b2 = b0 b1 b2 b3; spine s2: b3 = c0 c1
    **{f"a{i}": labels("s1", "b1") for i in range(3)},
    **{f"b{i}": labels("s1", "b2") for i in range(4)},
    **{f"c{i}": labels("s2", "b3") for i in range(2)},
}


def pods(n: int) -> list[tuple[str, str]]:
    return [(f"default/p{i}", f"p{i}") for i in range(n)]


@pytest.mark.parametrize(
    ("slots", "rules", "n", "want"),
    [
        pytest.param(
            dict.fromkeys(CLUSTER, 1),
            (GatherRule(BLOCK, "MustGather"),),
            4,
            {"default/p0": "b0", "default/p1": "b1", "default/p2": "b2", "default/p3": "b3"},
            id="only-block-b2-holds-four",
        ),
        pytest.param(
            dict.fromkeys(CLUSTER, 1),
            (GatherRule(BLOCK, "MustGather"),),
            2,
            {"default/p0": "c0", "default/p1": "c1"},
            id="smallest-block-that-fits-wins",
        ),
        pytest.param(
            {**dict.fromkeys(CLUSTER, 0), "a0": 2, "a1": 1, "b0": 1},
            (GatherRule(SPINE, "MustGather"),),
            3,
            {"default/p0": "a0", "default/p1": "a0", "default/p2": "a1"},
            id="largest-offer-filled-first-inside-candidate",
        ),
        pytest.param(
            {**dict.fromkeys(CLUSTER, 0), "a0": 1, "b0": 1, "c0": 1},
            (),
            3,
            {"default/p0": "a0", "default/p1": "b0", "default/p2": "c0"},
            id="no-rule-spreads-over-cluster",
        ),
        pytest.param(
            {**dict.fromkeys(CLUSTER, 1), "a0": 2},
            (GatherRule(BLOCK, "MustGather", 2),),
            4,
            {"default/p0": "a0", "default/p1": "a0", "default/p2": "a1", "default/p3": "a2"},
            id="pod-count-multiple-block-of-two",
        ),
        pytest.param(
            dict.fromkeys(CLUSTER, 2),
            (GatherRule(NODE, "MustGather"),),
            2,
            {"default/p0": "c0", "default/p1": "c0"},
            id="must-gather-on-node-layer-one-node-under-the-tightest-block",
        ),
    ],
)
def test_place_pods(slots: dict[str, int], rules: tuple[GatherRule, ...], n: int, want: dict[str, str]) -> None:
    tree = tree_of(CLUSTER)
    req = plan.requirements(GangTopologySpec(rules), tree, n)
    assert plan.place_pods(tree.copy(), pods(n), slots, req) == want


def test_pods_fill_nodes_in_name_order_not_key_order() -> None:
    tree = tree_of(CLUSTER)
    req = plan.requirements(GangTopologySpec((GatherRule(BLOCK, "MustGather"),)), tree, 2)
    slots = {**dict.fromkeys(CLUSTER, 0), "c0": 1, "c1": 1}
    names = [("ns-a/zz", "b-pod"), ("ns-z/aa", "a-pod")]
    assert plan.place_pods(tree.copy(), names, slots, req) == {"ns-z/aa": "c0", "ns-a/zz": "c1"}


def test_selector_pods_pull_the_gang_to_their_block() -> None:
    tree = tree_of(CLUSTER)
    req = plan.requirements(GangTopologySpec((GatherRule(BLOCK, "MustGather"),)), tree, 2)
    got = plan.place_pods(tree.copy(), pods(2), dict.fromkeys(CLUSTER, 1), req, existing_pods={"b3": 1})
    assert got == {"default/p0": "b3", "default/p1": "b0"}


@pytest.mark.parametrize(
    ("slots", "rules", "failures", "want"),
    [
        pytest.param(
            dict.fromkeys(CLUSTER, 1),
            (GatherRule(BLOCK, "MustGather"),),
            {},
            "no candidate topology nodes can accommodate job, desiredOfferSlot: 5, "
            "topology topologyNode BlockLayer/b1: 3;topology topologyNode BlockLayer/b2: 4;"
            "topology topologyNode BlockLayer/b3: 2, 0/9 nodes are available:",
            id="no-block-holds-five",
        ),
        pytest.param(
            {**dict.fromkeys(CLUSTER, 0), "a0": 1},
            (GatherRule(SPINE, "MustGather"),),
            {n: ("Insufficient cpu",) for n in CLUSTER if n != "a0"},
            "no candidate topology nodes can accommodate job, desiredOfferSlot: 5, "
            "topology topologyNode SpineLayer/s1: 1;topology topologyNode SpineLayer/s2: 0, "
            "0/9 nodes are available: 8 Insufficient cpu.",
            id="filter-reasons-as-fit-error",
        ),
        pytest.param(
            dict.fromkeys(CLUSTER, 1),
            (GatherRule(BLOCK, "MustGather", 3),),
            {},
            "no candidate topology nodes can accommodate job, desiredOfferSlot: 5, "
            "topology topologyNode BlockLayer/b1: 3;topology topologyNode BlockLayer/b2: 3;"
            "topology topologyNode BlockLayer/b3: 0, 0/9 nodes are available:; "
            "podCountMultiple constraints: BlockLayer=3",
            id="pod-count-multiple-named",
        ),
    ],
)
def test_place_pods_failure_message(
    slots: dict[str, int], rules: tuple[GatherRule, ...], failures: dict[str, tuple[str, ...]], want: str
) -> None:
    tree = tree_of(CLUSTER)
    req = plan.requirements(GangTopologySpec(rules), tree, 5)
    assert plan.place_pods(tree.copy(), pods(5), slots, req, node_failures=failures) == plan.PlanFailure(want)


# ----- PreScore order -----


@pytest.mark.parametrize(
    ("candidates", "existing", "want"),
    [
        pytest.param(["a0", "b0", "c0"], {}, ["c0", "a0", "b0"], id="smaller-spine-offer-first-then-name"),
        pytest.param(["a0", "a1", "c0"], {}, ["c0", "a0", "a1"], id="smaller-block-offer-first"),
        pytest.param(
            ["a0", "b1", "c0"], {"b3": 2}, ["b1", "a0", "c0"], id="selector-pods-block-first-then-their-spine"
        ),
        pytest.param(["zz", "a0"], {}, ["a0", "zz"], id="node-outside-tree-last"),
    ],
)
def test_sort_nodes_by_topology(candidates: list[str], existing: dict[str, int], want: list[str]) -> None:
    assert plan.sort_nodes_by_topology(tree_of(CLUSTER).copy(), candidates, existing) == want
