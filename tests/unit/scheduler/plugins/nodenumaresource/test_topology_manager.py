"""NUMA hint merging and admission per policy (semantics of Koordinator's frameworkext/topologymanager)."""

from __future__ import annotations

import pytest

from apis.extension.numa import NUMATopologyPolicy
from koord_scheduler.plugins.nodenumaresource.topology_manager import (
    NUMAExclusive,
    NUMAHint,
    NUMANodeStatus,
    admit,
    mask_text,
    merge_hints,
    narrower,
)

N0, N1, BOTH = 0b01, 0b10, 0b11
SINGLE = NUMATopologyPolicy.SINGLE_NUMA_NODE
RESTRICTED = NUMATopologyPolicy.RESTRICTED
BEST_EFFORT = NUMATopologyPolicy.BEST_EFFORT


def hints(*items: tuple[int, bool, int]) -> list[NUMAHint]:
    return [NUMAHint(mask, preferred, score) for mask, preferred, score in items]


@pytest.mark.parametrize(
    ("mask", "want"),
    [
        pytest.param(None, "<nil>", id="nil"),
        pytest.param(0b1, "01", id="node0"),
        pytest.param(0b10, "10", id="node1"),
        pytest.param(0b11, "11", id="both"),
        pytest.param(0b100, "100", id="node2-not-padded-at-exact-power"),
        pytest.param(0b101, "0101", id="nodes0and2"),
        pytest.param(0b1000, "1000", id="node3"),
    ],
)
def test_mask_text_is_go_bitmask_string(mask: int | None, want: str) -> None:
    assert mask_text(mask) == want


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        pytest.param(0b01, 0b11, True, id="fewer-nodes"),
        pytest.param(0b11, 0b01, False, id="more-nodes"),
        pytest.param(0b01, 0b10, True, id="same-count-lower-value"),
        pytest.param(0b1001, 0b0110, False, id="same-count-higher-value"),
    ],
)
def test_narrower(a: int, b: int, want: bool) -> None:
    assert narrower(a, b) is want


@pytest.mark.parametrize(
    ("policy", "cpu", "memory", "statuses", "exclusive", "want"),
    [
        pytest.param(
            SINGLE,
            [(N0, True, 50), (N1, True, 60), (BOTH, False, 30)],
            [(N0, True, 50), (N1, True, 60), (BOTH, False, 30)],
            {},
            NUMAExclusive.NONE,
            (N1, True, []),
            id="single-picks-higher-scored-single-node",
        ),
        pytest.param(
            SINGLE,
            [(BOTH, True, 10)],
            [(N0, True, 50), (N1, True, 60), (BOTH, False, 30)],
            {},
            NUMAExclusive.NONE,
            (
                None,
                False,
                ["Unaligned NUMA Hint cause cpu prefer [11] among [11],memory prefer [01 10] among [01 10 11]"],
            ),
            id="single-refuses-when-cpu-needs-both",
        ),
        pytest.param(
            RESTRICTED,
            [(BOTH, True, 10)],
            [(N0, True, 50), (N1, True, 60), (BOTH, False, 30)],
            {},
            NUMAExclusive.NONE,
            (
                N1,
                False,
                ["Unaligned NUMA Hint cause cpu prefer [11] among [11] & memory prefer [01 10] among [01 10 11]"],
            ),
            id="restricted-refuses-unpreferred-merge",
        ),
        pytest.param(
            RESTRICTED,
            [(BOTH, True, 10)],
            [(N0, True, 50), (N1, True, 60), (BOTH, True, 30)],
            {},
            NUMAExclusive.NONE,
            (BOTH, True, []),
            id="restricted-admits-preferred-multi-numa",
        ),
        pytest.param(
            BEST_EFFORT,
            [(BOTH, True, 10)],
            [(N0, True, 50), (N1, True, 60), (BOTH, False, 30)],
            {},
            NUMAExclusive.NONE,
            (BOTH, True, []),
            id="best-effort-unsatisfied-falls-back-to-all-nodes",
        ),
        pytest.param(
            SINGLE,
            [(N0, True, 90), (N1, True, 10)],
            [],
            {},
            NUMAExclusive.NONE,
            (None, False, ["Unsatisfied NUMA memory"]),
            id="unsatisfied-resource",
        ),
        pytest.param(
            SINGLE,
            [(N0, True, 90), (N1, True, 10)],
            [(N0, True, 90), (N1, True, 10)],
            {0: NUMANodeStatus.SHARED},
            NUMAExclusive.REQUIRED,
            (N1, True, []),
            id="exclusive-single-avoids-shared-node",
        ),
        pytest.param(
            SINGLE,
            [(N0, True, 90), (N1, True, 10)],
            [(N0, True, 90), (N1, True, 10)],
            {0: NUMANodeStatus.SHARED},
            NUMAExclusive.PREFERRED,
            (N0, True, []),
            id="preferred-exclusive-ignores-status",
        ),
        pytest.param(
            RESTRICTED,
            [(BOTH, True, 10)],
            [(BOTH, True, 10)],
            {1: NUMANodeStatus.SINGLE},
            NUMAExclusive.REQUIRED,
            (BOTH, False, ["Unaligned NUMA Hint cause cpu prefer [11] among [11] & memory prefer [11] among [11]"]),
            id="exclusive-multi-avoids-single-node",
        ),
    ],
)
def test_admit(  # noqa: PLR0917 (pytest passes parameters positionally)
    policy: NUMATopologyPolicy,
    cpu: list[tuple[int, bool, int]],
    memory: list[tuple[int, bool, int]],
    statuses: dict[int, NUMANodeStatus],
    exclusive: NUMAExclusive,
    want: tuple[int | None, bool, list[str]],
) -> None:
    best, admitted, reasons = admit(
        policy, [0, 1], [{"cpu": hints(*cpu), "memory": hints(*memory)}], exclusive, statuses
    )
    assert (best.mask, admitted, reasons) == want


def test_provider_without_hints_means_any_numa_node() -> None:
    best, admitted, reasons = admit(SINGLE, [0, 1], [{}], NUMAExclusive.NONE, {})
    assert (best.mask, best.preferred, admitted, reasons) == (None, True, True, [])


def test_merge_prefers_narrower_then_score() -> None:
    lists = [hints((BOTH, True, 100), (N1, True, 5), (N0, True, 7))]
    assert merge_hints([0, 1], lists, NUMAExclusive.NONE, {}).mask == N0
