"""``DeviceShareArgs``: Koordinator's fields and defaults (``config/v1/defaults.go``).

Default scoring is LeastAllocated over ``gpu-memory-ratio``, ``gpu-memory``, ``rdma`` and ``fpga``, weight 1
each. ``gpuShareUnsupportedModels`` keeps pods that share a GPU off nodes whose GPU vendor/model label pair
is listed (the v1.8 chart lists huawei ``Ascend-310P3-300I-DUO``). ``gpuSharedResourceTemplatesConfig``
names the ConfigMap of GPU shared resource templates; unset, Koordinator's default applies
(``koordinator-system/gpu-shared-resource-templates``, ``matchedResources: [huawei.com/npu-core]``).
Not implemented, refused at load naming the field: a non-empty ``allocator`` (deprecated upstream).
``disableDeviceNUMATopologyAlignment`` is accepted: devices are never NUMA-aligned here, which is what
``true`` asks for.
"""

from __future__ import annotations

from pydantic import field_validator

from apis.config.args_base import ArgsModel
from apis.config.errors import FieldError, forbidden, invalid, join_path, not_supported, required
from apis.config.types import ConfigModel

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
DEVICE_SCORING_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED)


class DeviceResourceSpec(ConfigModel):
    name: str
    weight: int = 0


DEFAULT_DEVICE_SCORING_RESOURCES = (
    DeviceResourceSpec(name="koordinator.sh/gpu-memory-ratio", weight=1),
    DeviceResourceSpec(name="koordinator.sh/gpu-memory", weight=1),
    DeviceResourceSpec(name="koordinator.sh/rdma", weight=1),
    DeviceResourceSpec(name="koordinator.sh/fpga", weight=1),
)


class DeviceScoringStrategy(ConfigModel):
    type: str = LEAST_ALLOCATED
    resources: tuple[DeviceResourceSpec, ...] = DEFAULT_DEVICE_SCORING_RESOURCES

    @field_validator("resources")
    @classmethod
    def _default_weights(cls, resources: tuple[DeviceResourceSpec, ...]) -> tuple[DeviceResourceSpec, ...]:
        return tuple(r if r.weight != 0 else r.model_copy(update={"weight": 1}) for r in resources)


class GPUShareUnsupportedModel(ConfigModel):
    vendor: str = ""
    model: str = ""


class GPUSharedResourceTemplatesConfig(ConfigModel):
    config_map_namespace: str = ""
    config_map_name: str = ""
    matched_resources: tuple[str, ...] = ()

    @field_validator("matched_resources", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return () if value is None else value


DEFAULT_GPU_SHARED_RESOURCE_TEMPLATES_CONFIG = GPUSharedResourceTemplatesConfig(
    config_map_namespace="koordinator-system",
    config_map_name="gpu-shared-resource-templates",
    matched_resources=("huawei.com/npu-core",),
)
"""Koordinator's ``defaultGPUSharedResourceTemplatesConfig`` (used whole when the field is unset)."""


class DeviceShareArgs(ArgsModel):
    allocator: str = ""
    scoring_strategy: DeviceScoringStrategy = DeviceScoringStrategy()
    disable_device_numa_topology_alignment: bool = False
    gpu_shared_resource_templates_config: GPUSharedResourceTemplatesConfig | None = None
    gpu_share_unsupported_models: tuple[GPUShareUnsupportedModel, ...] = ()

    @field_validator("gpu_share_unsupported_models", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return () if value is None else value

    def templates_config(self) -> GPUSharedResourceTemplatesConfig:
        """The templates ConfigMap and matched resources: the field, else Koordinator's default."""
        if self.gpu_shared_resource_templates_config is None:
            return DEFAULT_GPU_SHARED_RESOURCE_TEMPLATES_CONFIG
        return self.gpu_shared_resource_templates_config

    def unsupported_models(self) -> frozenset[tuple[str, str]]:
        """(vendor, model) pairs on which a shared GPU is refused."""
        return frozenset((m.vendor, m.model) for m in self.gpu_share_unsupported_models)

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.allocator:
            errors.append(forbidden(join_path(path, "allocator"), "not supported (deprecated in Koordinator)"))
        strategy = join_path(path, "scoringStrategy")
        if self.scoring_strategy.type not in DEVICE_SCORING_TYPES:
            errors.append(not_supported(join_path(strategy, "type"), self.scoring_strategy.type, DEVICE_SCORING_TYPES))
        for i, r in enumerate(self.scoring_strategy.resources):
            where = join_path(join_path(strategy, "resources"), i)
            if not r.name:
                errors.append(required(join_path(where, "name")))
            if not 1 <= r.weight <= 100:
                errors.append(
                    invalid(join_path(where, "weight"), r.weight, "resource weight not in valid range [1, 100]")
                )
        for i, m in enumerate(self.gpu_share_unsupported_models):
            where = join_path(join_path(path, "gpuShareUnsupportedModels"), i)
            if not m.vendor:
                errors.append(required(join_path(where, "vendor")))
            if not m.model:
                errors.append(required(join_path(where, "model")))
        return errors
