"""Fake sysfs trees: ``devices/system/cpu`` and ``devices/system/node`` for a symmetric machine."""

from __future__ import annotations

from pathlib import Path


def write_sysfs(
    root: Path, *, sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int, offline: tuple[int, ...] = ()
) -> Path:
    """Linux numbering: CPU ids go over every core first, then the SMT siblings (sibling of k is k + cores).
    Returns ``root``."""
    cores = sockets * nodes_per_socket * cores_per_node
    cpu_base = root / "devices" / "system" / "cpu"
    node_base = root / "devices" / "system" / "node"
    members: dict[int, list[int]] = {}
    total = cores * threads
    for cpu in range(total):
        core = cpu % cores
        socket = core // (nodes_per_socket * cores_per_node)
        node = core // cores_per_node
        topo = cpu_base / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "core_id").write_text(f"{core % (nodes_per_socket * cores_per_node)}\n")
        (topo / "physical_package_id").write_text(f"{socket}\n")
        members.setdefault(node, []).append(cpu)
    online = [c for c in range(total) if c not in offline]
    (cpu_base / "online").write_text(",".join(map(str, online)) + "\n")
    for node, cpus in members.items():
        d = node_base / f"node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(",".join(map(str, cpus)) + "\n")
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {(node + 1) * 1024} kB\nNode {node} MemFree: 1 kB\n")
    return root
