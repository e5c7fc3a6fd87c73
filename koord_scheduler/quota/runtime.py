"""The runtime-quota split of one parent's budget among its children, for one resource.

Pure functions (integers in, integers out) modelling Koordinator
pkg/scheduler/plugins/elasticquota/core/runtime_quota_calculator.go and
scale_minquota_when_over_root_res.go:

1. Seed every child: one whose (limited) request exceeds its min gets its min and is *hungry*; any other
   gets its request when it lends unused min, its full min when it does not.
2. The pool is the budget minus the seeds. While the pool is positive and someone is hungry, split the
   pool among the hungry children in proportion to their shared weight by the largest-remainder method
   (ties in remainder go to the smaller name), clamp each at its request and pour the excess into the
   next round.

Consequences worth knowing: a child never gets more than ``max(request, min)``; an unused pool stays
unassigned; the seeds may exceed the budget (mins over-commit it) unless mins are scaled first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Claim:
    """One child's numbers for one resource.

    ``request`` is the limited request (already capped at the child's max, and raised to its min when the
    child does not lend). ``weight`` is its shared weight; zero or negative never receives a share.
    """

    name: str
    min: int
    request: int
    weight: int
    lend: bool = True


def split_budget(budget: int, claims: Sequence[Claim]) -> list[int]:
    """Runtime of every claim (aligned with ``claims``) when ``budget`` is shared among them."""
    return split_columns(
        budget,
        [c.name for c in claims],
        mins=[c.min for c in claims],
        requests=[c.request for c in claims],
        weights=[c.weight for c in claims],
        lends=[c.lend for c in claims],
    )


def split_columns(
    budget: int,
    names: Sequence[str],
    *,
    mins: Sequence[int],
    requests: Sequence[int],
    weights: Sequence[int],
    lends: Sequence[bool],
) -> list[int]:
    """:func:`split_budget` over parallel columns (the tree's hot path builds no objects)."""
    runtime: list[int] = []
    hungry: list[int] = []
    want = 0
    for i, (m, r) in enumerate(zip(mins, requests, strict=True)):
        if r > m:
            runtime.append(m)
            hungry.append(i)
            want += r - m
        else:
            runtime.append(r if lends[i] else m)
    pool = budget - sum(runtime)
    if pool <= 0 or not hungry:
        return runtime
    if pool >= want and all(weights[i] > 0 for i in hungry):
        # No contention: every hungry child gets its whole request, the rest of the pool stays unassigned.
        for i in hungry:
            runtime[i] = requests[i]
        return runtime
    while pool > 0 and hungry:
        takers = [i for i in hungry if weights[i] > 0]
        total_weight = sum(weights[i] for i in takers)
        if total_weight <= 0:
            break
        shares = {i: divmod(pool * weights[i], total_weight) for i in takers}
        leftover = pool - sum(base for base, _ in shares.values())
        by_remainder = sorted(takers, key=lambda i: (-shares[i][1], names[i]))
        for rank, i in enumerate(by_remainder):
            runtime[i] += shares[i][0] + (1 if rank < leftover else 0)
        pool = 0
        still_hungry: list[int] = []
        for i in hungry:
            if runtime[i] >= requests[i]:
                pool += runtime[i] - requests[i]
                runtime[i] = requests[i]
            else:
                still_hungry.append(i)
        hungry = still_hungry
    return runtime


def scale_mins(budget: int, mins: Sequence[int]) -> list[int]:
    """Mins scaled down in proportion when they add up to more than ``budget`` (truncated), else as given.

    Koordinator's ``enableMinQuotaScale``: ``min_i * budget / sum(min)`` in that dimension.
    """
    total = sum(mins)
    if total <= budget or total <= 0:
        return list(mins)
    return [max(budget, 0) * m // total for m in mins]
