"""The ``ResourceClaims`` section of ``koord-scheduler simulate``: each allocated claim, its devices and
the pods it is reserved for."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apis.resource.types import ResourceClaim


def claims_report(claims: Iterable[ResourceClaim]) -> tuple[str, list[dict[str, Any]]]:
    rows = []
    for claim in sorted(claims, key=lambda c: c.key):
        allocation = claim.allocation
        if allocation is None:
            continue
        node = ""
        if allocation.node_selector:
            for term in allocation.node_selector:
                for requirement in term.match_fields:
                    if requirement.key == "metadata.name" and requirement.values:
                        node = requirement.values[0]
        rows.append(
            {
                "claim": claim.key,
                "node": node,
                "devices": ", ".join(f"{r.driver}/{r.pool}/{r.device} ({r.request})" for r in allocation.results),
                "reservedFor": ", ".join(ref.name for ref in claim.reserved_for),
            }
        )
    return "ResourceClaims", rows
