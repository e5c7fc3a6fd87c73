"""The CPU accumulator against hand-computed cases on a 2-socket, 2-NUMA, 8-core, 16-thread machine
(CPU k and k+8 are siblings; NUMA 0 = 0-3,8-11, NUMA 1 = 4-7,12-15), and a randomized invariant check."""

from __future__ import annotations

import random

import pytest

from apis.extension.numa import CPUBindPolicy, CPUExclusivePolicy, NUMAAllocateStrategy, format_cpuset, parse_cpuset
from koord_scheduler.plugins.nodenumaresource.allocation import (
    ERR_NOT_ENOUGH_CPUS,
    AllocationError,
    AllocationRequest,
    allocate_cpus,
)
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology, symmetric_topology

T = symmetric_topology(sockets=2, nodes_per_socket=1, cores_per_node=4, threads=2)
ALL = frozenset(T.cpus)
FULL = CPUBindPolicy.FULL_PCPUS
SPREAD = CPUBindPolicy.SPREAD_BY_PCPUS
MOST = NUMAAllocateStrategy.MOST_ALLOCATED
LEAST = NUMAAllocateStrategy.LEAST_ALLOCATED
PCPU = CPUExclusivePolicy.PCPU_LEVEL


def _allocate(
    existing: str,
    n: int,
    policy: CPUBindPolicy = FULL,
    *,
    required: bool = False,
    strategy: NUMAAllocateStrategy = LEAST,
    exclusive: CPUExclusivePolicy = CPUExclusivePolicy.NONE,
    held: dict[int, CPUExclusivePolicy] | None = None,
) -> str:
    available = ALL - parse_cpuset(existing)
    request = AllocationRequest(n, policy, required, exclusive, strategy)
    try:
        return format_cpuset(allocate_cpus(T, available, held or {}, request))
    except AllocationError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize(
    ("existing", "n", "policy", "options", "want"),
    [
        pytest.param("", 4, FULL, {}, "0-1,8-9", id="T1-default-fullpcpus-first-numa-on-tie"),
        pytest.param("0-1,8-9", 4, FULL, {}, "4-5,12-13", id="T2a-least-allocated-picks-emptier-numa"),
        pytest.param("0-1,8-9", 4, FULL, {"strategy": MOST}, "2-3,10-11", id="T2b-most-allocated-packs"),
        pytest.param("", 4, SPREAD, {}, "0-3", id="T3a-spread-one-per-core"),
        pytest.param("", 6, SPREAD, {"required": True}, "0-5", id="T3b-required-spread-crosses-numa"),
        pytest.param("", 6, SPREAD, {}, "0-3,8-9", id="T3c-preferred-spread-stays-on-numa-with-siblings"),
        pytest.param("0-2,4,12", 4, SPREAD, {}, "3,8-10", id="T4-spread-prefers-more-distinct-free-cores"),
        pytest.param("0-2,4,12", 4, FULL, {"required": True}, "5-6,13-14", id="T5a-required-full"),
        pytest.param("0-2,4,12", 8, FULL, {"required": True}, "3,5-7,11,13-15", id="T5b-required-full-spills"),
        pytest.param(
            "0-2,4,12", 10, FULL, {"required": True}, f"error: {ERR_NOT_ENOUGH_CPUS}", id="T5c-required-full-short"
        ),
        pytest.param("0-2,4,12", 10, FULL, {}, "3,5-9,11,13-15", id="T5d-preferred-full-falls-back-to-half-cores"),
        pytest.param("", 10, FULL, {}, "0-4,8-12", id="T6a-more-than-a-numa-node"),
        pytest.param("0-1,8-9", 6, FULL, {}, "4-6,12-14", id="T7a-kubelet-held-cpus-excluded"),
        pytest.param("0-1,8-9", 8, FULL, {}, "4-7,12-15", id="T7b-whole-socket"),
        pytest.param(
            "0,1",
            3,
            SPREAD,
            {"strategy": MOST, "exclusive": PCPU, "held": {0: PCPU, 1: PCPU}},
            "4-6",
            id="T8a-pcpu-level-exclusive-skips-held-cores",
        ),
        pytest.param("0,1", 3, SPREAD, {"strategy": MOST}, "2-3,8", id="T8b-without-exclusive"),
        pytest.param("", 3, FULL, {}, "0-1,8", id="T10a-preferred-full-odd-takes-half-core"),
        pytest.param("", 17, FULL, {}, f"error: {ERR_NOT_ENOUGH_CPUS}", id="more-than-the-machine"),
    ],
)
def test_allocation_cases(existing: str, n: int, policy: CPUBindPolicy, options: dict, want: str) -> None:
    assert _allocate(existing, n, policy, **options) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("0-2,8", frozenset({0, 1, 2, 8}), id="range-and-single"),
        pytest.param(" 3 , 1-1 ", frozenset({1, 3}), id="spaces-and-one-element-range"),
        pytest.param("", frozenset(), id="empty"),
    ],
)
def test_parse_cpuset(text: str, want: frozenset[int]) -> None:
    assert parse_cpuset(text) == want


@pytest.mark.parametrize("text", ["a", "3-1", "-1", "1-x"])
def test_parse_cpuset_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="cpuset"):
        parse_cpuset(text)


def test_format_round_trip() -> None:
    assert format_cpuset({0, 1, 2, 4, 6, 7, 9}) == "0-2,4,6-7,9"
    assert parse_cpuset(format_cpuset({5, 0, 11, 10})) == {0, 5, 10, 11}


TOPOLOGIES = {
    "1s-1n-4c-smt": symmetric_topology(sockets=1, nodes_per_socket=1, cores_per_node=4, threads=2),
    "2s-2n-8c-smt": T,
    "2s-4n-16c": symmetric_topology(sockets=2, nodes_per_socket=2, cores_per_node=4, threads=1),
    "2s-4n-32c-smt": symmetric_topology(sockets=2, nodes_per_socket=2, cores_per_node=8, threads=2),
}


def _check_policy(topo: CPUTopology, cpus: tuple[int, ...], policy: CPUBindPolicy, required: bool) -> None:
    if not required:
        return
    cores: dict[int, int] = {}
    for c in cpus:
        cores[topo.cpus[c].core] = cores.get(topo.cpus[c].core, 0) + 1
    if policy is FULL:
        assert all(count == topo.cpus_per_core for count in cores.values()), cpus
    else:
        assert all(count == 1 for count in cores.values()), cpus


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_random_allocations_never_share_a_cpu(name: str) -> None:
    """Allocate and release at random: no CPU ever goes to two pods, every result has the size asked,
    and a required policy is always honoured on every core the pod touches."""
    topo = TOPOLOGIES[name]
    rng = random.Random(name)
    held: dict[str, tuple[int, ...]] = {}
    for step in range(400):
        if held and rng.random() < 0.35:
            held.pop(rng.choice(sorted(held)))
            continue
        taken = {c for cpus in held.values() for c in cpus}
        available = frozenset(topo.cpus) - taken
        policy = rng.choice([FULL, SPREAD])
        required = rng.random() < 0.5
        n = rng.randint(1, max(1, topo.num_cpus // 3))
        if required and policy is FULL:
            n = max(topo.cpus_per_core, n - n % topo.cpus_per_core)
        request = AllocationRequest(n, policy, required, CPUExclusivePolicy.NONE, rng.choice([MOST, LEAST]))
        try:
            cpus = allocate_cpus(topo, available, {}, request)
        except AllocationError:
            assert n > len(available) or required, (step, n, len(available))
            continue
        assert len(cpus) == n
        assert not taken & set(cpus), (step, cpus, taken)
        _check_policy(topo, cpus, policy, required)
        held[f"pod-{step}"] = cpus
