"""``NodeSLO`` (``slo.koordinator.sh/v1alpha1``): per-node QoS strategy, and its defaults.

koord-manager renders it from ``slo-controller-config``; the koordlet merges the received spec over
:func:`default_node_slo_spec` section by section (``sloconfig.DefaultNodeSLOSpecConfig``) and uses the result.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from apis.slo.common import API_VERSION, ObjectMeta, WireModel
from apis.slo.quantity import IntOrString

_INT32: dict[str, Any] = {"format": "int32"}


def _bounds(minimum: int, maximum: int | None = None, *, alias: str | None = None) -> Any:
    """A field whose CRD schema carries Koordinator's ``minimum``/``maximum``: the API server refuses a
    NodeSLO outside them. The model itself does not enforce them; :mod:`apis.slo.validation` checks the
    same ranges (a test keeps the two equal) with messages that name the field."""
    extra: dict[str, Any] = {"minimum": minimum}
    if maximum is not None:
        extra["maximum"] = maximum
    return Field(default=None, alias=alias, json_schema_extra=extra)


_PERCENT = (0, 100)


class ResourceThresholdStrategy(WireModel):
    """``spec.resourceUsedThresholdWithBE``: CPU suppress and the eviction family.

    ``enable`` is the master switch.
    """

    enable: bool | None = None
    cpu_suppress_threshold_percent: int | None = _bounds(*_PERCENT)
    cpu_suppress_min_percent: int | None = _bounds(*_PERCENT)
    cpu_suppress_policy: str | None = None
    memory_evict_threshold_percent: int | None = _bounds(*_PERCENT)
    memory_evict_lower_percent: int | None = _bounds(*_PERCENT)
    cpu_evict_be_satisfaction_upper_percent: int | None = Field(
        default=None, alias="cpuEvictBESatisfactionUpperPercent"
    )
    cpu_evict_be_satisfaction_lower_percent: int | None = Field(
        default=None, alias="cpuEvictBESatisfactionLowerPercent"
    )
    cpu_evict_be_usage_threshold_percent: int | None = Field(default=None, alias="cpuEvictBEUsageThresholdPercent")
    cpu_evict_threshold_percent: int | None = _bounds(*_PERCENT)
    cpu_evict_lower_percent: int | None = _bounds(*_PERCENT)
    cpu_evict_time_window_seconds: int | None = None
    cpu_evict_policy: str | None = None
    cpu_allocatable_evict_threshold_percent: int | None = _bounds(0)
    cpu_allocatable_evict_lower_percent: int | None = _bounds(0)
    memory_allocatable_evict_threshold_percent: int | None = _bounds(0)
    memory_allocatable_evict_lower_percent: int | None = _bounds(0)
    evict_enabled_priority_threshold: int | None = Field(default=None, json_schema_extra=_INT32)
    allocatable_evict_priority_threshold: int | None = Field(default=None, json_schema_extra=_INT32)


class CPUQOSCfg(WireModel):
    enable: bool | None = None
    group_identity: int | None = None
    sched_idle: int | None = None
    core_expeller: bool | None = None


class MemoryQOSCfg(WireModel):
    enable: bool | None = None
    min_limit_percent: int | None = _bounds(0)
    low_limit_percent: int | None = _bounds(0)
    throttling_percent: int | None = _bounds(0)
    wmark_ratio: int | None = _bounds(*_PERCENT)
    wmark_scale_permill: int | None = _bounds(1, 1000)
    wmark_min_adj: int | None = _bounds(-25, 50)
    priority_enable: int | None = None
    priority: int | None = None
    oom_kill_group: int | None = None
    page_cache_enable: bool | None = None
    page_cache_limit_percent: int | None = _bounds(*_PERCENT)
    page_cache_limit_size: int | None = None
    page_cache_reclaim_sync: bool | None = None


class ResctrlQOSCfg(WireModel):
    enable: bool | None = None
    cat_range_start_percent: int | None = _bounds(*_PERCENT)
    cat_range_end_percent: int | None = _bounds(*_PERCENT)
    mba_percent: int | None = _bounds(*_PERCENT)


class IOCfg(WireModel):
    read_iops: int | None = _bounds(0, alias="readIOPS")
    write_iops: int | None = _bounds(0, alias="writeIOPS")
    read_bps: int | None = _bounds(0, alias="readBPS")
    write_bps: int | None = _bounds(0, alias="writeBPS")
    io_weight_percent: int | None = _bounds(1, 100)
    read_latency: int | None = None
    write_latency: int | None = None
    read_latency_percent: int | None = _bounds(*_PERCENT)
    write_latency_percent: int | None = _bounds(*_PERCENT)
    enable_user_model: bool | None = None
    model_read_bps: int | None = _bounds(1, alias="modelReadBPS")
    model_write_bps: int | None = _bounds(1, alias="modelWriteBPS")
    model_read_seq_iops: int | None = _bounds(1, alias="modelReadSeqIOPS")
    model_write_seq_iops: int | None = _bounds(1, alias="modelWriteSeqIOPS")
    model_read_rand_iops: int | None = _bounds(1, alias="modelReadRandIOPS")
    model_write_rand_iops: int | None = _bounds(1, alias="modelWriteRandIOPS")


class BlockCfg(WireModel):
    name: str | None = None
    type: str | None = None
    io_cfg: IOCfg | None = None


class BlkIOQOSCfg(WireModel):
    enable: bool | None = None
    blocks: list[BlockCfg] | None = None


class NetworkQOSCfg(WireModel):
    enable: bool | None = None
    ingress_request: IntOrString | None = None
    ingress_limit: IntOrString | None = None
    egress_request: IntOrString | None = None
    egress_limit: IntOrString | None = None


class ResourceQOS(WireModel):
    """QoS knobs of one class (LSR, LS, BE, SYSTEM or the cgroup root)."""

    cpu_qos: CPUQOSCfg | None = Field(default=None, alias="cpuQOS")
    memory_qos: MemoryQOSCfg | None = Field(default=None, alias="memoryQOS")
    blkio_qos: BlkIOQOSCfg | None = Field(default=None, alias="blkioQOS")
    resctrl_qos: ResctrlQOSCfg | None = Field(default=None, alias="resctrlQOS")
    network_qos: NetworkQOSCfg | None = Field(default=None, alias="networkQOS")


class ResourceQOSPolicies(WireModel):
    cpu_policy: str | None = None
    net_qos_policy: str | None = Field(default=None, alias="netQOSPolicy")


class ResourceQOSStrategy(WireModel):
    policies: ResourceQOSPolicies | None = None
    lsr_class: ResourceQOS | None = None
    ls_class: ResourceQOS | None = None
    be_class: ResourceQOS | None = None
    system_class: ResourceQOS | None = None
    cgroup_root: ResourceQOS | None = None


class CPUBurstStrategy(WireModel):
    policy: str | None = None
    cpu_burst_percent: int | None = _bounds(0, 10000)
    cfs_quota_burst_percent: int | None = None
    cfs_quota_burst_period_seconds: int | None = None
    share_pool_threshold_percent: int | None = None


class SystemStrategy(WireModel):
    min_free_kbytes_factor: int | None = None
    watermark_scale_factor: int | None = None
    memcg_reap_back_ground: int | None = None
    total_network_bandwidth: IntOrString | None = None
    sched_group_identity_enabled: int | None = None
    sched_features: dict[str, bool] | None = None
    sched_idle_saver_wmark: int | None = None
    page_cache_limit_enabled: int | None = None


class CgroupPath(WireModel):
    base: str | None = None
    parent_dir: str | None = None
    relative_path: str | None = None


class HostApplicationSpec(WireModel):
    name: str | None = None
    priority: str | None = None
    qos: str | None = None
    cgroup_path: CgroupPath | None = None
    strategy: dict[str, Any] | None = None


class NodeSLOSpec(WireModel):
    resource_used_threshold_with_be: ResourceThresholdStrategy | None = Field(
        default=None, alias="resourceUsedThresholdWithBE"
    )
    resource_qos_strategy: ResourceQOSStrategy | None = Field(default=None, alias="resourceQOSStrategy")
    cpu_burst_strategy: CPUBurstStrategy | None = None
    system_strategy: SystemStrategy | None = None
    extensions: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    host_applications: list[HostApplicationSpec] | None = None


class NodeSLOStatus(WireModel):
    pass


class NodeSLO(WireModel):
    """A NodeSLO object; cluster scoped, named after its node."""

    api_version: str = API_VERSION
    kind: str = "NodeSLO"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSLOSpec | None = None
    status: NodeSLOStatus | None = None


def _class_qos(group_identity: int, wmark: tuple[int, int, int], cat: tuple[int, int]) -> ResourceQOS:
    ratio, scale, adj = wmark
    return ResourceQOS(
        cpu_qos=CPUQOSCfg(enable=False, group_identity=group_identity, sched_idle=0, core_expeller=False),
        memory_qos=MemoryQOSCfg(
            enable=False,
            min_limit_percent=0,
            low_limit_percent=0,
            throttling_percent=0,
            wmark_ratio=ratio,
            wmark_scale_permill=scale,
            wmark_min_adj=adj,
            priority_enable=0,
            priority=0,
            oom_kill_group=0,
        ),
        resctrl_qos=ResctrlQOSCfg(
            enable=False, cat_range_start_percent=cat[0], cat_range_end_percent=cat[1], mba_percent=100
        ),
        blkio_qos=BlkIOQOSCfg(enable=False),
        network_qos=NetworkQOSCfg(enable=False),
    )


def default_node_slo_spec() -> NodeSLOSpec:
    """``sloconfig.DefaultNodeSLOSpecConfig()``: suppress 65 %, memory evict 70 %, every class QoS off."""
    lsr = _class_qos(2, (95, 20, -25), (0, 100))
    lsr.cpu_qos.core_expeller = True  # type: ignore[union-attr]
    ls = _class_qos(2, (95, 20, -25), (0, 100))
    ls.cpu_qos.core_expeller = True  # type: ignore[union-attr]
    return NodeSLOSpec(
        resource_used_threshold_with_be=ResourceThresholdStrategy(
            enable=False,
            cpu_suppress_threshold_percent=65,
            cpu_suppress_policy="cpuset",
            memory_evict_threshold_percent=70,
            cpu_evict_policy="evictByRealLimit",
        ),
        resource_qos_strategy=ResourceQOSStrategy(
            policies=ResourceQOSPolicies(cpu_policy="groupIdentity", net_qos_policy="tc"),
            lsr_class=lsr,
            ls_class=ls,
            be_class=_class_qos(-1, (95, 20, 50), (0, 30)),
            system_class=_class_qos(0, (0, 50, 0), (0, 100)),
            cgroup_root=_class_qos(0, (0, 50, 0), (0, 100)),
        ),
        cpu_burst_strategy=CPUBurstStrategy(
            policy="none",
            cpu_burst_percent=1000,
            cfs_quota_burst_percent=300,
            cfs_quota_burst_period_seconds=-1,
            share_pool_threshold_percent=50,
        ),
        system_strategy=SystemStrategy(total_network_bandwidth=0),
    )


def _overlay(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _overlay(merged[key], value)
        else:
            merged[key] = value
    return merged


def merge_node_slo_spec(received: NodeSLOSpec | None, defaults: NodeSLOSpec | None = None) -> NodeSLOSpec:
    """The received spec JSON-overlaid on the defaults, section by section (``mergeNodeSLOSpec``).

    Objects merge key by key; lists and scalars from ``received`` replace the default. Host applications
    and extensions are taken as received.
    """
    base = (defaults or default_node_slo_spec()).to_wire()
    patch = received.to_wire() if received else {}
    return NodeSLOSpec.model_validate(_overlay(base, patch))
