"""Joint GPU + RDMA allocation with VFs, the cases of Koordinator's ``TestAutopilotAllocator``
(``pkg/scheduler/plugins/deviceshare/device_allocator_test.go``) transcribed as facts: the same Device
objects (``tests/fixtures/devices/koordinator-allocator``), the same pod (``nvidia.com/gpu`` n and
``koordinator.sh/rdma`` 1, or 100 per wanted NIC), the same hints and joint allocation, the same devices
and VFs given."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.core.frozendict import FrozenDict
from apis.core.types import ObjectMeta, Pod
from apis.extension.device import DeviceAllocation, VirtualFunction
from apis.scheduling.device import parse_device
from koord_scheduler.plugins.deviceshare.allocation import Scorer
from koord_scheduler.plugins.deviceshare.allocator import Failure, allocate, pod_devices
from koord_scheduler.plugins.deviceshare.cache import DeviceCache
from koord_scheduler.plugins.deviceshare.partitions import node_partitions
from tests.fixtures import FIXTURES

DEVICES = FIXTURES / "devices" / "koordinator-allocator"
SCORER = Scorer(
    "LeastAllocated", {"koordinator.sh/gpu-memory-ratio": 1, "koordinator.sh/gpu-memory": 1, "koordinator.sh/rdma": 1}
)
GPU_MEMORY = 85198045184
WHOLE_GPU = {
    "koordinator.sh/gpu-core": 100,
    "koordinator.sh/gpu-memory-ratio": 100,
    "koordinator.sh/gpu-memory": GPU_MEMORY,
}
HINT_ANNOTATION = "scheduling.koordinator.sh/device-allocate-hint"
JOINT_ANNOTATION = "scheduling.koordinator.sh/device-joint-allocate"


def hints(*, vf_type: str = "", apply_for_all: bool = False) -> dict[str, Any]:
    """``setDefaultTestAllocateHints``: RDMA devices labelled type=fakeW, and a VF of group general or
    ``vf_type`` (``allocateHintWithVFType``), or every NIC (``ApplyForAll``)."""
    rdma: dict[str, Any] = {"selector": {"matchLabels": {"type": "fakeW"}}}
    if vf_type:
        rdma["vfSelector"] = {"matchExpressions": [{"key": "type", "operator": "In", "values": ["general", vf_type]}]}
    if apply_for_all:
        rdma["allocateStrategy"] = "ApplyForAll"
    return {"rdma": rdma}


def pod(gpus: int, rdma: int, *, host_network: bool = False) -> Pod:
    requests = {"koordinator.sh/rdma": 100 * rdma if rdma else 1}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
    annotations: dict[str, str] = {}
    if host_network:
        annotations[HINT_ANNOTATION] = json.dumps(hints(apply_for_all=True))
        annotations[JOINT_ANNOTATION] = json.dumps({"deviceTypes": ["gpu", "rdma"]})
    elif gpus:
        annotations[HINT_ANNOTATION] = json.dumps(hints(vf_type="fakeG"))
        annotations[JOINT_ANNOTATION] = json.dumps({"deviceTypes": ["gpu", "rdma"]})
    else:
        annotations[HINT_ANNOTATION] = json.dumps(hints(vf_type="fakeC"))
    return Pod(
        meta=ObjectMeta(name="p", namespace="default", annotations=FrozenDict(annotations)),
        requests=FrozenDict(requests),
    )


def gpu(*minors: int) -> list[DeviceAllocation]:
    return [DeviceAllocation(m, WHOLE_GPU) for m in minors]


def nic(minor: int, bus: str, *, amount: int = 1, vf_minor: int = 0) -> DeviceAllocation:
    return DeviceAllocation(
        minor, {"koordinator.sh/rdma": amount}, vfs=(VirtualFunction(vf_minor, bus),) if bus else ()
    )


ASSIGNED_GPU0 = {"gpu": gpu(0), "rdma": [nic(1, "0000:1f:00.2")]}
ASSIGNED_NUMA0 = {"gpu": gpu(0, 1, 2, 3), "rdma": [nic(1, "0000:20:00.0")]}
MAIN = "eight-gpus-four-rdma-with-vfs.json"


@pytest.mark.parametrize(
    ("device", "gpus", "rdma", "host_network", "assigned", "want"),
    [
        pytest.param(
            "eight-gpus-four-rdma-no-topology.json",
            1,
            0,
            False,
            {},
            None,
            id="request-1-gpu-1-vf-but-invalid-device-topology",
        ),
        pytest.param(
            "eight-gpus-four-rdma-no-topology.json",
            0,
            0,
            False,
            {},
            None,
            id="allocate-0-gpu-1-vf-but-invalid-device-topology",
        ),
        pytest.param(MAIN, 0, 0, False, {}, {"rdma": [nic(1, "0000:1f:00.2")]}, id="allocate-0-gpu-1-vf"),
        pytest.param(
            MAIN, 1, 0, False, {}, {"gpu": gpu(0), "rdma": [nic(1, "0000:1f:00.2")]}, id="allocate-1-gpu-1-vf"
        ),
        pytest.param(
            MAIN, 2, 0, False, {}, {"gpu": gpu(0, 1), "rdma": [nic(1, "0000:1f:00.2")]}, id="allocate-2-gpu-1-vf"
        ),
        pytest.param(
            MAIN,
            3,
            0,
            False,
            {},
            {"gpu": gpu(0, 1, 2), "rdma": [nic(1, "0000:1f:00.2"), nic(2, "0000:90:00.2")]},
            id="allocate-3-gpu-2-vf",
        ),
        pytest.param(
            MAIN,
            4,
            0,
            False,
            {},
            {"gpu": gpu(0, 1, 2, 3), "rdma": [nic(1, "0000:1f:00.2"), nic(2, "0000:90:00.2")]},
            id="allocate-4-gpu-2-vf",
        ),
        pytest.param(
            MAIN,
            6,
            0,
            False,
            {},
            {
                "gpu": gpu(0, 1, 2, 3, 4, 5),
                "rdma": [nic(1, "0000:1f:00.2"), nic(2, "0000:90:00.2"), nic(3, "0000:51:00.2")],
            },
            id="allocate-6-gpu-3-vf",
        ),
        pytest.param(
            MAIN,
            8,
            0,
            False,
            {},
            {
                "gpu": gpu(*range(8)),
                "rdma": [
                    nic(1, "0000:1f:00.2"),
                    nic(2, "0000:90:00.2"),
                    nic(3, "0000:51:00.2"),
                    nic(4, "0000:b9:00.2"),
                ],
            },
            id="allocate-8-gpu-4-vf",
        ),
        pytest.param(
            MAIN,
            2,
            0,
            False,
            ASSIGNED_GPU0,
            {"gpu": gpu(2, 3), "rdma": [nic(2, "0000:90:00.2")]},
            id="allocate-2-gpu-1-vf-with-assigned-devices",
        ),
        pytest.param(
            MAIN,
            3,
            0,
            False,
            ASSIGNED_GPU0,
            {"gpu": gpu(1, 2, 3), "rdma": [nic(1, "0000:1f:00.3", vf_minor=1), nic(2, "0000:90:00.2")]},
            id="allocate-3-gpu-2-vf-with-assigned-devices",
        ),
        pytest.param(
            "four-pcie-vfs-on-first-rdma-only.json",
            4,
            0,
            False,
            {},
            {"gpu": gpu(0, 1, 2, 3), "rdma": [nic(1, "0000:20:00.0")]},
            id="only-1-rdma-and-4-pcie-with-2-gpus-per-pcie-allocate-4-gpus",
        ),
        pytest.param(
            "two-numa-one-rdma-per-pcie.json",
            4,
            0,
            False,
            ASSIGNED_NUMA0,
            {"gpu": gpu(4, 5, 6, 7), "rdma": [nic(3, "0000:22:00.0"), nic(4, "0000:23:00.0")]},
            id="1-rdma-with-2-gpus-per-pcie-2-numa-nodes-assigned-4-gpus-requests-4-gpus",
        ),
        pytest.param(
            "two-numa-two-rdma-per-pcie.json",
            4,
            4,
            False,
            ASSIGNED_NUMA0,
            {
                "gpu": gpu(4, 5, 6, 7),
                "rdma": [
                    nic(3, "0000:22:00.0", amount=100),
                    nic(4, "0000:23:00.0", amount=100),
                    nic(7, "0001:22:00.0", amount=100),
                    nic(8, "0001:23:00.0", amount=100),
                ],
            },
            id="2-rdma-with-2-gpus-per-pcie-2-numa-nodes-assigned-4-gpus-requests-4-gpus",
        ),
        pytest.param(
            "one-gpu-per-pcie-three-rdma-on-first.json",
            4,
            4,
            False,
            {},
            {
                "gpu": gpu(0, 1, 2, 3),
                "rdma": [
                    nic(0, "0000:20:00.0", amount=100, vf_minor=-1),
                    nic(3, "0000:23:00.0", amount=100, vf_minor=-1),
                    nic(4, "0000:24:00.0", amount=100, vf_minor=-1),
                    nic(5, "0000:25:00.0", amount=100, vf_minor=-1),
                ],
            },
            id="1-rdma-with-1-gpu-per-pcie-but-the-first-pcie-has-multiple-rdma-requests-4-gpus",
        ),
        pytest.param(
            "four-pcie-one-rdma-each-no-vfs.json",
            4,
            0,
            True,
            {},
            {"gpu": gpu(0, 1, 2, 3), "rdma": [nic(1, ""), nic(2, ""), nic(3, ""), nic(4, "")]},
            id="1-gpu-with-hostnetwork-and-apply-for-all-rdmas",
        ),
    ],
)
def test_autopilot_allocator(
    *,
    device: str,
    gpus: int,
    rdma: int,
    host_network: bool,
    assigned: dict[str, list[DeviceAllocation]],
    want: dict[str, list[DeviceAllocation]] | None,
) -> None:
    cache = DeviceCache()
    cache.set_device(parse_device(json.loads((DEVICES / device).read_text())))
    if assigned:
        cache.assign("default/assigned", "test-node-1", {t: tuple(v) for t, v in assigned.items()})
    view = cache.node_devices("test-node-1")
    assert view is not None
    request = pod_devices(pod(gpus, rdma, host_network=host_network))
    assert request is not None
    got = allocate(request, view.groups, SCORER)
    if want is None:
        assert isinstance(got, Failure), got
        return
    assert not isinstance(got, Failure), got
    assert {t: sorted(v, key=lambda a: a.minor) for t, v in got.items()} == want


# ----- TestAllocateByTopology and TestAllocateSharedGPU (allocator_gpu_test.go) -----

HALF_GPU = {
    "koordinator.sh/gpu-core": 50,
    "koordinator.sh/gpu-memory-ratio": 50,
    "koordinator.sh/gpu-memory": GPU_MEMORY // 2,
}
ASSIGNED_GPU5 = {"gpu": gpu(5), "rdma": [nic(3, "0000:51:00.2")]}


def topology_pod(gpus: int, *, required_scope: str = "", shared: bool = False) -> Pod:
    """The pods of those tests: ``rdma`` 1, ``nvidia.com/gpu`` n (or ``gpu.shared`` n with half of each),
    a VF of group general or fakeG, the GPU hint's required topology scope, and joint allocation with
    ``requiredScope: SamePCIe``; the RDMA hint's exclusive policy ``PCIeLevel`` (Koordinator discards its
    effect: ``minors.Intersection`` is not assigned)."""
    requests = {"koordinator.sh/rdma": 1}
    if shared:
        requests.update(
            {"koordinator.sh/gpu.shared": gpus, "koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}
        )
    else:
        requests["nvidia.com/gpu"] = gpus
    body = hints(vf_type="fakeG")
    body["rdma"]["exclusivePolicy"] = "PCIeLevel"
    if required_scope:
        body["gpu"] = {"requiredTopologyScope": required_scope}
    annotations = {
        HINT_ANNOTATION: json.dumps(body),
        JOINT_ANNOTATION: json.dumps({"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}),
    }
    return Pod(
        meta=ObjectMeta(name="p", namespace="default", annotations=FrozenDict(annotations)),
        requests=FrozenDict(requests),
    )


@pytest.mark.parametrize(
    ("pod_", "assigned", "scorer", "want"),
    [
        pytest.param(
            topology_pod(1),
            ASSIGNED_GPU5,
            SCORER,
            {"gpu": gpu(4), "rdma": [nic(3, "0000:51:00.3", vf_minor=1)]},
            id="allocate-1-gpu-1-vf-with-assigned-devices-topology-scope-binpack",
        ),
        pytest.param(
            topology_pod(2),
            {"gpu": gpu(5), "rdma": [nic(3, "0000:51:00.2", amount=100)]},
            SCORER,
            {"gpu": gpu(6, 7), "rdma": [nic(4, "0000:b9:00.2")]},
            id="allocate-2-gpu-1-vf-with-assigned-devices-topology-scope-binpack",
        ),
        pytest.param(
            topology_pod(2, required_scope="PCIe"),
            ASSIGNED_GPU5,
            SCORER,
            {"gpu": gpu(6, 7), "rdma": [nic(4, "0000:b9:00.2")]},
            id="allocate-2-gpu-required-topology-scope-pcie-and-binpack",
        ),
        pytest.param(
            topology_pod(4, required_scope="NUMANode"),
            ASSIGNED_GPU5,
            SCORER,
            {"gpu": gpu(0, 1, 2, 3), "rdma": [nic(1, "0000:1f:00.2"), nic(2, "0000:90:00.2")]},
            id="allocate-4-gpu-required-topology-scope-numanode",
        ),
        pytest.param(
            topology_pod(4, required_scope="NUMANode"),
            {"gpu": gpu(5, 0), "rdma": [nic(3, "0000:51:00.2"), nic(1, "0000:1f:00.2")]},
            SCORER,
            None,
            id="allocate-4-gpu-required-topology-scope-numanode-insufficient-devices",
        ),
        pytest.param(
            topology_pod(1, shared=True),
            ASSIGNED_GPU5,
            Scorer("MostAllocated", {"koordinator.sh/gpu-memory-ratio": 1}),
            {"gpu": [DeviceAllocation(4, HALF_GPU)], "rdma": [nic(3, "0000:51:00.3", vf_minor=1)]},
            id="shared-allocate-1-gpu-1-vf-with-assigned-devices-topology-scope-binpack",
        ),
        pytest.param(
            topology_pod(1, shared=True),
            {"gpu": [*gpu(5), DeviceAllocation(7, HALF_GPU)], "rdma": [nic(3, "0000:51:00.2")]},
            Scorer("MostAllocated", {"koordinator.sh/gpu-memory-ratio": 1}),
            {"gpu": [DeviceAllocation(7, HALF_GPU)], "rdma": [nic(4, "0000:b9:00.2")]},
            id="shared-two-scope-both-not-empty-shared-binpack-take-precedence",
        ),
    ],
)
def test_allocate_by_topology(
    pod_: Pod,
    assigned: dict[str, list[DeviceAllocation]],
    scorer: Scorer,
    want: dict[str, list[DeviceAllocation]] | None,
) -> None:
    cache = DeviceCache()
    cache.set_device(parse_device(json.loads((DEVICES / MAIN).read_text())))
    cache.assign("default/assigned", "test-node-1", {t: tuple(v) for t, v in assigned.items()})
    view = cache.node_devices("test-node-1")
    request = pod_devices(pod_)
    assert view is not None and request is not None
    got = allocate(request, view.groups, scorer)
    if want is None:
        assert isinstance(got, Failure), got
        return
    assert not isinstance(got, Failure), got
    assert {t: sorted(v, key=lambda a: a.minor) for t, v in got.items()} == want


def test_allocate_rdma_from_preemptible() -> None:
    """Koordinator ``Test_allocateRDMA``: RDMA NICs 1 and 2 fully held, both preemptible; a pod asking
    ``rdma`` 50 gets NIC 1 with 50."""
    from koord_scheduler.plugins.deviceshare.allocation import DeviceGroup, with_given_back

    record = parse_device(
        {
            "metadata": {"name": "test-node"},
            "spec": {
                "devices": [
                    {"type": "rdma", "minor": m, "health": True, "resources": {"koordinator.sh/rdma": "100"}}
                    for m in (1, 2)
                ]
            },
        }
    )
    cache = DeviceCache()
    cache.set_device(record)
    cache.assign("default/test-pod-1", "test-node", {"rdma": (nic(1, "", amount=100), nic(2, "", amount=100))})
    view = cache.node_devices("test-node")
    assert view is not None
    back = {1: {"koordinator.sh/rdma": 100}, 2: {"koordinator.sh/rdma": 100}}
    groups = {"rdma": DeviceGroup.of(with_given_back(view.group("rdma").devices, back))}
    request = pod_devices(
        Pod(meta=ObjectMeta(name="p", namespace="default"), requests=FrozenDict({"koordinator.sh/rdma": 50}))
    )
    assert request is not None
    assert allocate(request, view.groups, SCORER) == Failure(("Insufficient rdma devices",))
    assert allocate(request, groups, SCORER) == {"rdma": (nic(1, "", amount=50),)}


# ----- TestAllocateByPartition (allocator_gpu_test.go): Hopper partitions on H800/H100 nodes -----

H800 = "h800-eight-gpus-eight-rdma.json"


def partition_pod(gpus: int) -> Pod:
    """``rdma`` 1 and ``nvidia.com/gpu`` n, a VF of group general or fakeG with joint allocation (no
    GPUs: a VF of group general or fakeC)."""
    requests = {"koordinator.sh/rdma": 1}
    annotations = {HINT_ANNOTATION: json.dumps(hints(vf_type="fakeG" if gpus else "fakeC"))}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
        annotations[JOINT_ANNOTATION] = json.dumps({"deviceTypes": ["gpu", "rdma"]})
    meta = ObjectMeta(name="p", namespace="default", annotations=FrozenDict(annotations))
    return Pod(meta=meta, requests=FrozenDict(requests))


ASSIGNED_2_3 = {"gpu": gpu(2, 3), "rdma": [nic(1, "0000:09:00.3", vf_minor=1), nic(2, "0000:7f:00.3", vf_minor=1)]}
ASSIGNED_4 = {"gpu": gpu(4), "rdma": [nic(5, "0001:08:00.3", vf_minor=1)]}


@pytest.mark.parametrize(
    ("gpus", "model", "policy", "assigned", "want"),
    [
        pytest.param(0, "H800", "Honor", {}, {"rdma": [nic(1, "0000:09:02.2", vf_minor=16)]}, id="allocate-0-gpu-1-vf"),
        pytest.param(
            1,
            "H800",
            "Honor",
            {},
            {"gpu": gpu(0), "rdma": [nic(1, "0000:09:00.3", vf_minor=1)]},
            id="allocate-1-gpu-1-vf",
        ),
        pytest.param(
            2,
            "H800",
            "Honor",
            {},
            {"gpu": gpu(0, 1), "rdma": [nic(1, "0000:09:00.3", vf_minor=1), nic(2, "0000:7f:00.3", vf_minor=1)]},
            id="allocate-2-gpu-2-vf",
        ),
        pytest.param(3, "H800", "Honor", {}, None, id="allocate-3-gpu"),
        pytest.param(
            4,
            "H800",
            "Honor",
            {},
            {
                "gpu": gpu(0, 1, 2, 3),
                "rdma": [
                    nic(m, bus, vf_minor=1)
                    for m, bus in ((1, "0000:09:00.3"), (2, "0000:7f:00.3"), (3, "0000:a3:00.3"), (4, "0000:c7:00.3"))
                ],
            },
            id="allocate-4-gpu-4-vf",
        ),
        pytest.param(6, "H800", "Honor", {}, None, id="allocate-6-gpu-3-vf"),
        pytest.param(
            8,
            "H800",
            "Honor",
            {},
            {
                "gpu": gpu(*range(8)),
                "rdma": [
                    nic(m, bus, vf_minor=1)
                    for m, bus in (
                        (1, "0000:09:00.3"),
                        (2, "0000:7f:00.3"),
                        (3, "0000:a3:00.3"),
                        (4, "0000:c7:00.3"),
                        (5, "0001:08:00.3"),
                        (6, "0001:7e:00.3"),
                        (7, "0001:a2:00.3"),
                        (8, "0001:c6:00.3"),
                    )
                ],
            },
            id="allocate-8-gpu-8-vf",
        ),
        pytest.param(
            2,
            "H800",
            "Honor",
            ASSIGNED_2_3,
            {"gpu": gpu(0, 1), "rdma": [nic(1, "0000:09:00.4", vf_minor=2), nic(2, "0000:7f:00.4", vf_minor=2)]},
            id="allocate-2-gpu-2-vf-with-assigned-devices",
        ),
        pytest.param(
            2,
            "H800",
            "Honor",
            ASSIGNED_4,
            {"gpu": gpu(6, 7), "rdma": [nic(7, "0001:a2:00.3", vf_minor=1), nic(8, "0001:c6:00.3", vf_minor=1)]},
            id="allocate-2-gpu-2-vf-with-assigned-devices-binpack",
        ),
        pytest.param(
            1,
            "H800",
            "Honor",
            ASSIGNED_4,
            {"gpu": gpu(5), "rdma": [nic(6, "0001:7e:00.3", vf_minor=1)]},
            id="allocate-1-gpu-1-vf-with-assigned-devices-binpack",
        ),
        pytest.param(
            2,
            "H100",
            "Honor",
            ASSIGNED_2_3,
            {"gpu": gpu(0, 1), "rdma": [nic(1, "0000:09:00.4", vf_minor=2), nic(2, "0000:7f:00.4", vf_minor=2)]},
            id="allocate-2-gpu-2-vf-with-assigned-devices-h100",
        ),
        pytest.param(
            3,
            "H100",
            "Prefer",
            ASSIGNED_2_3,
            {
                "gpu": gpu(4, 5, 6),
                "rdma": [
                    nic(5, "0001:08:00.3", vf_minor=1),
                    nic(6, "0001:7e:00.3", vf_minor=1),
                    nic(7, "0001:a2:00.3", vf_minor=1),
                ],
            },
            id="allocate-3-gpu-h100-gpu-partition-policy-prefer-falls-back",
        ),
    ],
)
def test_allocate_by_partition(
    gpus: int,
    model: str,
    policy: str,
    assigned: dict[str, list[DeviceAllocation]],
    want: dict[str, list[DeviceAllocation]] | None,
) -> None:
    cache = DeviceCache()
    cache.set_device(parse_device(json.loads((DEVICES / H800).read_text())))
    if assigned:
        cache.assign("default/assigned-pod", "test-node-1", {t: tuple(v) for t, v in assigned.items()})
    view = cache.node_devices("test-node-1")
    request = pod_devices(partition_pod(gpus))
    assert view is not None and request is not None
    node_labels = {"node.koordinator.sh/gpu-model": model, "node.koordinator.sh/gpu-partition-policy": policy}
    partitions = node_partitions(cache.partition_tables.get("test-node-1"), {}, node_labels)
    got = allocate(request, view.groups, SCORER, partitions=partitions)
    if want is None:
        assert isinstance(got, Failure) and got.reasons == ("node(s) Unsupported number of GPU requests",), got
        return
    assert not isinstance(got, Failure), got
    assert {t: sorted(v, key=lambda a: a.minor) for t, v in got.items()} == want


def test_nvlink_pairs_from_the_device_annotation_are_preferred() -> None:
    """The table koordlet reports for NVLink pairs (Prefer): with GPU 1 in use a 2-GPU pod gets the whole
    pair 2-3 (leaving 4-5 and 6-7 whole) where the score order alone would give it GPUs 0 and 2."""
    pairs = [{"minors": [m, m + 1], "gpuLinkType": "NVLink", "allocationScore": 1} for m in range(0, 8, 2)]
    gpus = [
        {
            "type": "gpu",
            "minor": m,
            "health": True,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
        }
        for m in range(8)
    ]
    labels = {"node.koordinator.sh/gpu-partition-policy": "Prefer"}
    obj = {
        "metadata": {
            "name": "n",
            "labels": labels,
            "annotations": {"scheduling.koordinator.sh/gpu-partitions": json.dumps({"2": pairs})},
        },
        "spec": {"devices": gpus},
    }
    cache = DeviceCache()
    cache.set_device(parse_device(obj))
    cache.assign(
        "default/busy",
        "n",
        {"gpu": (DeviceAllocation(1, {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100}),)},
    )
    view = cache.node_devices("n")
    request = pod_devices(
        Pod(meta=ObjectMeta(name="p", namespace="default"), requests=FrozenDict({"nvidia.com/gpu": 2}))
    )
    assert view is not None and request is not None
    with_table = node_partitions(cache.partition_tables.get("n"), labels, {})
    got = allocate(request, view.groups, SCORER, partitions=with_table)
    assert not isinstance(got, Failure) and [a.minor for a in got["gpu"]] == [2, 3]
    plain = allocate(request, view.groups, SCORER)
    assert not isinstance(plain, Failure) and [a.minor for a in plain["gpu"]] == [0, 2]
