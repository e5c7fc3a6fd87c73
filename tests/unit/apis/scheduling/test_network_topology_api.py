"""ClusterNetworkTopology and the gang's network-topology annotations: parsing and errors."""

from __future__ import annotations

from typing import Any

import pytest

from apis.scheduling.network_topology import (
    ClusterNetworkTopologyRecord,
    GangTopologySpec,
    GatherRule,
    TopologyLayer,
    parse_cluster_network_topology,
    parse_network_topology_spec,
    pod_topology_index,
)


def topology(spec: Any, name: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_parse_cluster_network_topology() -> None:
    obj = topology(
        {
            "networkTopologySpec": [
                {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": ["b", "b2"]},
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
            ]
        }
    )
    assert parse_cluster_network_topology(obj) == ClusterNetworkTopologyRecord(
        "default",
        (TopologyLayer("BlockLayer", "SpineLayer", ("b", "b2")), TopologyLayer("NodeTopologyLayer", "BlockLayer", ())),
    )


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            topology(None), "ClusterNetworkTopology default: spec.networkTopologySpec is required", id="no-spec"
        ),
        pytest.param(
            topology({}), "ClusterNetworkTopology default: spec.networkTopologySpec: Field required", id="no-layers"
        ),
        pytest.param(
            topology({"networkTopologySpec": [{"labelKey": ["x"]}]}),
            "ClusterNetworkTopology default: spec.networkTopologySpec.0.topologyLayer: Field required",
            id="layer-without-name",
        ),
        pytest.param(
            topology({"networkTopologySpec": [{"topologyLayer": ""}]}),
            "spec.networkTopologySpec[0].topologyLayer must not be empty",
            id="empty-layer-name",
        ),
        pytest.param(topology({"networkTopologySpec": []}, name=""), "metadata.name is required", id="no-name"),
    ],
)
def test_bad_cluster_network_topology_names_object_and_field(obj: dict[str, Any], want: str) -> None:
    with pytest.raises(ValueError, match="ClusterNetworkTopology") as info:
        parse_cluster_network_topology(obj)
    assert want in str(info.value)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("", None, id="empty-means-none"),
        pytest.param("{}", GangTopologySpec(()), id="no-rules"),
        pytest.param(
            '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather","podCountMultiple":2}]}',
            GangTopologySpec((GatherRule("BlockLayer", "MustGather", 2),)),
            id="one-rule",
        ),
        pytest.param(
            '{"GatherStrategy":[{"Layer":"SpineLayer","Strategy":"PreferGather"}]}',
            GangTopologySpec((GatherRule("SpineLayer", "PreferGather", 0),)),
            id="keys-matched-as-go-does-case-insensitive",
        ),
    ],
)
def test_parse_network_topology_spec(text: str, want: GangTopologySpec | None) -> None:
    assert parse_network_topology_spec(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("{not json", "not JSON", id="not-json"),
        pytest.param("[1]", "want a JSON object", id="array"),
        pytest.param('{"gatherStrategy":{"layer":"x"}}', "gatherStrategy", id="rules-not-a-list"),
        pytest.param('{"gatherStrategy":[{"strategy":"MustGather"}]}', "gatherStrategy.0.layer", id="rule-no-layer"),
        pytest.param(
            '{"gatherStrategy":[{"layer":"L","strategy":"MustGather","podCountMultiple":-1}]}',
            "podCountMultiple: must not be negative",
            id="negative-multiple",
        ),
    ],
)
def test_bad_network_topology_spec_names_the_field(text: str, want: str) -> None:
    with pytest.raises(ValueError, match=want):
        parse_network_topology_spec(text)


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, -1, id="absent"),
        pytest.param({"gang.scheduling.koordinator.sh/network-topology-index": "3"}, 3, id="index"),
        pytest.param({"gang.scheduling.koordinator.sh/network-topology-index": "x"}, -1, id="not-a-number"),
    ],
)
def test_pod_topology_index(annotations: dict[str, str], want: int) -> None:
    assert pod_topology_index(annotations) == want
