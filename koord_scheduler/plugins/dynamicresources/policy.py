"""Pure decisions of DynamicResources: which claims a pod needs (``foreachPodResourceClaim``,
``resourceclaim.Name`` and ``IsForPod``) and the prioritized-list score (``computeScore``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from apis.core.types import Pod
from apis.resource.types import FIRST_AVAILABLE_MAX_SIZE, AllocationResult, ResourceClaim


@dataclass(frozen=True, slots=True)
class ClaimProblem:
    """Why the pod cannot be scheduled now (upstream's error text)."""

    message: str


def claim_not_found(name: str) -> str:
    return f'resourceclaim.resource.k8s.io "{name}" not found'


def pod_claims(pod: Pod, lookup: Callable[[str], ResourceClaim | None]) -> list[ResourceClaim] | ClaimProblem:
    """The claims ``pod`` needs, in ``spec.resourceClaims`` order, looked up by ``namespace/name``. A
    template's claim that the controller decided not to create (status entry without a name) is skipped,
    as upstream skips it."""
    out: list[ResourceClaim] = []
    for entry in pod.resource_claims:
        must_check_owner = False
        if entry.claim_name:
            name = entry.claim_name
        else:
            if entry.name not in pod.resource_claim_statuses:
                return ClaimProblem(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
            name = pod.resource_claim_statuses[entry.name]
            if not name:
                continue
            must_check_owner = True
        claim = lookup(f"{pod.namespace}/{name}")
        if claim is None:
            return ClaimProblem(claim_not_found(name))
        if claim.meta.deletion_timestamp is not None:
            return ClaimProblem(f'resourceclaim "{claim.name}" is being deleted')
        if must_check_owner and not _controlled_by(claim, pod):
            return ClaimProblem(
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
        out.append(claim)
    return out


def _controlled_by(claim: ResourceClaim, pod: Pod) -> bool:
    if claim.namespace != pod.namespace:
        return False
    return any(ref.controller and ref.uid == pod.uid for ref in claim.meta.owner_references)


def prioritized_list_score(claims: Sequence[ResourceClaim], allocations: Sequence[AllocationResult]) -> int:
    """``computeScore``: for every subrequest chosen, ``8 - its index`` (earlier alternatives score
    higher). ``allocations`` are the node's results for the unallocated claims, in order; allocated
    claims count with their own allocation."""
    score = 0
    pending = iter(allocations)
    for claim in claims:
        allocation = claim.allocation if claim.allocation is not None else next(pending, None)
        if allocation is None:
            continue
        chosen = {r.request for r in allocation.results if r.request.count("/") == 1}
        for request in claim.spec.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX_SIZE - i
    return score
