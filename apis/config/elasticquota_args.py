"""``ElasticQuotaArgs`` (Koordinator ``config/v1``): defaults and validation.

Defaults are Koordinator's (pkg/scheduler/apis/config/v1/defaults.go). Arguments that drive parts pykoord
does not implement (quota hook plugins) are refused when set to anything but their default, naming the
field, so that a configuration never silently loses behaviour.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from apis.config.args_base import ArgsModel
from apis.config.duration import GoDuration
from apis.config.errors import FieldError, invalid, join_path
from apis.core.parse import parse_resource_list

MAX_INT64_DIV_5 = (2**63 - 1) // 5
DEFAULT_BUILTIN_MAX: dict[str, Any] = {"cpu": f"{MAX_INT64_DIV_5}m", "memory": str(MAX_INT64_DIV_5)}
"""Koordinator's default is MaxInt64/5 of each resource. For cpu that many cores does not fit an int64 in
millicores (the unit every quantity here must fit), so the cpu default is MaxInt64/5 millicores: still
unbounded in practice (1.8e15 cores)."""


class ElasticQuotaArgs(ArgsModel):
    delay_evict_time: GoDuration = 120.0
    """How long a quota may stay above its runtime before the over-use revoke controller evicts."""
    revoke_pod_interval: GoDuration = 1.0
    """How often the over-use revoke controller looks."""
    default_quota_group_max: dict[str, Any] = DEFAULT_BUILTIN_MAX
    """Max of ``koordinator-default-quota`` (where pods without a quota go) when it has no object."""
    system_quota_group_max: dict[str, Any] = DEFAULT_BUILTIN_MAX
    quota_group_namespace: str = "koordinator-system"
    """Namespace of the built-in quotas the status controller creates when they are missing."""
    monitor_all_quotas: bool = False
    """Run the over-use revoke controller (in the leader's ``elasticquota`` controller; needs
    ``enableRuntimeQuota``)."""
    enable_check_parent_quota: bool = False
    """Also admit against every ancestor's runtime (default: only the pod's own quota)."""
    enable_runtime_quota: bool = True
    """Admit against runtime; False admits against max (no borrowing limits, no lending)."""
    enable_min_quota_scale: bool = True
    """Scale children's mins down in proportion when they exceed the parent's budget."""
    disable_default_quota_preemption: bool = True
    """Pods of the default quota are never preemption victims."""
    enable_queue_hint: bool = False
    """Filter quota events with queueing hints before requeueing pods (False: any quota event requeues)."""
    reclaim_borrowed_quota: bool = True
    """pykoord's own argument: PostFilter may also evict pods of other quotas whose used is above their
    runtime (they borrowed what a lender now asks back). Koordinator has no such preemption; it relies on
    the over-use revoke controller (``monitorAllQuotas``, also here), off by default. False: Koordinator's rule,
    only lower-priority pods of the pod's own quota are victims. Leave it out of a configuration that
    Koordinator must also read."""
    quota_snapshot_update_interval: GoDuration = 120.0
    hook_plugins: tuple[dict[str, Any], ...] = ()

    @field_validator("default_quota_group_max", "system_quota_group_max", mode="before")
    @classmethod
    def _resource_list(cls, value: Any) -> Any:
        return value if value else DEFAULT_BUILTIN_MAX

    def builtin_max(self, which: str) -> dict[str, int]:
        """``default`` or ``system`` max as scheduler amounts (cpu in millicores)."""
        raw = self.default_quota_group_max if which == "default" else self.system_quota_group_max
        return dict(parse_resource_list(raw))

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        for name, raw in (
            ("defaultQuotaGroupMax", self.default_quota_group_max),
            ("systemQuotaGroupMax", self.system_quota_group_max),
        ):
            try:
                amounts = parse_resource_list(raw)
            except ValueError as err:
                errors.append(invalid(join_path(path, name), raw, str(err)))
                continue
            for key, amount in amounts.items():
                if amount < 0:
                    errors.append(invalid(join_path(join_path(path, name), key), raw[key], "must be non-negative"))
        for name, value in (
            ("delayEvictTime", self.delay_evict_time),
            ("revokePodInterval", self.revoke_pod_interval),
            ("quotaSnapshotUpdateInterval", self.quota_snapshot_update_interval),
        ):
            if value < 0:
                errors.append(invalid(join_path(path, name), value, "must be non-negative"))
        if self.quota_snapshot_update_interval != 120.0 and self.quota_snapshot_update_interval >= 0:
            errors.append(
                invalid(
                    join_path(path, "quotaSnapshotUpdateInterval"),
                    self.quota_snapshot_update_interval,
                    "is used only by quota hook plugins, which pykoord does not implement",
                )
            )
        if self.hook_plugins:
            errors.append(
                invalid(
                    join_path(path, "hookPlugins"), len(self.hook_plugins), "quota hook plugins are not implemented"
                )
            )
        if not self.quota_group_namespace:
            errors.append(invalid(join_path(path, "quotaGroupNamespace"), "", "must not be empty"))
        return errors
