"""CPU topology read from sysfs: fake trees of three shapes, and this machine's real /sys."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from koordlet.system.cputopology import TopologyError, read_cpu_topology
from koordlet.system.resources import format_cpuset
from tests.unit.koordlet.topology.sysfs_tree import write_sysfs


@pytest.mark.parametrize(
    ("shape", "want"),
    [
        pytest.param(
            {"sockets": 1, "nodes_per_socket": 1, "cores_per_node": 4, "threads": 1},
            {"cpus": 4, "cores": 4, "sockets": 1, "nodes": {0: "0-3"}},
            id="1-socket-1-numa",
        ),
        pytest.param(
            {"sockets": 2, "nodes_per_socket": 1, "cores_per_node": 4, "threads": 2},
            {"cpus": 16, "cores": 8, "sockets": 2, "nodes": {0: "0-3,8-11", 1: "4-7,12-15"}},
            id="2-sockets-2-numa-smt",
        ),
        pytest.param(
            {"sockets": 2, "nodes_per_socket": 2, "cores_per_node": 2, "threads": 1},
            {"cpus": 8, "cores": 8, "sockets": 2, "nodes": {0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"}},
            id="4-numa-no-smt",
        ),
    ],
)
def test_fake_trees(tmp_path: Path, shape: dict[str, Any], want: dict[str, Any]) -> None:
    topo = read_cpu_topology(write_sysfs(tmp_path, **shape))
    got = {
        "cpus": len(topo.cpus),
        "cores": topo.num_cores,
        "sockets": topo.num_sockets,
        "nodes": {n.id: format_cpuset(n.cpus) for n in topo.numa_nodes},
    }
    assert got == want
    assert [(n.id, n.memory_bytes) for n in topo.numa_nodes] == [(i, (i + 1) * 1024 * 1024) for i in want["nodes"]]


def test_siblings_share_a_core_and_sort_by_node(tmp_path: Path) -> None:
    topo = read_cpu_topology(write_sysfs(tmp_path, sockets=2, nodes_per_socket=1, cores_per_node=4, threads=2))
    rows = [(c.cpu, c.core, c.socket, c.node) for c in topo.cpus[:4]]
    assert rows == [(0, 0, 0, 0), (8, 0, 0, 0), (1, 1, 0, 0), (9, 1, 0, 0)]


def test_offline_cpus_drop_out(tmp_path: Path) -> None:
    topo = read_cpu_topology(
        write_sysfs(tmp_path, sockets=1, nodes_per_socket=1, cores_per_node=4, threads=1, offline=(2,))
    )
    assert sorted(topo.all_cpus()) == [0, 1, 3]


def test_missing_tree_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="devices/system/cpu"):
        read_cpu_topology(tmp_path)


def test_this_machines_sysfs() -> None:
    topo = read_cpu_topology(Path("/sys"))
    assert len(topo.cpus) == os.cpu_count()  # sysconf(_SC_NPROCESSORS_ONLN): the online CPUs
    assert topo.num_sockets >= 1 and 1 <= topo.num_cores <= len(topo.cpus)
    assert frozenset().union(*(n.cpus for n in topo.numa_nodes)) == topo.all_cpus()
