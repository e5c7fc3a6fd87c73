"""koordlet's Accelerators reporting with a fake NVML (Koordinator ``statesinformer/impl/states_device_linux.go``):
the Device object, usage gauges, and nodes without NVML or GPUs that report nothing, say so once and
never raise."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apis.scheduling.device import parse_device
from koordlet.metricsadvisor.gpu import GPUInfo, GPUReporter, NVMLUnavailableError, build_device

GI = 1 << 30
A100 = [
    GPUInfo(1, "GPU-b", "NVIDIA A100-SXM4-80GB", 80 * GI, 10 * GI, 35, "00000000:3b:00.0", 0),
    GPUInfo(0, "GPU-a", "NVIDIA A100-SXM4-80GB", 80 * GI, 0, 0, "00000000:1a:00.0", 0),
]


class FakeNVML:
    def __init__(self, gpus: list[GPUInfo], *, fail: bool = False) -> None:
        self._gpus = gpus
        self.fail = fail

    def driver_version(self) -> str:
        return "535.104.05"

    def gpus(self) -> list[GPUInfo]:
        if self.fail:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return list(self._gpus)


class Writer:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    def write(self, device: dict[str, Any]) -> None:
        self.written.append(device)


def reporter(factory: Any, writer: Writer | None = None) -> tuple[GPUReporter, CollectorRegistry]:
    registry = CollectorRegistry()
    return GPUReporter("node-1", registry, nvml_factory=factory, writer=writer, clock=lambda: 1_700_000_000.0), registry


def test_device_object_as_koordinator_reports_it() -> None:
    device = build_device("node-1", A100, "535.104.05", 1_700_000_000.0)
    assert device["metadata"]["labels"] == {
        "node.koordinator.sh/gpu-vendor": "nvidia",
        "node.koordinator.sh/gpu-model": "NVIDIA-A100-SXM4-80GB",
        "node.koordinator.sh/gpu-driver-version": "535.104.05",
    }
    first = device["spec"]["devices"][0]
    assert (first["minor"], first["id"], first["health"]) == (0, "GPU-a", True)
    assert first["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "80Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    assert first["topology"] == {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:1a", "busID": "00000000:1a:00.0"}
    record = parse_device(device)  # the scheduler reads what koordlet writes
    assert [d.minor for d in record.of_type("gpu")] == [0, 1]


def test_tick_writes_device_once_and_exports_usage() -> None:
    writer = Writer()
    r, registry = reporter(lambda: FakeNVML(A100), writer)
    assert r.tick() is not None
    assert r.tick() is not None
    assert len(writer.written) == 1, "an unchanged Device is not written again"
    labels = {"node": "node-1", "minor": "1", "uuid": "GPU-b"}
    assert registry.get_sample_value("koordlet_gpu_core_usage_ratio", labels) == 35
    assert registry.get_sample_value("koordlet_gpu_memory_used_bytes", labels) == 10 * GI


def _no_nvml() -> FakeNVML:
    raise NVMLUnavailableError("the nvidia-ml-py package (pynvml) is not installed")


@pytest.mark.parametrize(
    "factory,reason",
    [
        pytest.param(_no_nvml, "pynvml", id="no-nvml"),
        pytest.param(lambda: FakeNVML([]), "no GPUs", id="no-gpus"),
        pytest.param(lambda: FakeNVML(A100, fail=True), "NVML query failed", id="nvml-call-fails"),
    ],
)
def test_nothing_reported_said_once_never_raises(factory: Any, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    writer = Writer()
    r, _ = reporter(factory, writer)
    with caplog.at_level(logging.WARNING, logger="koordlet.metricsadvisor.gpu"):
        for _ in range(3):
            assert r.tick() is None
    assert writer.written == []
    assert reason in r.unavailable
    assert sum(reason in m for m in caplog.messages) == 1


def test_real_pynvml_missing_on_this_machine_is_reported_not_raised() -> None:
    """This machine has no GPU and no pynvml: the default factory must degrade the same way."""
    r = GPUReporter("node-1", CollectorRegistry(), clock=lambda: 0.0)
    assert r.tick() is None
    assert r.unavailable


# ----- NVLink partitions (from a fake NVML topology; no GPU machine was available) -----


class NVLinkNVML(FakeNVML):
    """Eight A100s linked in NVLink pairs 0-1, 2-3, 4-5, 6-7 (NVLink bridges)."""

    def nvlink_peers(self) -> dict[int, frozenset[int]]:
        return {m: frozenset({m ^ 1}) for m in range(8)}


EIGHT = [GPUInfo(m, f"GPU-{m}", "NVIDIA A100-PCIE-40GB", 40 * GI, 0, 0, f"00000000:{m + 10}:00.0", 0) for m in range(8)]


def test_nvlink_pairs_become_gpu_partitions_the_scheduler_reads() -> None:
    from koord_scheduler.plugins.deviceshare.cache import DeviceCache

    writer = Writer()
    r, _ = reporter(lambda: NVLinkNVML(EIGHT), writer)
    device = r.tick()
    assert device is not None and writer.written == [device]
    assert device["metadata"]["labels"]["node.koordinator.sh/gpu-partition-policy"] == "Prefer"
    table = json.loads(device["metadata"]["annotations"]["scheduling.koordinator.sh/gpu-partitions"])
    assert table == {
        "2": [{"minors": [m, m + 1], "gpuLinkType": "NVLink", "allocationScore": 1} for m in range(0, 8, 2)]
    }
    cache = DeviceCache()
    cache.set_device(parse_device(device))
    index = cache.partition_tables["node-1"]
    assert [p.minors for p in index[2][0]] == [(0, 1), (2, 3), (4, 5), (6, 7)]


def test_no_nvlink_no_partitions() -> None:
    device = build_device("n", A100, "535.104.05", 0.0, {0: frozenset(), 1: frozenset()})
    assert "annotations" not in device["metadata"]
    assert "node.koordinator.sh/gpu-partition-policy" not in device["metadata"]["labels"]
