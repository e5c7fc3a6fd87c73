"""Koordinator's ``DeschedulerConfiguration`` (``descheduler/v1alpha2``, the chart's ``koord-descheduler-config``)
and the args of the plugins pykoord runs: ``LowNodeLoadArgs`` and ``MigrationControllerArgs``
(Koordinator ``pkg/descheduler/apis/config/v1alpha2``).

Every field of Koordinator's schema is known. Unknown fields are refused with their path (as the
scheduler's configuration is). Fields that pykoord does not honour are refused with their path when set
to anything but their default, except the process settings koord-scheduler's own flags and Lease
already cover (``leaderElection``, ``clientConnection``, ``enableProfiling``, ``enableContentionProfiling``,
``healthzBindAddress``, ``metricsBindAddress``), which are accepted and have no effect: the file the
chart ships loads unchanged. ``docs/descheduling.md`` lists both groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, Field

from apis.config.args_base import ArgsModel
from apis.config.decoding import decode_model
from apis.config.descheduler_selectors import LabelSelector, Namespaces
from apis.config.descheduler_upstream import BALANCE_PLUGINS, UPSTREAM_ARGS
from apis.config.duration import GoDuration, parse_go_duration
from apis.config.errors import ConfigError, FieldError, forbidden, invalid, not_supported, required
from apis.config.loader import _parse_text
from apis.config.types_base import ConfigModel

API_VERSION: Final = "descheduler/v1alpha2"
KIND: Final = "DeschedulerConfiguration"
LOW_NODE_LOAD: Final = "LowNodeLoad"
MIGRATION_CONTROLLER: Final = "MigrationController"
DEFAULT_EVICTOR: Final = "DefaultEvictor"
DEFAULT_PROFILE: Final = "koord-descheduler"
DEFAULT_INTERVAL_SECONDS: Final = 0.0
"""Koordinator runs one round and exits when ``deschedulingInterval`` is 0; here 0 means one round at start."""


class PluginRef(ConfigModel):
    name: str


class PluginSet(ConfigModel):
    enabled: list[PluginRef] | None = None
    disabled: list[PluginRef] | None = None


class Plugins(ConfigModel):
    deschedule: PluginSet | None = None
    balance: PluginSet | None = None
    evict: PluginSet | None = None
    filter: PluginSet | None = None


class PluginConfig(ConfigModel):
    name: str
    args: dict[str, Any] | None = None


class DeschedulerProfile(ConfigModel):
    name: str | None = None
    plugin_config: list[PluginConfig] | None = None
    plugins: Plugins | None = None
    node_selector: LabelSelector | None = None


class DeschedulerConfiguration(ConfigModel):
    api_version: str | None = None
    kind: str | None = None
    leader_election: dict[str, Any] | None = None
    client_connection: dict[str, Any] | None = None
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None
    descheduling_interval: GoDuration | None = None
    dry_run: bool = False
    profiles: list[DeschedulerProfile] | None = None
    node_selector: LabelSelector | None = None
    max_no_of_pods_to_evict_per_node: int | None = None
    max_no_of_pods_to_evict_per_namespace: int | None = None
    max_no_of_pods_to_evict_total: int | None = None


class LoadAnomalyCondition(ConfigModel):
    timeout: GoDuration | None = None
    consecutive_abnormalities: int = 0
    consecutive_normalities: int = 0


class LowNodeLoadPodSelector(ConfigModel):
    name: str | None = None
    selector: LabelSelector | None = None


class LowNodeLoadNodePool(ConfigModel):
    name: str | None = None
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool = False
    high_thresholds: dict[str, float] | None = None
    low_thresholds: dict[str, float] | None = None
    prod_high_thresholds: dict[str, float] | None = None
    prod_low_thresholds: dict[str, float] | None = None
    resource_weights: dict[str, int] | None = None
    anomaly_condition: LoadAnomalyCondition | None = None


DEFAULT_ANOMALY: Final = LoadAnomalyCondition(timeout="1m", consecutive_abnormalities=5, consecutive_normalities=3)


class LowNodeLoadArgs(ArgsModel):
    api_version: str | None = None
    kind: str | None = None
    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = 180
    evictable_namespaces: Namespaces | None = None
    node_selector: LabelSelector | None = None
    pod_selectors: list[LowNodeLoadPodSelector] | None = None
    node_fit: bool = True
    use_deviation_thresholds: bool = False
    high_thresholds: dict[str, float] | None = None
    low_thresholds: dict[str, float] | None = None
    prod_high_thresholds: dict[str, float] | None = None
    prod_low_thresholds: dict[str, float] | None = None
    resource_weights: dict[str, int] | None = None
    anomaly_condition: LoadAnomalyCondition | None = None
    detector_cache_timeout: GoDuration | None = None
    node_pools: list[LowNodeLoadNodePool] | None = None

    def weights(self) -> dict[str, int]:
        """Koordinator's defaulting: cpu and memory 1, every threshold resource 1, non-positive weights 1."""
        out = {"cpu": 1, "memory": 1, **dict.fromkeys([*(self.low_thresholds or {}), *(self.high_thresholds or {})], 1)}
        for name, weight in (self.resource_weights or {}).items():
            out[name] = weight if weight > 0 else out.get(name, 1)
        return out

    def anomaly(self) -> LoadAnomalyCondition:
        given = self.anomaly_condition
        if given is None:
            return DEFAULT_ANOMALY
        return given.model_copy(
            update={
                "timeout": given.timeout if given.timeout is not None else DEFAULT_ANOMALY.timeout,
                "consecutive_abnormalities": given.consecutive_abnormalities
                or DEFAULT_ANOMALY.consecutive_abnormalities,
                "consecutive_normalities": given.consecutive_normalities or DEFAULT_ANOMALY.consecutive_normalities,
            }
        )

    def pools(self) -> list[LowNodeLoadNodePool]:
        """The node pools, each defaulted from the top-level args (one pool of every node when none)."""
        weights = self.weights()
        anomaly = self.anomaly()
        given = self.node_pools or [
            LowNodeLoadNodePool(
                name="default", node_selector=self.node_selector, use_deviation_thresholds=self.use_deviation_thresholds
            )
        ]
        out = []
        for pool in given:
            condition = pool.anomaly_condition
            out.append(
                pool.model_copy(
                    update={
                        "high_thresholds": pool.high_thresholds
                        if pool.high_thresholds is not None
                        else self.high_thresholds,
                        "low_thresholds": pool.low_thresholds
                        if pool.low_thresholds is not None
                        else self.low_thresholds,
                        "prod_high_thresholds": pool.prod_high_thresholds
                        if pool.prod_high_thresholds is not None
                        else self.prod_high_thresholds,
                        "prod_low_thresholds": pool.prod_low_thresholds
                        if pool.prod_low_thresholds is not None
                        else self.prod_low_thresholds,
                        "resource_weights": pool.resource_weights if pool.resource_weights is not None else weights,
                        "anomaly_condition": anomaly
                        if condition is None
                        else condition.model_copy(
                            update={
                                "consecutive_abnormalities": condition.consecutive_abnormalities
                                or anomaly.consecutive_abnormalities,
                                "consecutive_normalities": condition.consecutive_normalities
                                or anomaly.consecutive_normalities,
                                "timeout": condition.timeout if condition.timeout is not None else anomaly.timeout,
                            }
                        ),
                    }
                )
            )
        return out

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.number_of_nodes < 0:
            errors.append(invalid(f"{path}.numberOfNodes", self.number_of_nodes, "must be greater than or equal to 0"))
        if self.node_metric_expiration_seconds <= 0:
            errors.append(
                invalid(
                    f"{path}.nodeMetricExpirationSeconds",
                    self.node_metric_expiration_seconds,
                    "must be a positive value",
                )
            )
        ns = self.evictable_namespaces
        if ns is not None and ns.include and ns.exclude:
            errors.append(forbidden(f"{path}.evictableNamespaces", "only one of include/exclude can be set"))
        for i, pool in enumerate(self.pools()):
            at = f"{path}.nodePools[{i}]" if self.node_pools else path
            errors += _threshold_errors(pool, at)
        return errors


def _threshold_errors(pool: LowNodeLoadNodePool, at: str) -> list[FieldError]:
    errors: list[FieldError] = []
    high, low = pool.high_thresholds or {}, pool.low_thresholds or {}
    prod_high, prod_low = pool.prod_high_thresholds or {}, pool.prod_low_thresholds or {}
    for field_name, values in (
        ("highThresholds", high),
        ("lowThresholds", low),
        ("prodHighThresholds", prod_high),
        ("prodLowThresholds", prod_low),
    ):
        for name, pct in values.items():
            if pct < 0 or pct > 100:
                errors.append(invalid(f"{at}.{field_name}[{name}]", pct, "percentage must be between 0 and 100"))
    for name, pct in low.items():
        if name in high and pct > high[name]:
            errors.append(invalid(f"{at}.lowThresholds[{name}]", pct, "must be less than or equal to highThresholds"))
    for name, pct in prod_high.items():
        if name in high and pct > high[name]:
            errors.append(
                invalid(f"{at}.prodHighThresholds[{name}]", pct, "must be less than or equal to highThresholds")
            )
    for name, pct in prod_low.items():
        if name in prod_high and pct > prod_high[name]:
            errors.append(
                invalid(f"{at}.prodLowThresholds[{name}]", pct, "must be less than or equal to prodHighThresholds")
            )
    if not low and not prod_low:
        errors.append(required(f"{at}.lowThresholds", "lowThresholds or prodLowThresholds must be set"))
    return errors


class MigrationControllerArgs(ArgsModel):
    """The fields pykoord honours: ``dryRun``, ``defaultJobMode``, ``defaultJobTTL``, ``defaultDeleteOptions``,
    ``namespaces``, ``evictQPS``/``evictBurst``, ``evictionPolicy`` (``Eviction``, ``Delete``,
    ``SoftEviction``), ``schedulerNames``, ``nodeFit``, the arbitration limits (``maxMigrating*``,
    ``maxUnavailablePerWorkload``, ``skipCheckExpectedReplicas``, ``objectLimiters``) and the eviction gates
    (``evict*Pods``, ``ignorePvcPods``, ``priorityThreshold.value``, ``labelSelector``,
    ``skipEvictionGates``), ``arbitrationArgs``. ``nodeSelector`` is accepted unset and refused otherwise
    (:meth:`field_errors`)."""

    api_version: str | None = None
    kind: str | None = None
    dry_run: bool = False
    max_concurrent_reconciles: int | None = None
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: dict[str, Any] | None = None
    label_selector: LabelSelector | None = None
    namespaces: Namespaces | None = None
    node_fit: bool = False
    node_selector: str | None = None
    skip_eviction_gates: list[str] | None = None
    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = None
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: int | str | None = None
    max_unavailable_per_workload: int | str | None = None
    skip_check_expected_replicas: bool | None = None
    object_limiters: dict[str, Any] | None = None
    default_job_mode: str | None = None
    default_job_ttl: GoDuration | None = Field(default=None, alias="defaultJobTTL")
    scheduler_names: list[str] | None = None
    evict_qps: float | str | None = Field(default=None, alias="evictQPS")
    evict_burst: int | None = None
    eviction_policy: str | None = None
    default_delete_options: dict[str, Any] | None = None
    arbitration_args: dict[str, Any] | None = None

    def qps(self) -> float:
        """``evictQPS`` (a number or a numeric string, as Koordinator's Float64OrString); default 10."""
        return float(self.evict_qps) if self.evict_qps not in (None, "") else 10.0

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.node_selector:
            errors.append(
                forbidden(f"{path}.nodeSelector", "not implemented by pykoord yet (see docs/descheduling.md)")
            )
        if self.default_job_mode not in (None, "", "ReservationFirst", "EvictDirectly"):
            errors.append(
                not_supported(f"{path}.defaultJobMode", self.default_job_mode, ["ReservationFirst", "EvictDirectly"])
            )
        errors += self._arbitration_errors(path)
        errors += self._arbitration_args_errors(path)
        if self.eviction_policy not in (None, "", *EVICTION_POLICIES):
            errors.append(not_supported(f"{path}.evictionPolicy", self.eviction_policy, list(EVICTION_POLICIES)))
        for i, name in enumerate(self.scheduler_names or ()):
            if not name:
                errors.append(invalid(f"{path}.schedulerNames[{i}]", name, "must not be empty"))
        try:
            if self.qps() <= 0:
                errors.append(invalid(f"{path}.evictQPS", self.evict_qps, "must be positive"))
        except ValueError:
            errors.append(invalid(f"{path}.evictQPS", self.evict_qps, "must be a number"))
        if self.evict_burst is not None and self.evict_burst < 1:
            errors.append(invalid(f"{path}.evictBurst", self.evict_burst, "must be at least 1"))
        return errors

    def arbitration_interval(self) -> float | None:
        """``arbitrationArgs``: the seconds between arbitration passes, or None when ``enabled`` is false
        (each Pending job is then arbitrated as it is reconciled). Unset: Koordinator's default, enabled
        every 500ms; given without ``enabled``: disabled (Go's zero value)."""
        given = self.arbitration_args
        if given is None:
            return DEFAULT_ARBITRATION_INTERVAL_SECONDS
        if not given.get("enabled"):
            return None
        interval = given.get("interval")
        return parse_go_duration(str(interval)) if interval is not None else DEFAULT_ARBITRATION_INTERVAL_SECONDS

    def _arbitration_args_errors(self, path: str) -> list[FieldError]:
        given = self.arbitration_args
        if given is None:
            return []
        errors: list[FieldError] = []
        for key in given:
            if key not in ("enabled", "interval"):
                errors.append(invalid(f"{path}.arbitrationArgs.{key}", given[key], "Unknown field"))
        if "enabled" in given and not isinstance(given["enabled"], bool):
            errors.append(invalid(f"{path}.arbitrationArgs.enabled", given["enabled"], "must be a boolean"))
        if given.get("interval") is not None:
            try:
                if parse_go_duration(str(given["interval"])) <= 0:
                    errors.append(invalid(f"{path}.arbitrationArgs.interval", given["interval"], "must be positive"))
            except ValueError as exc:
                errors.append(invalid(f"{path}.arbitrationArgs.interval", given["interval"], str(exc)))
        return errors

    def _arbitration_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        for name, value in (
            ("maxMigratingGlobally", self.max_migrating_globally),
            ("maxMigratingPerNode", self.max_migrating_per_node),
            ("maxMigratingPerNamespace", self.max_migrating_per_namespace),
        ):
            if value is not None and value < 0:
                errors.append(invalid(f"{path}.{name}", value, "must be greater than or equal to 0"))
        for name, count in (
            ("maxMigratingPerWorkload", self.max_migrating_per_workload),
            ("maxUnavailablePerWorkload", self.max_unavailable_per_workload),
        ):
            if count is not None and not _int_or_percent(count):
                errors.append(invalid(f"{path}.{name}", count, "must be a non-negative integer or percentage"))
        threshold = self.priority_threshold or {}
        for key in threshold:
            if key == "name":
                errors.append(
                    forbidden(f"{path}.priorityThreshold.name", "a PriorityClass name is not supported, use value")
                )
            elif key != "value":
                errors.append(invalid(f"{path}.priorityThreshold.{key}", threshold[key], "Unknown field"))
        if threshold.get("value") is not None and not isinstance(threshold["value"], int):
            errors.append(invalid(f"{path}.priorityThreshold.value", threshold["value"], "must be an integer"))
        for gate in self.skip_eviction_gates or ():
            if gate not in EVICTION_GATES:
                errors.append(not_supported(f"{path}.skipEvictionGates", gate, sorted(EVICTION_GATES)))
        for kind, raw in (self.object_limiters or {}).items():
            at = f"{path}.objectLimiters[{kind}]"
            if kind not in ("workload", "namespace"):
                errors.append(not_supported(f"{path}.objectLimiters", kind, ["namespace", "workload"]))
                continue
            if not isinstance(raw, Mapping):
                errors.append(invalid(at, raw, "must be a mapping"))
                continue
            for key in raw:
                if key not in ("duration", "maxMigrating", "burst"):
                    errors.append(invalid(f"{at}.{key}", raw[key], "Unknown field"))
            try:
                parse_go_duration(str(raw.get("duration") or "0"))
            except ValueError as exc:
                errors.append(invalid(f"{at}.duration", raw.get("duration"), str(exc)))
            if raw.get("maxMigrating") is not None and not _int_or_percent(raw["maxMigrating"]):
                errors.append(
                    invalid(f"{at}.maxMigrating", raw["maxMigrating"], "must be a non-negative integer or percentage")
                )
            burst = raw.get("burst")
            if burst is not None and (not isinstance(burst, int) or burst < 0):
                errors.append(invalid(f"{at}.burst", burst, "must be a non-negative integer"))
        return errors


DEFAULT_ARBITRATION_INTERVAL_SECONDS: Final = 0.5
"""Koordinator's ``defaultArbitrationInterval``."""

EVICTION_POLICIES: Final = ("Eviction", "Delete", "SoftEviction")
"""Koordinator's evictors (``pkg/descheduler/controllers/migration/evictor``)."""

EVICTION_GATES: Final = frozenset(
    {
        "MaxUnavailablePerWorkload",
        "MaxMigratingPerWorkload",
        "MaxMigratingPerNode",
        "MaxMigratingPerNamespace",
        "MaxMigratingGlobally",
        "ExpectedReplicas",
        "PVC",
        "BarePods",
        "LocalStorage",
        "SystemCritical",
        "PriorityThreshold",
        "LabelSelector",
        "Namespaces",
        "NodeFit",
    }
)
"""Koordinator's ``EvictionGate`` names (``pkg/descheduler/apis/config/types_pluginargs.go``)."""


def _int_or_percent(value: object) -> bool:
    """An ``IntOrString`` count: a non-negative int, or ``N%`` (or a numeric string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    if isinstance(value, str):
        text = value[:-1] if value.endswith("%") else value
        return text.isdigit()
    return False


PLUGIN_ARGS: Final[Mapping[str, type[ArgsModel]]] = {
    LOW_NODE_LOAD: LowNodeLoadArgs,
    MIGRATION_CONTROLLER: MigrationControllerArgs,
    **UPSTREAM_ARGS,
}
KNOWN_PLUGINS: Final = frozenset({LOW_NODE_LOAD, MIGRATION_CONTROLLER, DEFAULT_EVICTOR, *UPSTREAM_ARGS})
"""Plugins a profile may enable; another name is refused with its path."""
PLUGIN_POINTS: Final[Mapping[str, str]] = {
    LOW_NODE_LOAD: "balance",
    **{name: "balance" if name in BALANCE_PLUGINS else "deschedule" for name in UPSTREAM_ARGS},
}
"""The extension point each Deschedule/Balance plugin runs at; enabled at another one, it is refused."""


def load_descheduler_config(path: str | Path) -> tuple[DeschedulerConfiguration, dict[str, list[ArgsModel]]]:
    """Load the file at ``path`` (YAML or JSON, or a ConfigMap holding it): see :func:`parse_descheduler_config`."""
    file_path = Path(path)
    try:
        text = file_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([], source=str(file_path), summary=f"cannot read file: {exc}") from None
    return parse_descheduler_config(text, source=str(file_path))


def parse_descheduler_config(
    data: str | bytes | Mapping[str, Any], *, source: str = "<descheduler config>"
) -> tuple[DeschedulerConfiguration, dict[str, list[ArgsModel]]]:
    """The configuration and, per plugin name, the decoded args of every profile that configures it (in
    profile order). Raises :class:`ConfigError` listing every problem with its field path."""
    document = _parse_text(data, source) if isinstance(data, str | bytes) else data
    if not isinstance(document, Mapping):
        raise ConfigError([invalid("", type(document).__name__, "the configuration must be a mapping")], source=source)
    document, source = _unwrap(document, source)
    errors: list[FieldError] = []
    if document.get("apiVersion") != API_VERSION:
        errors.append(not_supported("apiVersion", document.get("apiVersion"), [API_VERSION]))
    if document.get("kind") != KIND:
        errors.append(not_supported("kind", document.get("kind"), [KIND]))
    config, decode_errors = decode_model(DeschedulerConfiguration, dict(document))
    errors += decode_errors
    args: dict[str, list[ArgsModel]] = {}
    if config is not None:
        errors += _profile_errors(config, args)
    if errors or config is None:
        count = len(errors)
        raise ConfigError(
            errors, source=source, summary=f"{count} error{'s' if count != 1 else ''} in descheduler configuration"
        )
    return config, args


def _unwrap(document: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], str]:
    if document.get("kind") != "ConfigMap":
        return document, source
    import yaml

    data = document.get("data") if isinstance(document.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    for key, value in data.items():
        if isinstance(value, str):
            try:
                content = yaml.safe_load(value)
            except yaml.YAMLError:
                continue
            if isinstance(content, Mapping) and content.get("kind") == KIND:
                return content, f"{source}[data.{key}]"
    raise ConfigError([], source=source, summary=f"the ConfigMap holds no {KIND}")


def _profile_errors(config: DeschedulerConfiguration, args: dict[str, list[ArgsModel]]) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, profile in enumerate(config.profiles or []):
        at = f"profiles[{i}]"
        plugins = profile.plugins or Plugins()
        for point in ("deschedule", "balance", "evict", "filter"):
            plugin_set: PluginSet | None = getattr(plugins, point)
            for j, ref in enumerate((plugin_set.enabled or []) if plugin_set is not None else []):
                where = f"{at}.plugins.{point}.enabled[{j}].name"
                if ref.name not in KNOWN_PLUGINS:
                    errors.append(not_supported(where, ref.name, sorted(KNOWN_PLUGINS)))
                elif PLUGIN_POINTS.get(ref.name, point) != point:
                    errors.append(invalid(where, ref.name, f"a {PLUGIN_POINTS[ref.name]} plugin"))
                elif ref.name in UPSTREAM_ARGS and not any(pc.name == ref.name for pc in profile.plugin_config or []):
                    errors += UPSTREAM_ARGS[ref.name]().field_errors(f"{at}.pluginConfig[{ref.name}].args")
        for j, pc in enumerate(profile.plugin_config or []):
            model = PLUGIN_ARGS.get(pc.name)
            path = f"{at}.pluginConfig[{j}].args"
            if model is None:
                if pc.name not in KNOWN_PLUGINS:
                    errors.append(not_supported(f"{at}.pluginConfig[{j}].name", pc.name, sorted(KNOWN_PLUGINS)))
                continue
            raw = dict(pc.args or {})
            kind = raw.get("kind")
            if kind is not None and kind != f"{pc.name}Args":
                errors.append(not_supported(f"{path}.kind", kind, [f"{pc.name}Args"]))
            decoded, problems = decode_model(model, raw, path=path)
            errors += problems
            if decoded is not None:
                errors += decoded.field_errors(path)
                args.setdefault(pc.name, []).append(decoded)
    return errors


def first_args(args: Mapping[str, list[ArgsModel]], plugin: str, model: type[BaseModel]) -> Any:
    """The first profile's args for ``plugin``, else ``model``'s defaults."""
    found = args.get(plugin)
    return found[0] if found else model()
