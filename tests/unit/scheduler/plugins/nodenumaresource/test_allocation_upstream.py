"""The accumulator against the cases of Koordinator's own table tests (pkg/scheduler/plugins/nodenumaresource
cpu_accumulator_test.go: TestTakeFullPCPUs*, TestTakeSpreadByPCPUs*), on their topology numbering: SMT
siblings are adjacent ids (CPUs 0 and 1 share core 0), cores numbered across the machine."""

from __future__ import annotations

import pytest

from apis.extension.numa import CPUBindPolicy, CPUInfo, NUMAAllocateStrategy, format_cpuset, parse_cpuset
from koord_scheduler.plugins.nodenumaresource.allocation import AllocationRequest, take_cpus
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology

FULL, SPREAD = CPUBindPolicy.FULL_PCPUS, CPUBindPolicy.SPREAD_BY_PCPUS
MOST, LEAST = NUMAAllocateStrategy.MOST_ALLOCATED, NUMAAllocateStrategy.LEAST_ALLOCATED


def upstream_topology(sockets: int, nodes_per_socket: int, cores_per_node: int, per_core: int) -> CPUTopology:
    infos = []
    cpu = core = node = 0
    for socket in range(sockets):
        for _ in range(nodes_per_socket):
            for _ in range(cores_per_node):
                for _ in range(per_core):
                    infos.append(CPUInfo(cpu, core, socket, node))
                    cpu += 1
                core += 1
            node += 1
    return CPUTopology.from_cpus(infos)


@pytest.mark.parametrize(
    ("shape", "allocated", "n", "policy", "strategy", "want"),
    [
        pytest.param((1, 1, 4, 2), "", 2, FULL, MOST, "0-1", id="full-most-non-numa"),
        pytest.param((1, 1, 4, 2), "0-1", 2, FULL, MOST, "2-3", id="full-most-with-allocated"),
        pytest.param((2, 1, 4, 2), "", 8, FULL, MOST, "0-7", id="full-most-whole-socket"),
        pytest.param((2, 1, 4, 2), "", 12, FULL, MOST, "0-11", id="full-most-across-socket"),
        pytest.param((2, 1, 4, 2), "0-1", 8, FULL, MOST, "8-15", id="full-most-whole-socket-partial"),
        pytest.param((2, 2, 4, 2), "0-5,16-23", 6, FULL, MOST, "24-29", id="full-most-smallest-idle-socket"),
        pytest.param((2, 2, 4, 2), "0-5,16-23", 12, FULL, MOST, "6-15,24-25", id="full-most-most-on-same-socket"),
        pytest.param((2, 2, 4, 2), "0-3,8-11", 4, FULL, MOST, "4-7", id="full-most-first-socket"),
        pytest.param((2, 2, 2, 2), "0,2,4,8,12", 4, FULL, MOST, "10-11,14-15", id="full-most-less-spread"),
        pytest.param((2, 2, 2, 2), "0,2,4,8,10,12", 6, FULL, MOST, "5-7,13-15", id="full-most-most-spread"),
        pytest.param((2, 2, 2, 2), "0,2,4,8-10,12", 6, FULL, MOST, "6-7,11,13-15", id="full-most-spread-smallest-idle"),
        pytest.param((2, 2, 4, 2), "0-5,16-23", 6, FULL, LEAST, "8-13", id="full-least-most-idle-socket"),
        pytest.param((2, 2, 4, 2), "0-5,16-23", 12, FULL, LEAST, "6-15,24-25", id="full-least-most-same-socket"),
        pytest.param((2, 2, 4, 2), "0-3,8-11", 4, FULL, LEAST, "16-19", id="full-least-second-socket"),
        pytest.param((2, 2, 2, 2), "0,2,4,8,12", 4, FULL, LEAST, "10-11,14-15", id="full-least-less-spread"),
        pytest.param((2, 2, 2, 2), "0,2,4,8,10,12", 6, FULL, LEAST, "1,3,6-7,14-15", id="full-least-less-spread-2"),
        pytest.param((2, 2, 4, 2), "0,2,4,8-10,12", 6, FULL, LEAST, "16-21", id="full-least-most-idle-socket-3"),
        pytest.param((1, 1, 4, 2), "", 4, SPREAD, MOST, "0,2,4,6", id="spread-most-non-numa"),
        pytest.param((2, 1, 4, 2), "0,2", 4, SPREAD, MOST, "1,3-4,6", id="spread-most-partial-socket"),
        pytest.param((2, 1, 4, 2), "0-3", 4, SPREAD, MOST, "8,10,12,14", id="spread-most-full-free-socket"),
        pytest.param((2, 1, 4, 2), "0,2", 6, SPREAD, MOST, "1,3-7", id="spread-most-overlapped-cores"),
        pytest.param((2, 1, 4, 2), "0,2", 4, SPREAD, LEAST, "8,10,12,14", id="spread-least-partial-socket"),
        pytest.param((2, 1, 4, 2), "0,2", 6, SPREAD, LEAST, "8-12,14", id="spread-least-overlapped-cores"),
    ],
)
def test_koordinator_cases(  # noqa: PLR0917 (one parameter per table column)
    shape: tuple[int, int, int, int],
    allocated: str,
    n: int,
    policy: CPUBindPolicy,
    strategy: NUMAAllocateStrategy,
    want: str,
) -> None:
    topo = upstream_topology(*shape)
    available = frozenset(topo.cpus) - parse_cpuset(allocated)
    got = take_cpus(topo, available, {}, AllocationRequest(n, policy, False, strategy=strategy))
    assert format_cpuset(got) == want
