"""What Reserve chose for a pod, and the annotations PreBind writes from it (``resource-status``, and
``resource-spec`` back-filled; Koordinator ``preBindObject``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.core.quantity import format_quantity
from apis.extension.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    CPUBindPolicy,
    NUMANodeResource,
    ResourceSpec,
    ResourceStatus,
    format_cpuset,
)
from koord_scheduler.plugins.nodenumaresource import policy


@dataclass(slots=True)
class ReservedCPUs:
    node_name: str
    cpus: tuple[int, ...]
    bind_policy: CPUBindPolicy
    required: bool
    numa: dict[int, dict[str, int]] = field(default_factory=dict)
    reservation: str = ""
    """The Reservation's name when the pod is its reserve pod (PreBind writes the Reservation)."""


def status_annotations(reserved: ReservedCPUs, spec: ResourceSpec) -> dict[str, str | None]:
    """The annotations PreBind writes on the pod (or the Reservation of a reserve pod)."""
    shares = tuple(
        NUMANodeResource(node, {name: format_quantity(name, amount) for name, amount in sorted(amounts.items())})
        for node, amounts in sorted(reserved.numa.items())
    )
    annotations: dict[str, str | None] = {
        ANNOTATION_RESOURCE_STATUS: ResourceStatus(format_cpuset(reserved.cpus), shares).to_json()
    }
    if reserved.cpus:
        backfill = policy.resource_spec_backfill(spec, reserved.bind_policy, reserved.required)
        if backfill is not None:
            annotations[ANNOTATION_RESOURCE_SPEC] = backfill.to_json()
    return annotations
