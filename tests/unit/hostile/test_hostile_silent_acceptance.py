"""Objects Koordinator accepts silently, with effects nobody sees: refused here with one clear error naming
the object and the field (the informer then reports it, with an Event, and treats it as absent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apis.scheduling.device import parse_device
from apis.scheduling.network_topology import parse_cluster_network_topology
from koord_scheduler.app.cli import new_scheduler_command


def gpu(minor: int | None, **resources: str) -> dict[str, Any]:
    return {
        "type": "gpu",
        "health": True,
        "minor": minor,
        "resources": resources or {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi"},
    }


def device(*devices: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "n1"},
        "spec": {"devices": list(devices)},
    }


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            device(gpu(0), gpu(1), gpu(1)),
            "Device n1: spec.devices[2].minor: duplicate minor 1 of type 'gpu' (also spec.devices[1])",
            id="duplicate-gpu-minor",
        ),
        pytest.param(
            device(gpu(0, **{"koordinator.sh/gpu-core": "-100"})),
            "Device n1: spec.devices[0].resources[koordinator.sh/gpu-core]: must be non-negative, got -100",
            id="negative-quantity",
        ),
        pytest.param(
            device(gpu(0, **{"koordinator.sh/gpu-memory": "-1Gi"})),
            "Device n1: spec.devices[0].resources[koordinator.sh/gpu-memory]: must be non-negative",
            id="negative-memory",
        ),
    ],
)
def test_devices_koordinator_accepts_silently_are_refused(obj: dict[str, Any], want: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_device(obj)
    assert str(info.value).startswith(want)


def test_devices_of_different_types_may_share_a_minor() -> None:
    rdma = {"type": "rdma", "health": True, "minor": 0, "resources": {"koordinator.sh/rdma": "100"}}
    record = parse_device(device(gpu(0), gpu(1), rdma))
    assert [(d.type, d.minor) for d in record.devices] == [("gpu", 0), ("gpu", 1), ("rdma", 0)]


def topology(*layers: tuple[str, str]) -> dict[str, Any]:
    spec = [{"topologyLayer": name, "parentTopologyLayer": parent} for name, parent in layers]
    return {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": spec}}


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            topology(("NodeTopologyLayer", "BlockLayer"), ("BlockLayer", "SpineLayer"), ("SpineLayer", "BlockLayer")),
            "ClusterNetworkTopology default: spec.networkTopologySpec[1].parentTopologyLayer: the layers' parents "
            "form a cycle (BlockLayer -> SpineLayer -> BlockLayer); the chain must end at ClusterTopologyLayer",
            id="two-layer-cycle",
        ),
        pytest.param(
            topology(("NodeTopologyLayer", "NodeTopologyLayer")),
            "ClusterNetworkTopology default: spec.networkTopologySpec[0].parentTopologyLayer: the layers' parents "
            "form a cycle (NodeTopologyLayer -> NodeTopologyLayer)",
            id="own-parent",
        ),
    ],
)
def test_a_cyclic_network_topology_is_refused(obj: dict[str, Any], want: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_cluster_network_topology(obj)
    assert str(info.value).startswith(want)


def test_a_network_topology_that_chains_up_is_accepted() -> None:
    layers = (("NodeTopologyLayer", "BlockLayer"), ("BlockLayer", "SpineLayer"), ("SpineLayer", "ClusterTopologyLayer"))
    record = parse_cluster_network_topology(topology(*layers))
    assert [layer.name for layer in record.layers] == ["NodeTopologyLayer", "BlockLayer", "SpineLayer"]


GANG_CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: member
  namespace: default
  annotations: {gang.scheduling.koordinator.sh/name: g, gang.scheduling.koordinator.sh/min-available: "lots"}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
"""


def test_a_gang_pod_whose_annotation_cannot_be_parsed_is_named_in_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(GANG_CLUSTER)
    code = new_scheduler_command().run(["simulate", "--now", "2026-01-01T00:05:00Z", "--cluster", str(cluster)])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err
    assert "waiting in PreEnqueue: invalid gang annotations on pod default/member" in out
    lines = [r.getMessage() for r in caplog.records if "default/member" in r.getMessage()]
    assert lines == [
        "pod default/member stays pending: invalid gang annotations on pod default/member: "
        "gang.scheduling.koordinator.sh/min-available: not an integer: 'lots'"
    ]
