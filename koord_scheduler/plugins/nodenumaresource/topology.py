"""A node's CPU topology as the scheduler sees it (Koordinator ``topology_options.go``'s ``CPUTopology``).

Built from the ``node.koordinator.sh/cpu-topology`` annotation of the node's NodeResourceTopology. Core ids
there repeat per socket, so a core is keyed ``socket << 16 | core`` to make it unique on the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from apis.extension.numa import CPUInfo


@dataclass(frozen=True, slots=True)
class LogicalCPU:
    id: int
    core: int
    """Unique on the node: ``socket << 16 | core``."""
    socket: int
    node: int


@dataclass(frozen=True, slots=True)
class CPUTopology:
    """Logical CPUs by id, and the counts the allocator divides by (a symmetric machine is assumed, as
    upstream does: CPUs per core/node/socket are integer divisions of the totals)."""

    cpus: dict[int, LogicalCPU]
    num_sockets: int
    num_nodes: int
    num_cores: int
    cpus_by_core: dict[int, tuple[int, ...]] = field(repr=False)
    cpus_by_node: dict[int, frozenset[int]] = field(repr=False)

    @staticmethod
    def from_cpus(infos: Iterable[CPUInfo]) -> CPUTopology:
        cpus = {c.id: LogicalCPU(c.id, c.socket << 16 | c.core, c.socket, c.node) for c in infos}
        by_core: dict[int, list[int]] = {}
        by_node: dict[int, set[int]] = {}
        for cpu in cpus.values():
            by_core.setdefault(cpu.core, []).append(cpu.id)
            by_node.setdefault(cpu.node, set()).add(cpu.id)
        return CPUTopology(
            cpus=cpus,
            num_sockets=len({c.socket for c in cpus.values()}),
            num_nodes=len({(c.socket, c.node) for c in cpus.values()}),
            num_cores=len(by_core),
            cpus_by_core={k: tuple(sorted(v)) for k, v in by_core.items()},
            cpus_by_node={k: frozenset(v) for k, v in by_node.items()},
        )

    @property
    def num_cpus(self) -> int:
        return len(self.cpus)

    @property
    def valid(self) -> bool:
        return self.num_sockets > 0 and self.num_nodes > 0 and self.num_cores > 0 and self.num_cpus > 0

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def numa_node_ids(self) -> list[int]:
        return sorted(self.cpus_by_node)


def symmetric_topology(*, sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int) -> CPUTopology:
    """A Linux-numbered machine: CPU ids go core by core over every socket first, then SMT siblings
    (sibling of CPU k is k + total cores). Used by tests and benchmarks."""
    total_cores = sockets * nodes_per_socket * cores_per_node
    infos: list[CPUInfo] = []
    for thread in range(threads):
        for core in range(total_cores):
            socket = core // (nodes_per_socket * cores_per_node)
            node = core // cores_per_node
            core_in_socket = core % (nodes_per_socket * cores_per_node)
            infos.append(CPUInfo(thread * total_cores + core, core_in_socket, socket, node))
    return CPUTopology.from_cpus(infos)
