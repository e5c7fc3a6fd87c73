"""Storage objects and pod volumes parse into lean records; bad input names the object and the field."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core.errors import ParseError
from apis.core.parse import parse_pod
from apis.core.storage import (
    ClaimRef,
    parse_claim,
    parse_csi_node,
    parse_storage_capacity,
    parse_storage_class,
    parse_volume,
)
from apis.core.types import PodVolume


def test_claim() -> None:
    claim = parse_claim(
        {
            "metadata": {
                "name": "data",
                "annotations": {
                    "volume.beta.kubernetes.io/storage-class": "beta",
                    "volume.kubernetes.io/selected-node": "n1",
                },
            },
            "spec": {
                "storageClassName": "ga",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1.5Gi"}},
            },
        }
    )
    assert (claim.key, claim.class_name, claim.request_bytes, claim.selected_node, claim.fully_bound) == (
        "default/data",
        "beta",
        1610612736,
        "n1",
        False,
    )


def test_volume() -> None:
    volume = parse_volume(
        {
            "metadata": {"name": "pv"},
            "spec": {
                "capacity": {"storage": "10G"},
                "gcePersistentDisk": {"pdName": "disk-1"},
                "claimRef": {"namespace": "ns", "name": "c", "uid": "u"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                },
            },
            "status": {"phase": "Bound"},
        }
    )
    assert (volume.capacity_bytes, volume.in_tree_source, volume.volume_handle, volume.claim_ref, volume.phase) == (
        10_000_000_000,
        "gcePersistentDisk",
        "disk-1",
        ClaimRef("ns", "c", "u"),
        "Bound",
    )
    assert volume.node_affinity is not None and len(volume.node_affinity) == 1


def test_class_csinode_capacity() -> None:
    sc = parse_storage_class(
        {
            "metadata": {"name": "fast"},
            "provisioner": "p",
            "volumeBindingMode": "Immediate",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "z", "values": ["a"]}]}],
        }
    )
    assert (sc.binding_mode, sc.allowed_topologies[0][0].values) == ("Immediate", ("a",))
    node = parse_csi_node(
        {
            "metadata": {
                "name": "n1",
                "annotations": {
                    "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs,kubernetes.io/gce-pd"
                },
            },
            "spec": {"drivers": [{"name": "d1", "allocatable": {"count": 3}}, {"name": "d2"}]},
        }
    )
    assert (node.drivers, dict(node.allocatable or {}), "kubernetes.io/gce-pd" in node.migrated_plugins) == (
        ("d1", "d2"),
        {"d1": 3},
        True,
    )
    cap = parse_storage_capacity(
        {
            "metadata": {"name": "c", "namespace": "kube-system"},
            "storageClassName": "fast",
            "capacity": "10Gi",
            "maximumVolumeSize": "1Gi",
        }
    )
    assert cap.volume_limit == 1073741824


@pytest.mark.parametrize(
    ("parse", "raw", "want"),
    [
        pytest.param(
            parse_claim,
            {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"resources": {"requests": {"storage": "lots"}}}},
            "PersistentVolumeClaim ns/c: spec.resources.requests.storage",
            id="claim-bad-size",
        ),
        pytest.param(
            parse_volume,
            {
                "metadata": {"name": "pv"},
                "spec": {
                    "nodeAffinity": {
                        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "Near"}]}]}
                    }
                },
            },
            "PersistentVolume pv: spec.nodeAffinity.required.nodeSelectorTerms[0]",
            id="volume-bad-operator",
        ),
        pytest.param(
            parse_csi_node,
            {"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "d", "allocatable": {"count": "three"}}]}},
            "CSINode n1: spec.drivers[0]",
            id="csinode-bad-count",
        ),
        pytest.param(
            parse_storage_class,
            {
                "metadata": {"name": "sc"},
                "allowedTopologies": [{"matchLabelExpressions": [{"key": "z", "values": "a"}]}],
            },
            "StorageClass sc: allowedTopologies[0].matchLabelExpressions[0]",
            id="class-values-not-a-list",
        ),
    ],
)
def test_errors_name_object_and_field(parse: Any, raw: dict[str, Any], want: str) -> None:
    with pytest.raises(ParseError) as err:
        parse(raw)
    assert str(err.value).startswith(want), str(err.value)


def test_pod_volumes() -> None:
    pod = parse_pod(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "image": "x"}],
                "volumes": [
                    {"name": "a", "persistentVolumeClaim": {"claimName": "c1", "readOnly": True}},
                    {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "cfg", "configMap": {"name": "x"}},
                    {"name": "r", "rbd": {"monitors": ["m1"], "image": "i"}},
                ],
            },
        }
    )
    assert pod.pvc_names == ("c1", "p-e")
    assert pod.volumes == (
        PodVolume("a", "persistentVolumeClaim", claim_name="c1", read_only=True),
        PodVolume("e", "ephemeral", claim_name="p-e"),
        PodVolume("r", "rbd", disk="rbd/i", monitors=("m1",)),
    )
    with pytest.raises(ParseError) as err:
        parse_pod(
            {
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c"}], "volumes": [{"name": "a", "persistentVolumeClaim": {}}]},
            }
        )
    assert "spec.volumes[0].persistentVolumeClaim.claimName" in str(err.value)
