"""``Device`` (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, one per node, named after it),
wire-compatible with Koordinator's ``apis/scheduling/v1alpha1/device_types.go``.

koordlet reports it (``spec.devices``: type, minor, UUID, health, resources, topology); DeviceShare reads
it through :func:`parse_device`, a lean immutable view with quantities as plain integers. The model is
what the CRD manifest is generated from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from apis.core.quantity import value as quantity_value
from apis.scheduling.constants import API_VERSION
from apis.slo.common import ObjectMeta, WireModel
from apis.slo.quantity import Quantity

_INT32: JsonDict = {"format": "int32"}
_DATE_TIME: JsonDict = {"format": "date-time"}
_CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)

DEVICE_KIND = "Device"
DEVICE_PLURAL = "devices"


class DeviceCondition(WireModel):
    """``metav1.Condition``."""

    type: str = Field(max_length=316, pattern=_CONDITION_TYPE_PATTERN)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(max_length=32768)
    last_transition_time: str = Field(json_schema_extra=_DATE_TIME)
    observed_generation: int | None = Field(default=None, ge=0)


class DeviceTopology(WireModel):
    socket_id: int = Field(alias="socketID", json_schema_extra=_INT32)
    node_id: int = Field(alias="nodeID", json_schema_extra=_INT32)
    pcie_id: str = Field(alias="pcieID")
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunction(WireModel):
    minor: int = Field(json_schema_extra=_INT32)
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunctionGroup(WireModel):
    labels: dict[str, str] | None = None
    vfs: list[VirtualFunction] | None = None


class DeviceInfo(WireModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", json_schema_extra={"required": ["health"]}
    )

    type: str | None = None
    """``gpu``, ``rdma``, ``fpga``, ``npu``, ``xpu``..."""
    id: str | None = Field(default=None, alias="id")
    """The device's UUID."""
    minor: int | None = Field(default=None, json_schema_extra=_INT32)
    module_id: int | None = Field(default=None, alias="moduleID", json_schema_extra=_INT32)
    health: bool = False
    """Required in the schema; the API server defaults it to false."""
    resources: dict[str, Quantity] | None = None
    topology: DeviceTopology | None = None
    labels: dict[str, str] | None = None
    vf_groups: list[VirtualFunctionGroup] | None = Field(default=None, alias="vfGroups")
    conditions: list[DeviceCondition] | None = None


class DeviceSpec(WireModel):
    devices: list[DeviceInfo] | None = None


class DeviceAllocationItem(WireModel):
    name: str | None = None
    namespace: str | None = None
    uuid: str | None = None
    minors: list[Annotated[int, Field(json_schema_extra=_INT32)]] | None = None


class DeviceAllocation(WireModel):
    type: str | None = None
    entries: list[DeviceAllocationItem] | None = None


class DeviceStatus(WireModel):
    allocations: list[DeviceAllocation] | None = None


class Device(WireModel):
    api_version: str | None = API_VERSION
    kind: str | None = DEVICE_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DeviceSpec | None = None
    status: DeviceStatus | None = None


@dataclass(frozen=True, slots=True)
class VFGroupRecord:
    """A group of virtual functions of one device (SR-IOV, e.g. an RDMA NIC): labels and the VFs as
    ``(minor, busID)`` pairs."""

    labels: Mapping[str, str] = field(default_factory=dict)
    vfs: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRecord:
    """One device of a node, as the scheduler reads it."""

    type: str
    minor: int
    uuid: str
    health: bool
    resources: Mapping[str, int]
    """Plain integers: percent for ``*-core``/``*-ratio``, bytes for ``gpu-memory``."""
    numa_node: int = -1
    pcie_id: str = ""
    bus_id: str = ""
    socket: int = -1
    labels: Mapping[str, str] = field(default_factory=dict)
    vf_groups: tuple[VFGroupRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeDeviceRecord:
    """A node's ``Device`` object: its name (= the node's), labels and devices in spec order."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    devices: tuple[DeviceRecord, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)

    def of_type(self, device_type: str) -> tuple[DeviceRecord, ...]:
        return tuple(d for d in self.devices if d.type == device_type)


def parse_device(obj: Mapping[str, Any]) -> NodeDeviceRecord:
    """The lean view of a ``Device`` object; raises ``ValueError`` naming the object and field.

    Refused as well (Koordinator accepts them, with the effects in brackets): a negative resource
    quantity (the deviceresource controller would write a negative capacity the API server refuses,
    forever) and two devices of one type with the same minor (Koordinator keys devices by minor, so one
    of the two silently disappears, and pods bound to it by minor collide)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    shown = name if isinstance(name, str) and name else "?"
    try:
        model = Device.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"Device {shown}: {where}: {first['msg']}") from None
    except UnicodeError as exc:  # a lone surrogate in a string (YAML "\udcff")
        raise ValueError(f"Device {shown}: not valid text: {exc}") from None
    name = model.metadata.name or ""
    if not name:
        raise ValueError("Device: metadata.name is required (the node's name)")
    devices: list[DeviceRecord] = []
    minors: dict[tuple[str, int], int] = {}
    for i, d in enumerate(model.spec.devices or [] if model.spec else []):
        resources: dict[str, int] = {}
        for key, q in (d.resources or {}).items():
            try:
                amount = quantity_value(q)
            except ValueError as exc:
                raise ValueError(f"Device {name}: spec.devices[{i}].resources[{key}]: {exc}") from None
            if amount < 0:
                raise ValueError(f"Device {name}: spec.devices[{i}].resources[{key}]: must be non-negative, got {q}")
            resources[key] = amount
        minor = d.minor if d.minor is not None else 0
        if d.minor is not None:
            first_index = minors.setdefault((d.type or "", minor), i)
            if first_index != i:
                raise ValueError(
                    f"Device {name}: spec.devices[{i}].minor: duplicate minor {minor} of type "
                    f"{d.type or '(none)'!r} (also spec.devices[{first_index}])"
                )
        topo = d.topology
        groups = tuple(
            VFGroupRecord(
                labels=dict(g.labels or {}),
                vfs=tuple((vf.minor, vf.bus_id or "") for vf in g.vfs or []),
            )
            for g in d.vf_groups or []
        )
        devices.append(
            DeviceRecord(
                type=d.type or "",
                minor=minor,
                uuid=d.id or "",
                health=d.health,
                resources=resources,
                numa_node=topo.node_id if topo is not None else -1,
                pcie_id=topo.pcie_id if topo is not None else "",
                bus_id=(topo.bus_id or "") if topo is not None else "",
                socket=topo.socket_id if topo is not None else -1,
                labels=dict(d.labels or {}),
                vf_groups=groups,
            )
        )
    return NodeDeviceRecord(
        name=name,
        labels=dict(model.metadata.labels or {}),
        devices=tuple(devices),
        annotations=dict(model.metadata.annotations or {}),
    )
