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
    runtime: list[int] = []
    hungry: list[int] = []
    for i, claim in enumerate(claims):
        if claim.request > claim.min:
            runtime.append(claim.min)
            hungry.append(i)
        else:
            runtime.append(claim.request if claim.lend else claim.min)
    pool = budget - sum(runtime)
    while pool > 0 and hungry:
        takers = [i for i in hungry if claims[i].weight > 0]
        total_weight = sum(claims[i].weight for i in takers)
        if total_weight <= 0:
            break
        shares = {i: divmod(pool * claims[i].weight, total_weight) for i in takers}
        leftover = pool - sum(base for base, _ in shares.values())
        by_remainder = sorted(takers, key=lambda i: (-shares[i][1], claims[i].name))
        for rank, i in enumerate(by_remainder):
            runtime[i] += shares[i][0] + (1 if rank < leftover else 0)
        pool = 0
        still_hungry: list[int] = []
        for i in hungry:
            if runtime[i] >= claims[i].request:
                pool += runtime[i] - claims[i].request
                runtime[i] = claims[i].request
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
