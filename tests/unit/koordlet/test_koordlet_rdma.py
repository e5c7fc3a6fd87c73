"""koordlet's RDMADevices reporting from a fake sysfs (Koordinator ``metricsadvisor/devices/rdma``,
``statesinformer/impl/states_device_linux.go`` ``buildRDMADevice``): which PCI devices are RDMA NICs, their
minor, health, NUMA node, PCIe root and VFs, the Device entries, and one Device object with GPUs and NICs."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from apis.scheduling.device import parse_device
from koordlet.metricsadvisor.gpu import GPUReporter
from koordlet.metricsadvisor.rdma import RDMASource, rdma_device_infos
from koordlet.system.pcidevices import PCIDevices, RDMANic
from tests.unit.koordlet.test_koordlet_gpu import A100, FakeNVML, Writer

NET, GPU_CLASS = "0x020000", "0x030200"


class FakeSysfs:
    """Devices under ``devices/pci<root>/...`` with ``bus/pci/devices/<address>`` links to them, as the
    kernel lays them out."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "bus" / "pci" / "devices").mkdir(parents=True)

    def device(
        self,
        address: str,
        *,
        pcie_root: str = "pci0000:17",
        klass: str = NET,
        numa: int = 0,
        ibdev: str = "",
        ports: tuple[str, ...] = ("4: ACTIVE",),
        vfs: tuple[str, ...] = (),
        physfn: str = "",
    ) -> Path:
        real = self.root / "devices" / pcie_root / "0000:17:00.0" / address
        real.mkdir(parents=True)
        (real / "class").write_text(klass + "\n")
        (real / "numa_node").write_text(f"{numa}\n")
        os.symlink(
            os.path.relpath(real, self.root / "bus" / "pci" / "devices"), self.root / "bus/pci/devices" / address
        )
        if ibdev:
            (real / "infiniband" / ibdev).mkdir(parents=True)
            for i, state in enumerate(ports, start=1):
                port = self.root / "class" / "infiniband" / ibdev / "ports" / str(i)
                port.mkdir(parents=True)
                (port / "state").write_text(state + "\n")
        if vfs:
            (real / "sriov_numvfs").write_text(f"{len(vfs)}\n")
            for i, vf in enumerate(vfs):
                os.symlink(f"../{vf}", real / f"virtfn{i}")
        if physfn:
            os.symlink(f"../{physfn}", real / "physfn")
        return real


@pytest.fixture
def sysfs(tmp_path: Path) -> FakeSysfs:
    fake = FakeSysfs(tmp_path)
    # A NIC with SR-IOV (VFs listed out of order by bus id) on NUMA node 1.
    fake.device("0000:18:00.0", numa=1, ibdev="mlx5_0", vfs=("0000:18:00.3", "0000:18:00.2"))
    fake.device("0000:18:00.2", numa=1, ibdev="mlx5_2", physfn="0000:18:00.0")
    fake.device("0000:18:00.3", numa=1, ibdev="mlx5_3", physfn="0000:18:00.0")
    # A NIC on another root, NUMA unknown (-1 reads as 0), one port down.
    fake.device("0000:b1:00.0", pcie_root="pci0000:b0", numa=-1, ibdev="mlx5_1", ports=("4: ACTIVE", "1: DOWN"))
    # Not RDMA NICs: a GPU, a NIC without RDMA, an RDMA device named other than mlx<N>_<minor>.
    fake.device("0000:3b:00.0", klass=GPU_CLASS)
    fake.device("0000:5e:00.0")
    fake.device("0000:5f:00.0", ibdev="irdma0")
    return fake


def test_rdma_nics_from_sysfs(sysfs: FakeSysfs) -> None:
    nics, skipped = PCIDevices(sysfs.root).rdma_nics()
    assert nics == [
        # VFs in virtfn<i> order (the Device entry sorts them by bus id).
        RDMANic("0000:18:00.0", 0, "mlx5_0", True, 1, "pci0000:17", ("0000:18:00.3", "0000:18:00.2")),
        RDMANic("0000:b1:00.0", 1, "mlx5_1", False, 0, "pci0000:b0"),
    ]
    assert skipped == ["0000:5f:00.0: RDMA device irdma0 has no mlx<N>_<minor> name"]


def test_device_entries_as_koordinator_builds_them(sysfs: FakeSysfs) -> None:
    infos = rdma_device_infos(PCIDevices(sysfs.root).rdma_nics()[0])
    assert infos[0] == {
        "type": "rdma",
        "id": "0000:18:00.0",
        "minor": 0,
        "health": True,
        "resources": {"koordinator.sh/rdma": "100"},
        "topology": {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:17", "busID": "0000:18:00.0"},
        "vfGroups": [{"vfs": [{"minor": -1, "busID": "0000:18:00.2"}, {"minor": -1, "busID": "0000:18:00.3"}]}],
    }
    assert "vfGroups" not in infos[1] and infos[1]["health"] is False
    record = parse_device({"metadata": {"name": "n"}, "spec": {"devices": infos}})
    (nic, other) = record.of_type("rdma")
    assert (nic.numa_node, nic.pcie_id, nic.bus_id) == (1, "pci0000:17", "0000:18:00.0")
    assert nic.vf_groups[0].vfs == ((-1, "0000:18:00.2"), (-1, "0000:18:00.3"))
    assert nic.resources == {"koordinator.sh/rdma": 100} and not other.health


def test_one_device_object_with_gpus_and_nics(sysfs: FakeSysfs) -> None:
    writer = Writer()
    source = RDMASource(PCIDevices(sysfs.root))
    reporter = GPUReporter(
        "node-1", CollectorRegistry(), nvml_factory=lambda: FakeNVML(A100), writer=writer, clock=lambda: 0.0,
        extra_devices=source,
    )  # fmt: skip
    device = reporter.tick()
    assert device is not None and writer.written == [device]
    assert [(d["type"], d["minor"]) for d in device["spec"]["devices"]] == [
        ("gpu", 0),
        ("gpu", 1),
        ("rdma", 0),
        ("rdma", 1),
    ]
    assert device["metadata"]["labels"]["node.koordinator.sh/gpu-vendor"] == "nvidia"


def test_rdma_only_and_nothing_to_report(sysfs: FakeSysfs, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = Writer()
    source = RDMASource(PCIDevices(sysfs.root))
    reporter = GPUReporter(
        "node-1", CollectorRegistry(), nvml_factory=None, writer=writer, clock=lambda: 0.0, extra_devices=source
    )
    with caplog.at_level(logging.WARNING):
        device = reporter.tick()
        reporter.tick()
    assert device is not None and device["metadata"]["labels"] == {}
    assert [d["type"] for d in device["spec"]["devices"]] == ["rdma", "rdma"]
    assert len(writer.written) == 1, "an unchanged Device is not written again"
    assert [r.message for r in caplog.records].count(
        "RDMADevices: skipping 0000:5f:00.0: RDMA device irdma0 has no mlx<N>_<minor> name"
    ) == 1
    empty = PCIDevices(tmp_path / "no-such-sysfs")
    nothing = GPUReporter(
        "n", CollectorRegistry(), nvml_factory=None, clock=lambda: 0.0, extra_devices=RDMASource(empty)
    )
    assert nothing.tick() is None
