"""DeviceShare request validation and conversion (Koordinator ``deviceshare/utils.go``:
``ValidateDeviceRequest``, ``ConvertDeviceRequest``; ``devicehandler_gpu.go``:
``calcDesiredRequestsAndCountForGPU``)."""

from __future__ import annotations

import pytest

from koord_scheduler.plugins.deviceshare.request import DeviceRequestError, parse_device_request

CORE = "koordinator.sh/gpu-core"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"
KGPU = "koordinator.sh/gpu"
SHARED = "koordinator.sh/gpu.shared"
NVIDIA = "nvidia.com/gpu"
GI = 1 << 30


@pytest.mark.parametrize(
    "requests,per_gpu,count,shared",
    [
        pytest.param({CORE: 50, RATIO: 50}, {CORE: 50, RATIO: 50}, 1, True, id="core+ratio-half-is-shared"),
        pytest.param({CORE: 100, RATIO: 100}, {CORE: 100, RATIO: 100}, 1, False, id="core+ratio-100-is-whole"),
        pytest.param({CORE: 200, RATIO: 200}, {CORE: 100, RATIO: 100}, 2, False, id="ratio-200-means-two-gpus"),
        pytest.param({NVIDIA: 2}, {CORE: 100, RATIO: 100}, 2, False, id="nvidia-gpu-n-is-n-whole-gpus"),
        pytest.param({KGPU: 50}, {CORE: 50, RATIO: 50}, 1, True, id="koord-gpu-sets-core-and-ratio"),
        pytest.param({KGPU: 300}, {CORE: 100, RATIO: 100}, 3, False, id="koord-gpu-300-is-three"),
        pytest.param({CORE: 30, MEM: 8 * GI}, {CORE: 30, MEM: 8 * GI}, 1, True, id="core+memory-bytes-shared"),
        pytest.param({MEM: 4 * GI}, {MEM: 4 * GI}, 1, True, id="memory-only"),
        pytest.param({RATIO: 25}, {RATIO: 25}, 1, True, id="ratio-only"),
        pytest.param({SHARED: 2, CORE: 100, RATIO: 100}, {CORE: 50, RATIO: 50}, 2, True, id="gpu-shared-splits-over-n"),
    ],
)
def test_conversion(requests: dict[str, int], per_gpu: dict[str, int], count: int, shared: bool) -> None:
    req = parse_device_request({"cpu": 1000, **requests})
    assert req is not None and req.gpu is not None
    assert dict(req.gpu.per_gpu) == per_gpu
    assert (req.gpu.count, req.gpu.shared) == (count, shared)


@pytest.mark.parametrize(
    "requests,message",
    [
        pytest.param({CORE: 50}, "invalid resource device requests: [koordinator.sh/gpu-core]", id="core-alone"),
        pytest.param(
            {CORE: 150, RATIO: 150},
            "invalid resource device requests: [koordinator.sh/gpu-core koordinator.sh/gpu-memory-ratio]",
            id="percentage-over-100-not-multiple",
        ),
        pytest.param({KGPU: 150}, "invalid resource unit koordinator.sh/gpu: 150", id="koord-gpu-unit"),
        pytest.param(
            {NVIDIA: 1, CORE: 50, RATIO: 50},
            "invalid resource device requests: "
            "[koordinator.sh/gpu-core koordinator.sh/gpu-memory-ratio nvidia.com/gpu]",
            id="whole-and-shared-mixed",
        ),
        pytest.param({SHARED: 2, CORE: 100}, "invalid resource device requests", id="gpu-shared-needs-memory"),
        pytest.param({SHARED: 3, CORE: 100, RATIO: 99}, "invalid resource device requests", id="shared-not-multiple"),
    ],
)
def test_invalid_combinations_give_koordinator_message(requests: dict[str, int], message: str) -> None:
    with pytest.raises(DeviceRequestError) as info:
        parse_device_request(requests)
    assert str(info.value).startswith(message)


def test_no_device_request() -> None:
    assert parse_device_request({"cpu": 1000, "memory": GI}) is None


def test_rdma_is_kept_as_other_type() -> None:
    req = parse_device_request({"koordinator.sh/rdma": 100, CORE: 50, RATIO: 50})
    assert req is not None and req.other_types == ("rdma",)
