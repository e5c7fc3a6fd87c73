"""``ReservationArgs`` (Koordinator ``config/v1``): defaults and validation."""

from __future__ import annotations

from pydantic import field_validator

from apis.config.args_base import ArgsModel
from apis.config.errors import FieldError, forbidden, invalid, join_path
from apis.config.naming import is_extended_resource_name, qualified_name_errors
from apis.config.types import ConfigModel

DEFAULT_GC_DURATION_SECONDS = 86400

NOT_PROVIDED = "pykoord does not provide {what} yet; remove the field or leave it at its default"
REFUSED_FIELDS: dict[str, str] = {
    "resyncIntervalSeconds": "a periodic resync of the reservation controller",
}
"""ReservationArgs fields pykoord parses but does not act on: any value other than the default is
refused at load, naming the field, rather than silently accepted."""


class PreAllocationConfig(ConfigModel):
    """Pre-allocation: reservations that may take over resources of already-running pods."""

    enable_cluster_mode: bool = False
    cluster_label_key: str = "pod.koordinator.sh/is-pre-allocatable"
    cluster_priority_annotation_key: str = "pod.koordinator.sh/pre-allocatable-priority"
    prefer_no_pre_allocated_pods: bool = False


class ReservationSelectorIndex(ConfigModel):
    """Index reservations by label so owner matching does not scan every node."""

    enabled: bool = False
    key_prefixes: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()


class ReservationArgs(ArgsModel):
    enable_preemption: bool = False
    """Run preemption for pods that could fit a reservation after evicting lower-priority pods."""
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    controller_workers: int = 1
    """Reservations the controller writes at the same time."""
    gc_duration_seconds: int = DEFAULT_GC_DURATION_SECONDS
    """Delete expired/succeeded reservations after this long; 0 means the default (one day)."""
    gc_interval_seconds: int = 60
    disable_garbage_collection: bool = False
    resync_interval_seconds: int = 60
    pre_allocation_config: PreAllocationConfig = PreAllocationConfig()
    ignored_resources: tuple[str, ...] = ()
    """Extended resources the reservation Filter does not account (native ones cannot be ignored)."""
    ignored_resource_groups: tuple[str, ...] = ()
    reservation_selector_index: ReservationSelectorIndex = ReservationSelectorIndex()

    @field_validator("gc_duration_seconds")
    @classmethod
    def _default_gc_duration(cls, seconds: int) -> int:
        # Go defaults gcDurationSeconds when it is 0, not only when it is absent.
        return seconds or DEFAULT_GC_DURATION_SECONDS

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            errors.append(
                invalid(
                    join_path(path, "minCandidateNodesPercentage"),
                    self.min_candidate_nodes_percentage,
                    "must be in the range [0, 100]",
                )
            )
        for name in (
            "minCandidateNodesAbsolute",
            "gcDurationSeconds",
            "gcIntervalSeconds",
            "resyncIntervalSeconds",
        ):
            value = getattr(self, _snake(name))
            if value < 0:
                errors.append(invalid(join_path(path, name), value, "must be non-negative"))
        if self.controller_workers < 1:
            errors.append(invalid(join_path(path, "controllerWorkers"), self.controller_workers, "must be at least 1"))
        for i, resource in enumerate(self.ignored_resources):
            if not is_extended_resource_name(resource):
                errors.append(
                    invalid(
                        join_path(join_path(path, "ignoredResources"), i),
                        resource,
                        "must be an extended resource name (e.g. example.com/gpu); native resources cannot be ignored",
                    )
                )
        for i, group in enumerate(self.ignored_resource_groups):
            group_path = join_path(join_path(path, "ignoredResourceGroups"), i)
            if "/" in group:
                errors.append(invalid(group_path, group, "resource group name can't contain '/'"))
                continue
            messages = qualified_name_errors(group)
            if messages:
                errors += [invalid(group_path, group, message) for message in messages]
                continue
            if not is_extended_resource_name(group + "/x"):
                errors.append(
                    invalid(
                        group_path,
                        group,
                        "must be usable as an extended resource prefix (a valid DNS subdomain and not the "
                        'reserved "kubernetes.io" namespace)',
                    )
                )
        return errors + self._refusals(path, errors)

    def _refusals(self, path: str, invalid_errors: list[FieldError]) -> list[FieldError]:
        """Valid values pykoord cannot act on (an invalid one is reported as invalid only)."""
        bad = {e.path for e in invalid_errors}
        defaults = ReservationArgs()
        out: list[FieldError] = []
        for name, what in REFUSED_FIELDS.items():
            field_path = join_path(path, name)
            if any(p == field_path or p.startswith(field_path + "[") for p in bad):
                continue
            attr = _snake(name)
            if getattr(self, attr) != getattr(defaults, attr):
                out.append(forbidden(field_path, NOT_PROVIDED.format(what=what)))
        return out


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
