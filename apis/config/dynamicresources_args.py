"""``DynamicResourcesArgs`` (kube-scheduler ``pkg/scheduler/apis/config/types_pluginargs.go``): defaults
and validation (``ValidateDynamicResourcesArgs``) for the default feature gates of v1.35
(DRASchedulerFilterTimeout on, DRADeviceBindingConditions off)."""

from __future__ import annotations

from apis.config.args_base import ArgsModel
from apis.config.duration import GoDuration
from apis.config.errors import FieldError, forbidden, invalid, join_path

DEFAULT_FILTER_TIMEOUT = 10.0
"""``DynamicResourcesFilterTimeoutDefault``: seconds Filter may spend allocating for one node."""


class DynamicResourcesArgs(ArgsModel):
    filter_timeout: GoDuration | None = DEFAULT_FILTER_TIMEOUT
    """Seconds one node's allocation may take before the node is given up (0: no limit)."""
    binding_timeout: GoDuration | None = None
    """Only with DRADeviceBindingConditions, which is off: refused when set."""

    def field_errors(self, path: str) -> list[FieldError]:
        errors = []
        if self.filter_timeout is not None and self.filter_timeout < 0:
            errors.append(invalid(join_path(path, "filterTimeout"), self.filter_timeout, "must be zero or positive"))
        if self.binding_timeout is not None:
            errors.append(
                forbidden(
                    join_path(path, "bindingTimeout"),
                    "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled",
                )
            )
        return errors
