"""``scheduler_reservation_status_phase{name,phase}`` and ``scheduler_reservation_resource{name,resource,type}``."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge

if TYPE_CHECKING:
    from koord_scheduler.plugins.reservation.cache import ReservationEntry

PHASES = ("Pending", "Available", "Succeeded", "Waiting", "Failed")


class ReservationMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        registry = registry if isinstance(registry, CollectorRegistry) else CollectorRegistry()
        self.phase = Gauge(
            "scheduler_reservation_status_phase",
            "The current phase of each reservation (1 for its phase, 0 for the others).",
            ["name", "phase"],
            registry=registry,
        )
        self.resource = Gauge(
            "scheduler_reservation_resource",
            "Reservation resources: type allocatable, allocated or utilization (allocated/allocatable). "
            "cpu in cores, others in base units.",
            ["name", "resource", "type"],
            registry=registry,
        )
        self._resources: dict[str, set[str]] = {}

    def set_phase(self, name: str, phase: str) -> None:
        for p in PHASES:
            self.phase.labels(name, p).set(1 if p == phase else 0)

    def update(self, entry: ReservationEntry) -> None:
        name = entry.record.name
        self.set_phase(name, "Succeeded" if entry.exhausted else entry.record.phase)
        allocatable = entry.allocatable
        allocated = entry.allocated()
        seen = self._resources.setdefault(name, set())
        for resource, total in allocatable.items():
            scale = 1000.0 if resource == "cpu" else 1.0
            used = allocated.get(resource, 0)
            self.resource.labels(name, resource, "allocatable").set(total / scale)
            self.resource.labels(name, resource, "allocated").set(used / scale)
            self.resource.labels(name, resource, "utilization").set(used / total if total else 0.0)
            seen.add(resource)

    def remove(self, name: str) -> None:
        for p in PHASES:
            with contextlib.suppress(KeyError):
                self.phase.remove(name, p)
        for resource in self._resources.pop(name, set()):
            for kind in ("allocatable", "allocated", "utilization"):
                with contextlib.suppress(KeyError):
                    self.resource.remove(name, resource, kind)
