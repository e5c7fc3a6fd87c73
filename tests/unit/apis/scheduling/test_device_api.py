from typing import Any

import pytest
import yaml

from apis.core.parse import parse_pod
from apis.crdgen import crd_for
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    DeviceAllocation,
    decode_device_allocations,
    encode_device_allocations,
)
from apis.scheduling.device import Device, parse_device
from tests.fixtures import KOORDINATOR_CRDS


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("description", "default")}
    if isinstance(node, list):
        return [_strip(x) for x in node]
    return node


def test_device_crd_matches_koordinator_schema() -> None:
    import importlib.util
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    spec = importlib.util.spec_from_file_location("gen_crds_dev", repo / "scripts" / "gen-crds.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules["gen_crds_dev"] = gen
    spec.loader.exec_module(gen)
    model, meta = next((m, meta) for m, meta in gen.CRDS if meta.kind == "Device")
    ours = crd_for(model, meta)
    theirs = yaml.safe_load((KOORDINATOR_CRDS / "scheduling.koordinator.sh_devices.yaml").read_text())
    assert _strip(ours["spec"]) == _strip(theirs["spec"])


DEVICE = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Device",
    "metadata": {"name": "node-1", "labels": {"node.koordinator.sh/gpu-model": "A100"}},
    "spec": {
        "devices": [
            {
                "type": "gpu",
                "minor": 0,
                "id": "GPU-0",
                "health": True,
                "resources": {
                    "koordinator.sh/gpu-core": "100",
                    "koordinator.sh/gpu-memory": "80Gi",
                    "koordinator.sh/gpu-memory-ratio": 100,
                },
                "topology": {"socketID": 0, "nodeID": 1, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
            },
            {"type": "rdma", "minor": 0, "health": True, "resources": {"koordinator.sh/rdma": "100"}},
        ]
    },
}


def test_parse_device_reads_resources_as_integers() -> None:
    rec = parse_device(DEVICE)
    assert rec.name == "node-1"
    gpu = rec.of_type("gpu")[0]
    assert gpu.resources == {
        "koordinator.sh/gpu-core": 100,
        "koordinator.sh/gpu-memory": 80 << 30,
        "koordinator.sh/gpu-memory-ratio": 100,
    }
    assert (gpu.numa_node, gpu.pcie_id, gpu.uuid) == (1, "pci0000:3a", "GPU-0")
    assert [d.type for d in rec.devices] == ["gpu", "rdma"]


def test_device_round_trips_on_the_wire() -> None:
    assert Device.model_validate(DEVICE).to_wire()["spec"]["devices"][0]["topology"]["pcieID"] == "pci0000:3a"


@pytest.mark.parametrize(
    "obj,needle",
    [
        pytest.param({"metadata": {}}, "metadata.name", id="no-name"),
        pytest.param(
            {"metadata": {"name": "n"}, "spec": {"devices": [{"health": True, "resources": {"x": "abc"}}]}},
            "Device n",
            id="bad-quantity-names-object",
        ),
    ],
)
def test_bad_device_is_a_clear_error(obj: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_device(obj)


def test_allocation_annotation_koordinator_shape() -> None:
    text = encode_device_allocations(
        {
            "gpu": [
                DeviceAllocation(
                    0,
                    {
                        "koordinator.sh/gpu-core": 50,
                        "koordinator.sh/gpu-memory-ratio": 50,
                        "koordinator.sh/gpu-memory": 8 << 30,
                    },
                )
            ]
        }
    )
    assert text == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50",'
        '"koordinator.sh/gpu-memory":"8Gi","koordinator.sh/gpu-memory-ratio":"50"}}]}'
    )
    back = decode_device_allocations(text)
    assert back["gpu"][0].resources["koordinator.sh/gpu-memory"] == 8 << 30


def test_decode_reads_deprecated_names() -> None:
    text = '{"gpu":[{"minor":1,"resources":{"kubernetes.io/gpu-core":"60"}}]}'
    assert decode_device_allocations(text)["gpu"][0].resources == {"koordinator.sh/gpu-core": 60}


def test_decode_rejects_garbage_naming_annotation() -> None:
    with pytest.raises(ValueError, match=ANNOTATION_DEVICE_ALLOCATED):
        decode_device_allocations("[1]")


def test_pod_with_deprecated_gpu_resource_reads_as_koordinator_name() -> None:
    pod = parse_pod(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"kubernetes.io/gpu": "100"}}}]},
        }
    )
    assert pod.requests.get("koordinator.sh/gpu") == 100
    assert "kubernetes.io/gpu" not in pod.requests
