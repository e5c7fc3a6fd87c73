"""RDMA network devices on the PCI bus, from sysfs (Koordinator ``metricsadvisor/devices/rdma``,
``util/system/rdma.go``, ``util/system/sriov.go``, ``metricsadvisor/devices/helper/topology.go``).

Under ``<sysfs>/bus/pci/devices/<address>``, a device is an RDMA NIC when

- its ``class`` (``0x020000``) is a network controller (base class ``0x02``),
- it is no SR-IOV virtual function (no ``physfn`` link), and
- it has an RDMA device: a ``infiniband/<ibdev>`` entry (the first by name, e.g. ``mlx5_0``: the
  physical function's is created first); its minor is the number after the ``_`` of ``mlx<N>_<minor>``
  (a NIC whose ibdev name does not have that form is skipped, as Koordinator skips it).

Its health: every port under ``<sysfs>/class/infiniband/<ibdev>/ports/*/state`` says ``ACTIVE``. Its
NUMA node is ``numa_node`` (``-1`` read as 0, as Koordinator reads it); its PCIe root is the
``pci<domain>:<bus>`` component of the device directory's resolved path. With ``sriov_numvfs`` above
0, its VFs are the targets of its ``virtfn<i>`` links, in ``i`` order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NET_CLASS = 0x02
_IBDEV = re.compile(r"^mlx\d+_(\d+)$")
_PCIE_ROOT = re.compile(r"pci\d{4}:[0-9a-fA-F]{2}")
_VIRTFN = re.compile(r"^virtfn(\d+)$")


@dataclass(frozen=True, slots=True)
class RDMANic:
    """One RDMA-capable physical function."""

    address: str
    """PCI address (``0000:1f:00.0``): the device's id and bus id."""
    minor: int
    ibdev: str
    healthy: bool
    numa_node: int
    pcie_root: str
    vfs: tuple[str, ...] = ()
    """PCI addresses of its virtual functions (SR-IOV), when enabled."""


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _int(text: str, default: int) -> int:
    try:
        return int(text, 0)
    except ValueError:
        return default


class PCIDevices:
    """The PCI devices under ``<sysfs>/bus/pci/devices`` (see the module docstring)."""

    def __init__(self, sysfs: Path = Path("/sys")) -> None:
        self.sysfs = sysfs
        self.pci_dir = sysfs / "bus" / "pci" / "devices"

    def rdma_nics(self) -> tuple[list[RDMANic], list[str]]:
        """The RDMA NICs sorted by minor, and why others were skipped (one line each)."""
        nics: list[RDMANic] = []
        skipped: list[str] = []
        try:
            entries = sorted(p.name for p in self.pci_dir.iterdir())
        except OSError:
            return [], []
        for address in entries:
            device = self.pci_dir / address
            klass = _int(_read(device / "class"), -1)
            if klass < 0 or (klass >> 16) != NET_CLASS or (device / "physfn").exists():
                continue
            try:
                ibdevs = sorted(p.name for p in (device / "infiniband").iterdir())
            except OSError:
                continue  # a NIC without RDMA
            if not ibdevs:
                continue
            ibdev = ibdevs[0]
            match = _IBDEV.match(ibdev)
            if match is None:
                skipped.append(f"{address}: RDMA device {ibdev} has no mlx<N>_<minor> name")
                continue
            nics.append(
                RDMANic(
                    address=address,
                    minor=int(match.group(1)),
                    ibdev=ibdev,
                    healthy=self._healthy(ibdev),
                    numa_node=max(_int(_read(device / "numa_node"), 0), 0),
                    pcie_root=self._pcie_root(device),
                    vfs=self._vfs(device),
                )
            )
        nics.sort(key=lambda n: n.minor)
        return nics, skipped

    def _healthy(self, ibdev: str) -> bool:
        ports_dir = self.sysfs / "class" / "infiniband" / ibdev / "ports"
        try:
            ports = sorted(ports_dir.iterdir())
        except OSError:
            return False
        return bool(ports) and all("ACTIVE" in _read(port / "state") for port in ports)

    @staticmethod
    def _pcie_root(device: Path) -> str:
        try:
            resolved = str(device.resolve())
        except OSError:
            return ""
        match = _PCIE_ROOT.search(resolved)
        return match.group(0) if match else ""

    @staticmethod
    def _vfs(device: Path) -> tuple[str, ...]:
        if _int(_read(device / "sriov_numvfs"), 0) <= 0:
            return ()
        links: list[tuple[int, str]] = []
        try:
            children = list(device.iterdir())
        except OSError:
            return ()
        for child in children:
            match = _VIRTFN.match(child.name)
            if match is None or not child.is_symlink():
                continue
            try:
                links.append((int(match.group(1)), child.resolve().name))
            except OSError:
                continue
        return tuple(name for _, name in sorted(links))
