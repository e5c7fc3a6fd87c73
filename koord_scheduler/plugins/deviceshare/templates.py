"""GPU shared resource templates (Koordinator ``pkg/scheduler/plugins/deviceshare/
gpu_shared_resource_templates_cache.go`` and ``eventhandler_configmap.go``).

Some GPU models (Huawei Ascend) only share a device in fixed slices. The ConfigMap named by
``gpuSharedResourceTemplatesConfig`` (default ``koordinator-system/gpu-shared-resource-templates``) holds,
under the key ``data.yaml``, a map ``"<vendor>-<model>"`` → template name → ResourceList. A pod sharing a
GPU whose per-GPU request names any of ``matchedResources`` (default ``huawei.com/npu-core``) must equal
a template exactly (same resource names, same amounts); the template is found by the request, pods do not
name it.

The ConfigMap is watched: an add or update replaces the templates, a delete clears them, and a ConfigMap
whose ``data.yaml`` does not parse keeps the last good templates (Koordinator logs the error; here it is
also logged and a Warning Event ``InvalidGPUSharedResourceTemplates`` is recorded on the ConfigMap).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import yaml

from apis.config.deviceshare_args import GPUSharedResourceTemplatesConfig
from apis.core.errors import ParseError, QuantityError
from apis.core.parse import parse_object_meta, parse_resource_list
from apis.extension.device import DEVICE_GPU, LABEL_GPU_MODEL, LABEL_GPU_VENDOR, DeviceAllocation
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.snapshot import NodeInfo
from koord_scheduler.framework.types import EventType, ObjectKind
from koord_scheduler.plugins.deviceshare.request import GPURequest

log = logging.getLogger(__name__)

ERR_NO_MATCHED_TEMPLATE = "no matched GPU shared resource template"
DATA_KEY = "data.yaml"

Templates = Mapping[str, Mapping[str, Mapping[str, int]]]
"""``"<vendor>-<model>"`` → template name → resource amounts (scheduler units)."""


class TemplatesError(ValueError):
    """The ConfigMap's ``data.yaml`` is not a map of GPU models to templates."""


def template_key(vendor: str, model: str) -> str:
    """Koordinator's ``buildGPUSharedResourceTemplatesKey``: ``"<vendor>-<model>"``."""
    return f"{vendor}-{model}"


def parse_templates(text: str) -> dict[str, dict[str, dict[str, int]]]:
    """The templates in a ConfigMap's ``data.yaml`` text (empty text: none). Raises :class:`TemplatesError`
    naming the model and template at fault."""
    try:
        raw = yaml.safe_load(text) if text else None
    except yaml.YAMLError as exc:
        raise TemplatesError(f"{DATA_KEY}: invalid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TemplatesError(f"{DATA_KEY}: expected a map of GPU models to templates, got {type(raw).__name__}")
    out: dict[str, dict[str, dict[str, int]]] = {}
    for key, templates in raw.items():
        if templates is None:
            out[str(key)] = {}
            continue
        if not isinstance(templates, dict):
            raise TemplatesError(f"{DATA_KEY}[{key}]: expected a map of template names to resources")
        parsed: dict[str, dict[str, int]] = {}
        for name, resources in templates.items():
            try:
                parsed[str(name)] = dict(parse_resource_list(resources or {}))
            except (ParseError, QuantityError) as exc:
                raise TemplatesError(f"{DATA_KEY}[{key}][{name}]: {exc}") from None
        out[str(key)] = parsed
    return out


def find_matched(templates: Templates, per_gpu: Mapping[str, int]) -> dict[str, dict[str, Mapping[str, int]]]:
    """Koordinator's ``findMatchedTemplates`` (strict): per GPU model, the templates equal to ``per_gpu``
    (same resource names, same amounts: ``quotav1.Equals``)."""
    wanted = dict(per_gpu)
    result: dict[str, dict[str, Mapping[str, int]]] = {}
    for key, by_name in templates.items():
        matched = {name: t for name, t in by_name.items() if dict(t) == wanted}
        if matched:
            result[key] = matched
    return result


def model_templates(matched: Templates, node_labels: Mapping[str, str]) -> Mapping[str, Mapping[str, int]]:
    """The matched templates of the node's GPU model (its ``node.koordinator.sh/gpu-vendor`` and
    ``gpu-model`` labels); empty: the pod cannot share a GPU there."""
    return matched.get(template_key(node_labels.get(LABEL_GPU_VENDOR, ""), node_labels.get(LABEL_GPU_MODEL, "")), {})


class _HasTemplates(Protocol):
    @property
    def templates(self) -> Templates | None: ...


def node_templates(pre: _HasTemplates, node_info: NodeInfo) -> Mapping[str, Mapping[str, int]]:
    """:func:`model_templates` of the PreFilter state's templates on the node of ``node_info``."""
    labels = node_info.node.labels if node_info.node is not None else {}
    return model_templates(pre.templates or {}, labels)


def name_template(
    chosen: dict[str, tuple[DeviceAllocation, ...]], pre: _HasTemplates, node_info: NodeInfo | None
) -> dict[str, tuple[DeviceAllocation, ...]]:
    """Koordinator's ``appendTemplateInfoToAllocations``: when exactly one template of the node's GPU model
    matches, every GPU allocation names it; otherwise the allocations are returned as they are."""
    if pre.templates is None or node_info is None or DEVICE_GPU not in chosen:
        return chosen
    matched = node_templates(pre, node_info)
    if len(matched) != 1:
        return chosen
    (name,) = matched
    return {**chosen, DEVICE_GPU: tuple(replace(a, template=name) for a in chosen[DEVICE_GPU])}


@dataclass(frozen=True, slots=True)
class ConfigMapData:
    """A ConfigMap's identity and ``data``."""

    namespace: str
    name: str
    data: Mapping[str, str]


def parse_config_map(raw: Mapping[str, Any]) -> ConfigMapData:
    """A ConfigMap with only its ``data.yaml`` key kept (a ``simulate`` file may hold other ConfigMaps,
    whose data need not be held). Raises ``ValueError`` naming the field."""
    meta = parse_object_meta(dict(raw), "ConfigMap")
    data = raw.get("data") or {}
    if not isinstance(data, dict):
        raise ValueError(f"ConfigMap {meta.namespace}/{meta.name}: data must be a map")
    text = data.get(DATA_KEY)
    if text is not None and not isinstance(text, str):
        raise ValueError(f"ConfigMap {meta.namespace}/{meta.name}: data[{DATA_KEY}] must be a string")
    return ConfigMapData(meta.namespace, meta.name, {} if text is None else {DATA_KEY: text})


CONFIG_MAP_KIND_NAME = "GPUSharedResourceTemplatesConfigMap"
"""The watch's kind name: the colocation controllers watch their own ConfigMap as ``ConfigMap``, and a
kind name is one watch."""


def config_map_kind(config: GPUSharedResourceTemplatesConfig) -> ObjectKind[ConfigMapData]:
    """The watch of the one templates ConfigMap (on the API server: its namespace, by name, so the
    scheduler needs list/watch of ConfigMaps in that namespace only). Optional: without that RBAC, or
    before the ConfigMap exists, the scheduler starts with no templates and keeps retrying."""
    return ObjectKind(
        kind=CONFIG_MAP_KIND_NAME,
        group="",
        version="v1",
        plural="configmaps",
        namespaced=True,
        parse=parse_config_map,
        optional=True,
        namespace=config.config_map_namespace,
        field_selector=f"metadata.name={config.config_map_name}",
    )


EVENT_KIND = ObjectKind(
    kind="ConfigMap", group="", version="v1", plural="configmaps", namespaced=True, parse=parse_config_map
)
"""What the Warning Event about a bad ConfigMap regards."""

INVALID_REASON = "InvalidGPUSharedResourceTemplates"


class TemplatesCache:
    """The templates last read from the ConfigMap ``namespace/name`` (none before it is seen), kept up to
    date by :meth:`on_config_map` (Koordinator's ``registerGPUSharedResourceTemplatesConfigMapEventHandler``)."""

    def __init__(self, config: GPUSharedResourceTemplatesConfig, cluster: ClusterClient | None = None) -> None:
        self.namespace = config.config_map_namespace
        self.name = config.config_map_name
        self.matched_resources = frozenset(config.matched_resources)
        self.templates: Templates = {}
        self._cluster = cluster
        self._tasks: set[asyncio.Task[None]] = set()

    def pod_templates(self, gpu: GPURequest | None) -> Templates | None:
        """Koordinator's ``parseGPURequirements``: for a shared GPU request naming a matched resource, the
        templates it equals by GPU model (empty: none, the pod is unschedulable with
        :data:`ERR_NO_MATCHED_TEMPLATE`); None when templates do not apply to the pod."""
        if gpu is None or not gpu.shared or not self.matched_resources.intersection(gpu.per_gpu):
            return None
        return find_matched(self.templates, gpu.per_gpu)

    def on_config_map(self, event: EventType, old: Any, new: Any) -> None:
        """Add/update: the templates of ``data.yaml`` (a bad one keeps the last good templates, and is
        logged and raised as a Warning Event on the ConfigMap); delete: no templates."""
        if new is None:
            if isinstance(old, ConfigMapData) and (old.namespace, old.name) == (self.namespace, self.name):
                self.templates = {}
            return
        if not isinstance(new, ConfigMapData) or (new.namespace, new.name) != (self.namespace, self.name):
            return
        try:
            self.templates = parse_templates(new.data.get(DATA_KEY, ""))
        except TemplatesError as exc:
            message = f"ConfigMap {new.namespace}/{new.name}: {exc}; keeping the last good templates"
            log.error("%s", message)
            self._warn(message)

    def _warn(self, message: str) -> None:
        if self._cluster is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        coro = self._cluster.record_event(
            EVENT_KIND, self.name, namespace=self.namespace, type="Warning", reason=INVALID_REASON, message=message
        )
        task = loop.create_task(self._send(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _send(coro: Any) -> None:
        try:
            await coro
        except Exception as exc:  # an Event is best effort
            log.warning("recording an Event on the GPU shared resource templates ConfigMap failed: %s", exc)
