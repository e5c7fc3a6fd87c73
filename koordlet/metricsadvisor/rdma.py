"""RDMA NICs in the node's ``Device`` object (Koordinator's ``RDMADevices`` gate:
``metricsadvisor/devices/rdma`` and ``statesinformer/impl/states_device_linux.go`` ``buildRDMADevice``).

Each RDMA physical function (:class:`~koordlet.system.pcidevices.RDMANic`) is reported as Koordinator
does: ``type: rdma``, ``id`` its PCI address, its minor, its health, ``koordinator.sh/rdma: 100``,
topology ``socketID: -1``, its NUMA node, PCIe root and bus id, and, with SR-IOV enabled, one VF group
with every VF (``minor: -1``, its bus id), sorted by bus id. Devices are sorted by minor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from koordlet.system.pcidevices import PCIDevices, RDMANic

log = logging.getLogger(__name__)

RESOURCE_RDMA = "koordinator.sh/rdma"


def rdma_device_infos(nics: Sequence[RDMANic]) -> list[dict[str, Any]]:
    """``spec.devices`` entries for ``nics`` (pure)."""
    out: list[dict[str, Any]] = []
    for nic in sorted(nics, key=lambda n: n.minor):
        info: dict[str, Any] = {
            "type": "rdma",
            "id": nic.address,
            "minor": nic.minor,
            "health": nic.healthy,
            "resources": {RESOURCE_RDMA: "100"},
            "topology": {"socketID": -1, "nodeID": nic.numa_node, "pcieID": nic.pcie_root, "busID": nic.address},
        }
        if nic.vfs:
            info["vfGroups"] = [{"vfs": [{"minor": -1, "busID": vf} for vf in sorted(nic.vfs)]}]
        out.append(info)
    return out


class RDMASource:
    """The node's RDMA NICs as Device entries, read from sysfs at each report; a NIC it cannot name is
    logged once and skipped."""

    def __init__(self, pci: PCIDevices) -> None:
        self.pci = pci
        self._reported: set[str] = set()

    def __call__(self) -> list[dict[str, Any]]:
        nics, skipped = self.pci.rdma_nics()
        for line in skipped:
            if line not in self._reported:
                self._reported.add(line)
                log.warning("RDMADevices: skipping %s", line)
        return rdma_device_infos(nics)
