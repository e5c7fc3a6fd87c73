"""bench/e2e_volumes.py: the provisioner creates a volume only for claims handed to it with a chosen
node, pre-bound to the claim and pinned to that node; pods mount their own claim."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest


def claim(annotations: dict[str, str], volume_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "bench-wffc",
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if volume_name:
        spec["volumeName"] = volume_name
    return {
        "metadata": {"name": "data-pod-3", "namespace": "bench", "uid": "u-3", "annotations": annotations},
        "spec": spec,
    }


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(claim({}), id="no-node-chosen"),
        pytest.param(claim({"volume.kubernetes.io/selected-node": "n1"}), id="not-handed-to-the-driver-yet"),
        pytest.param(
            claim(
                {"volume.kubernetes.io/selected-node": "n1", "volume.kubernetes.io/storage-provisioner": "other.csi"}
            ),
            id="other-driver",
        ),
        pytest.param(
            claim(
                {
                    "volume.kubernetes.io/selected-node": "n1",
                    "volume.kubernetes.io/storage-provisioner": "csi.bench.pykoord",
                },
                "pv-x",
            ),
            id="bound",
        ),
    ],
)
def test_no_volume(e2e_volumes: ModuleType, obj: dict[str, Any]) -> None:
    assert e2e_volumes.volume_for(obj) is None


def test_volume_pinned_to_the_selected_node(e2e_volumes: ModuleType) -> None:
    volume = e2e_volumes.volume_for(
        claim(
            {
                "volume.kubernetes.io/selected-node": "bench-node-7",
                "volume.kubernetes.io/storage-provisioner": "csi.bench.pykoord",
            }
        )
    )
    assert volume is not None
    assert volume["metadata"]["name"] == "pvc-u-3"
    assert volume["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "bench",
        "name": "data-pod-3",
        "uid": "u-3",
    }
    assert volume["spec"]["capacity"] == {"storage": "1Gi"}
    assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["bench-node-7"]}]}
    ]


def test_pod_mounts_its_own_claim(e2e_volumes: ModuleType) -> None:
    pod = json.loads(e2e_volumes.pod_with_claim(5))
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-pod-5"}}]
    assert e2e_volumes.claim_body(5)["metadata"]["name"] == "data-pod-5"
