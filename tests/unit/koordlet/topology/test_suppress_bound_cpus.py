"""CPU suppress's cpuset policy around bound CPUs: never on LSE CPUs, LSR CPUs shared in proportion."""

from __future__ import annotations

import pytest

from apis.extension.numa import format_cpuset, parse_cpuset
from koordlet.qosmanager.plugins.cpusuppress.policy import CPUInfo, choose_be_cpus_around_bound

# 2 sockets, 2 NUMA nodes, 8 cores, 16 threads; CPU k and k+8 are siblings of core k.
CPUS = [CPUInfo(cpu, cpu % 8, (cpu % 8) // 4, (cpu % 8) // 4) for cpu in range(16)]


@pytest.mark.parametrize(
    ("count", "lse", "lsr", "excluded", "want"),
    [
        pytest.param(4, "4-5,12-13", "0-3,8-9", "", "0,6,8,14", id="fact-sheet-step-5-lsr-share-2-ls-share-2"),
        pytest.param(2, "", "", "", "0,8", id="no-bound-pods-one-sibling-pair-largest-bucket"),
        pytest.param(16, "4-5,12-13", "", "", "", id="ls-pool-smaller-than-share-gives-nothing"),
        pytest.param(4, "0-7", "", "", "8-9,12-13", id="lse-cpus-never-chosen-singles-round-robin"),
        pytest.param(2, "", "", "0,8", "4,12", id="reserved-cpus-never-chosen-larger-bucket-first"),
    ],
)
def test_choose_be_cpus_around_bound(count: int, lse: str, lsr: str, excluded: str, want: str) -> None:
    got = choose_be_cpus_around_bound(
        count, CPUS, excluded=parse_cpuset(excluded), lse=parse_cpuset(lse), lsr=parse_cpuset(lsr)
    )
    assert format_cpuset(got) == want
    assert not got & parse_cpuset(lse)
