"""In-place pod resize (GA in Kubernetes 1.35): the requests and limits the scheduler accounts for a pod
whose containers are being resized (``k8s.io/component-helpers/resource`` ``determineEffectiveRequests`` /
``determineEffectiveLimits``, used by kube-scheduler with ``UseStatusResources`` since InPlacePodVerticalScaling
is locked on).

For a container (or sidecar) whose status reports its resources, the effective request is the larger of
what the spec asks, what the kubelet actuated (``status.containerStatuses[].resources.requests``) and what
it allocated (``allocatedResources``), resource by resource; so a resize that is pending or in progress
can never make a node look emptier than it is. When the kubelet marked the resize infeasible
(``PodResizePending`` with reason ``Infeasible``) the spec is ignored: only actuated and allocated count.
Limits: the larger of spec and actuated, or the actuated ones alone when infeasible. Pure functions over
nano-unit maps.
"""

from __future__ import annotations

from collections.abc import Mapping

NanoResources = Mapping[str, int]

RESIZE_PENDING = "PodResizePending"
REASON_INFEASIBLE = "Infeasible"


def _max(*lists: NanoResources) -> dict[str, int]:
    out: dict[str, int] = {}
    for resources in lists:
        for name, amount in resources.items():
            if name not in out or amount > out[name]:
                out[name] = amount
    return out


def effective_requests(
    spec: NanoResources, actuated: NanoResources, allocated: NanoResources, *, infeasible: bool
) -> dict[str, int]:
    """``determineEffectiveRequests``."""
    if infeasible:
        return _max(actuated, allocated)
    return _max(spec, actuated, allocated)


def effective_limits(spec: NanoResources, actuated: NanoResources, *, infeasible: bool) -> dict[str, int]:
    """``determineEffectiveLimits``."""
    if infeasible:
        return dict(actuated)
    return _max(spec, actuated)
