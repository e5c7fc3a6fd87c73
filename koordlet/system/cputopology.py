"""The machine's CPU topology from sysfs: sockets, NUMA nodes, cores and online logical CPUs.

Koordinator asks ``lscpu -e=CPU,NODE,SOCKET,CORE,...`` (``pkg/koordlet/util/cpuinfo.go``); pykoord reads
the same facts from the files lscpu reads, under a configurable root so tests hand in a fake tree:

- ``<sysfs>/devices/system/cpu/online`` (absent: every ``cpuN`` directory counts as online);
- ``cpuN/topology/physical_package_id`` (socket) and ``core_id`` (repeats per socket, so a core is the
  pair (socket, core_id));
- the NUMA node from ``<sysfs>/devices/system/node/nodeK/cpulist``, else a ``cpuN/nodeK`` link, else 0;
- NUMA memory: ``MemTotal`` of ``<sysfs>/devices/system/node/nodeK/meminfo``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from koordlet.system.resources import parse_cpuset

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")


@dataclass(frozen=True, slots=True)
class LogicalCPU:
    cpu: int
    core: int
    """``core_id`` as sysfs reports it (unique within a socket only)."""
    socket: int
    node: int


@dataclass(frozen=True, slots=True)
class NUMANode:
    id: int
    cpus: frozenset[int]
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class CPUTopology:
    cpus: tuple[LogicalCPU, ...]
    """Online CPUs sorted by (node, socket, core, cpu), as Koordinator sorts lscpu's rows."""
    numa_nodes: tuple[NUMANode, ...]

    @property
    def num_sockets(self) -> int:
        return len({c.socket for c in self.cpus})

    @property
    def num_cores(self) -> int:
        return len({(c.socket, c.core) for c in self.cpus})

    def all_cpus(self) -> frozenset[int]:
        return frozenset(c.cpu for c in self.cpus)


class TopologyError(Exception):
    """sysfs has no readable CPU topology; the message names the file."""


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise TopologyError(f"cannot read {path}: {exc}") from None


def _meminfo_total(path: Path) -> int:
    try:
        for line in path.read_text().splitlines():
            # "Node 0 MemTotal:       16318256 kB"
            if "MemTotal:" in line:
                return int(line.split("MemTotal:")[1].split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def read_cpu_topology(sysfs_root: Path) -> CPUTopology:
    """Raises :class:`TopologyError` when ``<sysfs>/devices/system/cpu`` lists no readable CPU."""
    cpu_base = sysfs_root / "devices" / "system" / "cpu"
    node_base = sysfs_root / "devices" / "system" / "node"
    try:
        cpu_dirs = {int(m.group(1)): p for p in cpu_base.iterdir() if (m := _CPU_DIR.match(p.name))}
    except OSError as exc:
        raise TopologyError(f"cannot list {cpu_base}: {exc}") from None
    online_file = cpu_base / "online"
    online = set(cpu_dirs)
    if online_file.exists():
        try:
            online &= parse_cpuset(online_file.read_text())
        except (OSError, ValueError) as exc:
            raise TopologyError(f"cannot read {online_file}: {exc}") from None
    node_of: dict[int, int] = {}
    numa: list[NUMANode] = []
    node_dirs: list[tuple[int, Path]] = []
    if node_base.is_dir():
        node_dirs = sorted((int(m.group(1)), p) for p in node_base.iterdir() if (m := _NODE_DIR.match(p.name)))
    for node_id, path in node_dirs:
        try:
            members = parse_cpuset((path / "cpulist").read_text())
        except (OSError, ValueError):
            members = frozenset()
        for cpu in members:
            node_of[cpu] = node_id
        numa.append(NUMANode(node_id, frozenset(members & online), _meminfo_total(path / "meminfo")))
    cpus: list[LogicalCPU] = []
    for cpu in sorted(online):
        topology = cpu_dirs[cpu] / "topology"
        node = node_of.get(cpu)
        if node is None:
            node = next((int(m.group(1)) for p in cpu_dirs[cpu].glob("node*") if (m := _NODE_DIR.match(p.name))), 0)
        cpus.append(LogicalCPU(cpu, _read_int(topology / "core_id"), _read_int(topology / "physical_package_id"), node))
    if not cpus:
        raise TopologyError(f"no online CPU under {cpu_base}")
    if not numa:
        numa = [NUMANode(0, frozenset(c.cpu for c in cpus), 0)]
    cpus.sort(key=lambda c: (c.node, c.socket, c.core, c.cpu))
    return CPUTopology(tuple(cpus), tuple(numa))


DEFAULT_CPU_MANAGER_STATE = Path("/var/lib/kubelet/cpu_manager_state")


def read_cpu_manager_state(path: Path) -> str | None:
    """The kubelet's CPU manager checkpoint as text; ``None`` when it is absent or unreadable."""
    try:
        return path.read_text()
    except OSError:
        return None
