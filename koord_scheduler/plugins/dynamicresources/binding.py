"""DynamicResources' writes to ResourceClaims (kube-scheduler ``dynamicresources.go`` ``bindClaim`` and
``Unreserve``).

PreBind records what Reserve decided: the finalizer (``resource.kubernetes.io/delete-protection``) in an
ordinary update, then the allocation and the pod in ``status.reservedFor`` in a status update. Every
write carries the claim's ``resourceVersion`` as a precondition, so a concurrent change (another pod
reserving a shared claim) is a conflict, retried on the newest claim the watch has, never a lost entry;
upstream does the same with Update/UpdateStatus and ``retry.RetryOnConflict`` (5 tries). Unreserve takes
the pod out of ``reservedFor`` the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from apis.core.types import Pod
from apis.resource.encode import allocation_json
from apis.resource.types import FINALIZER, AllocationResult, ConsumerReference, ResourceClaim
from koord_scheduler.framework.errors import ClusterError, is_conflict
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.plugins.dynamicresources.kinds import RESOURCE_CLAIM

RETRIES = 5
RETRY_DELAY_S = 0.01


class ClaimWriteError(Exception):
    """A claim could not be written; the message names the claim."""


def _reserved_for_json(refs: tuple[ConsumerReference, ...]) -> list[dict[str, Any]]:
    out = []
    for ref in refs:
        entry: dict[str, Any] = {"resource": ref.resource, "name": ref.name, "uid": ref.uid}
        if ref.api_group:
            entry["apiGroup"] = ref.api_group
        out.append(entry)
    return out


async def bind_claim(
    cluster: ClusterClient,
    claim: ResourceClaim,
    pod: Pod,
    allocation: AllocationResult | None,
    latest: Callable[[str], ResourceClaim | None],
) -> ResourceClaim:
    """Write ``allocation`` (when the scheduler allocated the claim) and reserve the claim for ``pod``;
    the claim as the API server returned it. ``latest(key)`` gives the newest watched claim after a
    conflict. Raises :class:`ClaimWriteError`."""
    current = claim
    for attempt in range(RETRIES):
        if attempt:
            await asyncio.sleep(RETRY_DELAY_S * attempt)
            refreshed = latest(claim.key)
            if refreshed is None:
                raise ClaimWriteError(f"get updated claim {claim.key} after conflict: not found")
            current = refreshed
        if current.meta.deletion_timestamp is not None:
            raise ClaimWriteError(f"claim {claim.key} got deleted in the meantime")
        if allocation is not None and current.allocation is not None:
            raise ClaimWriteError(f"claim {claim.key} got allocated elsewhere in the meantime")
        try:
            if allocation is not None and FINALIZER not in current.finalizers:
                current = await cluster.patch_object(
                    RESOURCE_CLAIM,
                    current.name,
                    {
                        "metadata": {
                            "finalizers": [*current.finalizers, FINALIZER],
                            "resourceVersion": current.meta.resource_version,
                        }
                    },
                    namespace=current.namespace,
                )
            if current.reserved_for_pod(pod.uid):
                return current
            status: dict[str, Any] = {
                "reservedFor": _reserved_for_json(
                    (*current.reserved_for, ConsumerReference(resource="pods", name=pod.name, uid=pod.uid))
                )
            }
            if allocation is not None:
                status["allocation"] = allocation_json(allocation)
            updated: ResourceClaim = await cluster.patch_object_status(
                RESOURCE_CLAIM,
                current.name,
                {"metadata": {"resourceVersion": current.meta.resource_version}, "status": status},
                namespace=current.namespace,
            )
            return updated
        except ClusterError as err:
            if is_conflict(err) and attempt + 1 < RETRIES:
                continue
            what = "add allocation and reservation to" if allocation is not None else "add reservation to"
            raise ClaimWriteError(f"{what} claim {claim.key}: {err}") from None
    raise ClaimWriteError(f"claim {claim.key}: too many conflicts")  # pragma: no cover


async def unreserve_claim(
    cluster: ClusterClient, claim: ResourceClaim, pod: Pod, latest: Callable[[str], ResourceClaim | None]
) -> ResourceClaim | None:
    """Take ``pod`` out of the claim's ``reservedFor``; the updated claim, or None when there was nothing
    to do. Raises :class:`ClaimWriteError`."""
    current: ResourceClaim | None = claim
    for attempt in range(RETRIES):
        if attempt:
            await asyncio.sleep(RETRY_DELAY_S * attempt)
            current = latest(claim.key)
        if current is None or not current.reserved_for_pod(pod.uid):
            return None
        remaining = tuple(ref for ref in current.reserved_for if ref.uid != pod.uid)
        try:
            updated: ResourceClaim = await cluster.patch_object_status(
                RESOURCE_CLAIM,
                current.name,
                {
                    "metadata": {"resourceVersion": current.meta.resource_version},
                    "status": {"reservedFor": _reserved_for_json(remaining) or None},
                },
                namespace=current.namespace,
            )
            return updated
        except ClusterError as err:
            if is_conflict(err) and attempt + 1 < RETRIES:
                continue
            raise ClaimWriteError(f"unreserve claim {claim.key}: {err}") from None
    return None  # pragma: no cover


async def deallocate_claim(cluster: ClusterClient, claim: ResourceClaim) -> ResourceClaim:
    """PostFilter's deallocation: clear ``allocation``, ``reservedFor`` and ``devices``."""
    try:
        updated: ResourceClaim = await cluster.patch_object_status(
            RESOURCE_CLAIM,
            claim.name,
            {
                "metadata": {"resourceVersion": claim.meta.resource_version},
                "status": {"allocation": None, "reservedFor": None, "devices": None},
            },
            namespace=claim.namespace,
        )
    except ClusterError as err:
        raise ClaimWriteError(f"deallocate claim {claim.key}: {err}") from None
    return updated
