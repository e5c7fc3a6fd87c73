"""Shared pieces of the ``slo.koordinator.sh/v1alpha1`` types: the base model, object meta, ResourceMap."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from apis.core.gojson import GoFields
from apis.slo.quantity import Quantity, int_value, milli_value

GROUP = "slo.koordinator.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class WireModel(BaseModel):
    """Base of every API type: camelCase on the wire, snake_case in Python, unknown fields ignored.

    Keys match fields as Go's ``encoding/json`` matches them (:mod:`apis.core.gojson`): a key that differs
    from the wire name only in case fills the field, and of two keys for one field the later wins.
    ``to_wire()`` gives the JSON-ready dict a Go client would send (unset fields left out).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
    go_fields: ClassVar[GoFields] = GoFields.of(())

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        wire = GoFields.of(info.alias or name for name, info in cls.model_fields.items())
        # populate_by_name: the Python names are accepted too, but only as written (Go knows no such names).
        cls.go_fields = GoFields(wire.exact | cls.model_fields.keys(), wire.folded)

    @model_validator(mode="before")
    @classmethod
    def _match_keys_as_go(cls, data: Any) -> Any:
        return cls.go_fields.fold(data) if isinstance(data, dict) else data

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ObjectMeta(WireModel):
    """The parts of ``metav1.ObjectMeta`` we read or write.

    The CRD schema leaves metadata as a bare object.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: str | None = None
    namespace: str | None = None
    uid: str | None = Field(default=None, alias="uid")
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: str | None = None


class Condition(WireModel):
    """``metav1.Condition``."""

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: datetime
    reason: str
    message: str


class DeviceTopology(WireModel):
    socket_id: int | None = Field(default=None, alias="socketID", json_schema_extra={"format": "int32"})
    node_id: int | None = Field(default=None, alias="nodeID", json_schema_extra={"format": "int32"})
    pcie_id: str | None = Field(default=None, alias="pcieID")
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunction(WireModel):
    minor: int | None = Field(default=None, json_schema_extra={"format": "int32"})
    bus_id: str | None = Field(default=None, alias="busID")


class VirtualFunctionGroup(WireModel):
    labels: dict[str, str] | None = None
    vfs: list[VirtualFunction] | None = None


class DeviceInfo(WireModel):
    """``schedulingv1alpha1.DeviceInfo`` (GPU/RDMA/XPU usage). Carried through, not interpreted."""

    type: str | None = None
    labels: dict[str, str] | None = None
    id: str | None = Field(default=None, alias="id")
    minor: int | None = Field(default=None, json_schema_extra={"format": "int32"})
    module_id: int | None = Field(default=None, alias="moduleID", json_schema_extra={"format": "int32"})
    health: bool | None = None
    resources: dict[str, Quantity] | None = None
    topology: DeviceTopology | None = None
    vf_groups: list[VirtualFunctionGroup] | None = None
    conditions: list[Condition] | None = None


class ResourceMap(WireModel):
    """A ``corev1.ResourceList`` plus devices. ``cpu_milli`` / ``memory_bytes`` are the typed reads."""

    CPU: ClassVar[str] = "cpu"
    MEMORY: ClassVar[str] = "memory"

    resources: dict[str, Quantity] | None = None
    devices: list[DeviceInfo] | None = None

    def milli(self, name: str) -> int | None:
        """``Quantity.MilliValue()`` of one resource, or ``None`` when absent."""
        value = (self.resources or {}).get(name)
        return None if value is None else milli_value(value)

    def value(self, name: str) -> int | None:
        """``Quantity.Value()`` of one resource, or ``None`` when absent."""
        value = (self.resources or {}).get(name)
        return None if value is None else int_value(value)

    @property
    def cpu_milli(self) -> int | None:
        return self.milli(self.CPU)

    @property
    def memory_bytes(self) -> int | None:
        return self.value(self.MEMORY)


_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def format_go_duration(seconds: int) -> str:
    """Whole seconds as Go's ``time.Duration.String()``: 300 → ``"5m0s"``, 3600 → ``"1h0m0s"``."""
    if seconds == 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string (``"5m"``, ``"1h30m"``, ``"300s"``). Raises ``ValueError``."""
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for match in _GO_DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise ValueError(f"not a duration: {text!r}")
    return total
