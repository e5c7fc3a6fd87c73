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

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from apis.core.errors import ParseError
from apis.core.jsonfields import Json, as_map, check_item, get_list, get_str, is_map

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


class ResizableContainer(Protocol):
    """A container as the pod parser holds it (nano-unit maps, defaulted requests)."""

    name: str
    requests: dict[str, int]
    limits: dict[str, int]


NanosOf = Callable[[Json, str], dict[str, int]]
"""``nanos_of(obj, key)``: the resource list ``obj[key]`` in nano-units (the pod parser's reader)."""


def apply_resize_status(status: Json, containers: Sequence[ResizableContainer], nanos_of: NanosOf) -> None:
    """Account ``containers`` (the regular containers and the sidecars; other init containers are not
    resized) at their effective requests and limits, from the pod's ``status``. Raises ``ParseError``
    under ``status``."""
    try:
        reported: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]] = {}
        for key in ("containerStatuses", "initContainerStatuses"):
            for i, item in enumerate(get_list(status, key)):
                entry = check_item(item, key, i)
                resources = entry.get("resources")
                if resources is None:
                    continue  # upstream: only a status that reports resources counts
                try:
                    resources = as_map(resources, "resources")
                    actuated = nanos_of(resources, "requests")
                    actuated_limits = nanos_of(resources, "limits")
                    allocated = nanos_of(entry, "allocatedResources")
                except ParseError as err:
                    raise err.under(f"{key}[{i}]") from None
                reported[get_str(entry, "name")] = (actuated, allocated, actuated_limits)
        if not reported:
            return
        infeasible = any(
            is_map(c) and c.get("type") == RESIZE_PENDING and c.get("reason") == REASON_INFEASIBLE
            for c in get_list(status, "conditions")
        )
    except ParseError as err:
        raise err.under("status") from None
    apply_reported(containers, reported, infeasible=infeasible)


Reported = Mapping[str, tuple[NanoResources, NanoResources, NanoResources]]
"""Container name -> (actuated requests, allocated resources, actuated limits) of each container status
that reports its resources."""


def apply_reported(containers: Sequence[ResizableContainer], reported: Reported, *, infeasible: bool) -> None:
    """The accounting of :func:`apply_resize_status`, from the statuses already read (``infeasible``:
    the pod has ``PodResizePending`` with reason ``Infeasible``)."""
    for c in containers:
        found = reported.get(c.name)
        if found is None:
            continue
        actuated, allocated, actuated_limits = found
        c.requests = effective_requests(c.requests, actuated, allocated, infeasible=infeasible)
        c.limits = effective_limits(c.limits, actuated_limits, infeasible=infeasible)
