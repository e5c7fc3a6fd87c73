"""``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``) as pydantic models.

The models only decode and default, exactly as kube-scheduler's v1 defaulting does (kube-scheduler
pkg/scheduler/apis/config/v1/defaults.go); semantic checks live in :mod:`apis.config.validation` so
that every problem is reported at once with its field path. Field names are snake_case in Python and
camelCase on the wire. Unknown fields are rejected, as kube-scheduler's strict decoding does.

Plugin lists are kept as the user wrote them. Merging with the default plugin set and MultiPoint
expansion depend on which plugins are registered, so they happen at runtime (:mod:`apis.config.profile`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, model_validator

from apis.config.duration import GoDuration
from apis.config.extender import Extender
from apis.config.types_base import ConfigModel as ConfigModel  # noqa: PLC0414 (re-exported for args models)

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
KIND: Final = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


class LeaderElectionConfiguration(ConfigModel):
    """component-base ``LeaderElectionConfiguration``; durations in seconds.

    Defaults are ``RecommendedDefaultLeaderElectionConfiguration`` plus kube-scheduler's lease name.
    """

    leader_elect: bool = True
    lease_duration: GoDuration = 15.0
    renew_deadline: GoDuration = 10.0
    retry_period: GoDuration = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


class ClientConnectionConfiguration(ConfigModel):
    """component-base ``ClientConnectionConfiguration``."""

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: int = 100


class Plugin(ConfigModel):
    """One entry of an ``enabled``/``disabled`` list. ``weight`` only matters for score/multiPoint.

    ``weight`` is ``None`` when not given (Go: nil ``*int32``); 0 and ``None`` both mean 1 for scoring.
    """

    name: str
    weight: int | None = None


PluginRef = Plugin
"""Alias used by :mod:`apis.config.profile` (``DEFAULT_MULTIPOINT: tuple[PluginRef, ...]``)."""


class PluginSet(ConfigModel):
    enabled: tuple[Plugin, ...] = ()
    disabled: tuple[Plugin, ...] = ()

    def disabled_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.disabled)


class Plugins(ConfigModel):
    """Per-extension-point plugin sets. Attribute names are the extension points in snake_case."""

    pre_enqueue: PluginSet = PluginSet()
    queue_sort: PluginSet = PluginSet()
    pre_filter: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    post_filter: PluginSet = PluginSet()
    pre_score: PluginSet = PluginSet()
    score: PluginSet = PluginSet()
    reserve: PluginSet = PluginSet()
    permit: PluginSet = PluginSet()
    pre_bind: PluginSet = PluginSet()
    bind: PluginSet = PluginSet()
    post_bind: PluginSet = PluginSet()
    multi_point: PluginSet = PluginSet()


class PluginConfig(ConfigModel):
    """``pluginConfig[]`` entry. ``args`` stays raw here; :func:`apis.config.plugin_args.decode_args`
    turns it into the plugin's args model once the registry is known."""

    name: str
    args: dict[str, Any] | None = None


class KubeSchedulerProfile(ConfigModel):
    scheduler_name: str = ""
    percentage_of_nodes_to_score: int | None = None
    """``None`` means: use the top-level value."""
    plugins: Plugins | None = None
    plugin_config: tuple[PluginConfig, ...] = ()

    def plugin_config_for(self, name: str) -> PluginConfig | None:
        return next((pc for pc in self.plugin_config if pc.name == name), None)


class KubeSchedulerConfiguration(ConfigModel):
    """The whole file. Construct with ``KubeSchedulerConfiguration()`` to get pure defaults."""

    api_version: Literal["kubescheduler.config.k8s.io/v1"] = API_VERSION
    kind: Literal["KubeSchedulerConfiguration"] = KIND
    parallelism: int = 16
    leader_election: LeaderElectionConfiguration = LeaderElectionConfiguration()
    client_connection: ClientConnectionConfiguration = ClientConnectionConfiguration()
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    percentage_of_nodes_to_score: int = 0
    """0 means adaptive (5%..50% depending on cluster size)."""
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    profiles: tuple[KubeSchedulerProfile, ...] = Field(default=(), validate_default=True)
    extenders: tuple[Extender, ...] = ()
    """HTTP extenders the scheduler calls after Filter and Score (see ``koord_scheduler.extenders``)."""
    delay_cache_until_active: bool = False

    @model_validator(mode="before")
    @classmethod
    def _default_profiles(cls, data: Any) -> Any:
        """One profile if none; ``schedulerName: default-scheduler`` only when there is exactly one
        profile that does not name itself (``SetDefaults_KubeSchedulerConfiguration``)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        profiles = data.get("profiles")
        if not profiles:
            data["profiles"] = [{"schedulerName": DEFAULT_SCHEDULER_NAME}]
        elif isinstance(profiles, list | tuple) and len(profiles) == 1 and isinstance(profiles[0], dict):
            only = dict(profiles[0])
            if only.get("schedulerName") is None and only.get("scheduler_name") is None:
                only.pop("scheduler_name", None)
                only["schedulerName"] = DEFAULT_SCHEDULER_NAME
            data["profiles"] = [only]
        return data

    def percentage_for(self, profile: KubeSchedulerProfile) -> int:
        """The effective percentageOfNodesToScore for ``profile`` (profile value, else global)."""
        if profile.percentage_of_nodes_to_score is not None:
            return profile.percentage_of_nodes_to_score
        return self.percentage_of_nodes_to_score
