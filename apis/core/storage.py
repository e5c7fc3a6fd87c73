"""What the volume plugins need of the storage API objects, and their parsers.

PersistentVolumeClaims and PersistentVolumes (``v1``), StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities (``storage.k8s.io/v1``) become lean frozen records. Parsers take the raw JSON the
API server (or a ``simulate`` file) gives and raise :class:`~apis.core.errors.ParseError` naming the
object and the field. Storage sizes are bytes, rounded up as ``Quantity.Value()`` rounds.

The helpers mirror kube-scheduler's ``component-helpers/storage/volume``: the beta class annotation
beats ``spec.storageClassName`` (``GetPersistentVolumeClaimClass`` / ``GetPersistentVolumeClass``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apis.core.errors import ParseError, QuantityError
from apis.core.jsonfields import (
    Json,
    as_map,
    check_item,
    get_bool,
    get_list,
    get_map,
    get_optional_int,
    get_str,
    get_str_list,
    invalid,
)
from apis.core.parse import parse_label_selector, parse_node_selector_term, parse_object_meta
from apis.core.quantity import NANOS_PER_UNIT, quantity_nanos, scale_up
from apis.core.types import LabelSelector, NodeSelectorTerm, ObjectMeta
from apis.core.volume_parse import AWS_EBS, AZURE_DISK, CINDER, GCE_PD, ISCSI, PORTWORX, RBD

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


def storage_bytes(raw: Any, field: str) -> int:
    """A storage quantity in bytes, rounded up."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise invalid(field, f"expected a quantity, got {raw!r}")
    try:
        return scale_up(quantity_nanos(raw), NANOS_PER_UNIT)
    except QuantityError as err:
        raise invalid(field, str(err)) from None


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    meta: ObjectMeta
    class_name: str = ""
    """``GetPersistentVolumeClaimClass``: the beta annotation, else ``spec.storageClassName``, else ""."""
    volume_name: str = ""
    access_modes: tuple[str, ...] = ()
    request_bytes: int | None = None
    """``spec.resources.requests.storage``; None when not requested."""
    volume_mode: str = FILESYSTEM
    selector: LabelSelector | None = None
    volume_attributes_class: str = ""
    phase: str = "Pending"

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    @property
    def selected_node(self) -> str | None:
        return self.meta.annotations.get(ANN_SELECTED_NODE)

    @property
    def fully_bound(self) -> bool:
        """``isPVCFullyBound``: a volume name and the bind-completed annotation."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.meta.annotations


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    meta: ObjectMeta
    class_name: str = ""
    """``GetPersistentVolumeClass``: the beta annotation, else ``spec.storageClassName``."""
    capacity_bytes: int = 0
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    """``spec.nodeAffinity.required.nodeSelectorTerms``; None when the volume has no required affinity."""
    claim_ref: ClaimRef | None = None
    phase: str = "Pending"
    csi_driver: str = ""
    volume_handle: str = ""
    """``spec.csi`` driver and handle; for an in-tree source, its :data:`IN_TREE_SOURCES` name and disk."""
    in_tree_source: str = ""
    volume_attributes_class: str = ""

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class TopologyRequirement:
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str | None = None
    """``volumeBindingMode``; the API server defaults it to Immediate, so None means a malformed class."""
    allowed_topologies: tuple[tuple[TopologyRequirement, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    migrated_plugins: frozenset[str] = frozenset()
    """The ``storage.alpha.kubernetes.io/migrated-plugins`` annotation, split at commas."""
    drivers: tuple[str, ...] = ()
    allocatable: Mapping[str, int] | None = None
    """Driver name -> ``allocatable.count``, for the drivers that report one."""


@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    storage_capacity: bool = False


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    namespace: str
    name: str
    storage_class: str
    node_topology: LabelSelector | None = None
    capacity_bytes: int | None = None
    maximum_volume_size: int | None = None

    @property
    def volume_limit(self) -> int | None:
        """``volumeLimit``: ``maximumVolumeSize`` when set (more precise), else ``capacity``."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity_bytes


IN_TREE_SOURCES: Mapping[str, str] = {
    GCE_PD: "kubernetes.io/gce-pd",
    AWS_EBS: "kubernetes.io/aws-ebs",
    AZURE_DISK: "kubernetes.io/azure-disk",
    CINDER: "kubernetes.io/cinder",
    PORTWORX: "kubernetes.io/portworx-volume",
}
"""Volume source field -> in-tree plugin name, for the sources csi-translation-lib migrates to CSI."""

_PV_DISK_FIELD = {
    GCE_PD: "pdName",
    AWS_EBS: "volumeID",
    AZURE_DISK: "diskURI",
    CINDER: "volumeID",
    PORTWORX: "volumeID",
    ISCSI: "iqn",
    RBD: "image",
}


def _class_name(meta: ObjectMeta, spec: Json) -> str:
    annotated = meta.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    return annotated if annotated is not None else get_str(spec, "storageClassName")


def _parse(kind: str, obj: Any, namespaced: bool, body: Any) -> Any:
    meta = parse_object_meta(obj, kind, default_namespace="default" if namespaced else "")
    try:
        return body(meta)
    except ParseError as err:
        name = f"{meta.namespace}/{meta.name}" if namespaced else meta.name
        raise err.for_object(kind, name) from None


def parse_claim(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    def body(meta: ObjectMeta) -> PersistentVolumeClaim:
        spec = get_map(obj, "spec")
        phase = get_str(get_map(obj, "status"), "phase") or "Pending"
        try:
            raw_size = get_map(get_map(spec, "resources"), "requests").get("storage")
            selector = spec.get("selector")
            return PersistentVolumeClaim(
                meta=meta,
                class_name=_class_name(meta, spec),
                volume_name=get_str(spec, "volumeName"),
                access_modes=get_str_list(spec, "accessModes"),
                request_bytes=None if raw_size is None else storage_bytes(raw_size, "resources.requests.storage"),
                volume_mode=get_str(spec, "volumeMode") or FILESYSTEM,
                selector=None if selector is None else parse_label_selector(selector),
                volume_attributes_class=get_str(spec, "volumeAttributesClassName"),
                phase=phase,
            )
        except ParseError as err:
            raise err.under("spec") from None

    result: PersistentVolumeClaim = _parse("PersistentVolumeClaim", obj, True, body)
    return result


def parse_volume(obj: Mapping[str, Any]) -> PersistentVolume:
    def body(meta: ObjectMeta) -> PersistentVolume:
        spec = get_map(obj, "spec")
        try:
            capacity = get_map(spec, "capacity").get("storage")
            csi = get_map(spec, "csi")
            driver, handle, in_tree = get_str(csi, "driver"), get_str(csi, "volumeHandle"), ""
            if not csi:
                for source, disk_field in _PV_DISK_FIELD.items():
                    fields = spec.get(source)
                    if fields is not None:
                        in_tree, handle = source, get_str(as_map(fields, source), disk_field)
                        break
            ref = spec.get("claimRef")
            claim_ref = None
            if ref is not None:
                ref_map = as_map(ref, "claimRef")
                claim_ref = ClaimRef(get_str(ref_map, "namespace"), get_str(ref_map, "name"), get_str(ref_map, "uid"))
            return PersistentVolume(
                meta=meta,
                class_name=_class_name(meta, spec),
                capacity_bytes=0 if capacity is None else storage_bytes(capacity, "capacity.storage"),
                access_modes=get_str_list(spec, "accessModes"),
                volume_mode=get_str(spec, "volumeMode") or FILESYSTEM,
                node_affinity=_required_terms(spec),
                claim_ref=claim_ref,
                phase=get_str(get_map(obj, "status"), "phase") or "Pending",
                csi_driver=driver,
                volume_handle=handle,
                in_tree_source=in_tree,
                volume_attributes_class=get_str(spec, "volumeAttributesClassName"),
            )
        except ParseError as err:
            raise err.under("spec") from None

    result: PersistentVolume = _parse("PersistentVolume", obj, False, body)
    return result


def _required_terms(spec: Json) -> tuple[NodeSelectorTerm, ...] | None:
    required = get_map(spec, "nodeAffinity").get("required")
    if required is None:
        return None
    out = []
    for i, term in enumerate(get_list(as_map(required, "nodeAffinity.required"), "nodeSelectorTerms")):
        try:
            out.append(parse_node_selector_term(term))
        except ParseError as err:
            raise err.under(f"nodeAffinity.required.nodeSelectorTerms[{i}]") from None
    return tuple(out)


def parse_storage_class(obj: Mapping[str, Any]) -> StorageClass:
    def body(meta: ObjectMeta) -> StorageClass:
        terms = []
        for i, item in enumerate(get_list(obj, "allowedTopologies")):
            term = check_item(item, "allowedTopologies", i)
            requirements = []
            for j, raw in enumerate(get_list(term, "matchLabelExpressions")):
                req = check_item(raw, f"allowedTopologies[{i}].matchLabelExpressions", j)
                try:
                    requirements.append(TopologyRequirement(get_str(req, "key"), get_str_list(req, "values")))
                except ParseError as err:
                    raise err.under(f"allowedTopologies[{i}].matchLabelExpressions[{j}]") from None
            terms.append(tuple(requirements))
        mode = obj.get("volumeBindingMode")
        return StorageClass(
            name=meta.name,
            provisioner=get_str(obj, "provisioner"),
            binding_mode=None if mode is None else get_str(obj, "volumeBindingMode"),
            allowed_topologies=tuple(terms),
        )

    result: StorageClass = _parse("StorageClass", obj, False, body)
    return result


def parse_csi_node(obj: Mapping[str, Any]) -> CSINode:
    def body(meta: ObjectMeta) -> CSINode:
        spec = get_map(obj, "spec")
        drivers: list[str] = []
        allocatable: dict[str, int] = {}
        for i, item in enumerate(get_list(spec, "drivers")):
            driver = check_item(item, "spec.drivers", i)
            try:
                name = get_str(driver, "name")
                count = get_optional_int(get_map(driver, "allocatable"), "count")
            except ParseError as err:
                raise err.under(f"spec.drivers[{i}]") from None
            drivers.append(name)
            if count is not None:
                allocatable[name] = count
        migrated = meta.annotations.get(ANN_MIGRATED_PLUGINS, "")
        return CSINode(
            name=meta.name,
            migrated_plugins=frozenset(p for p in migrated.split(",") if p) if migrated else frozenset(),
            drivers=tuple(drivers),
            allocatable=allocatable or None,
        )

    result: CSINode = _parse("CSINode", obj, False, body)
    return result


def parse_csi_driver(obj: Mapping[str, Any]) -> CSIDriver:
    def body(meta: ObjectMeta) -> CSIDriver:
        spec = get_map(obj, "spec")
        try:
            return CSIDriver(meta.name, get_bool(spec, "storageCapacity"))
        except ParseError as err:
            raise err.under("spec") from None

    result: CSIDriver = _parse("CSIDriver", obj, False, body)
    return result


def parse_storage_capacity(obj: Mapping[str, Any]) -> CSIStorageCapacity:
    def body(meta: ObjectMeta) -> CSIStorageCapacity:
        topology = obj.get("nodeTopology")
        capacity = obj.get("capacity")
        maximum = obj.get("maximumVolumeSize")
        return CSIStorageCapacity(
            namespace=meta.namespace,
            name=meta.name,
            storage_class=get_str(obj, "storageClassName"),
            node_topology=None if topology is None else parse_label_selector(topology),
            capacity_bytes=None if capacity is None else storage_bytes(capacity, "capacity"),
            maximum_volume_size=None if maximum is None else storage_bytes(maximum, "maximumVolumeSize"),
        )

    result: CSIStorageCapacity = _parse("CSIStorageCapacity", obj, True, body)
    return result
