"""Lean, immutable views of the ``resource.k8s.io/v1`` kinds Dynamic Resource Allocation uses.

DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate, as the scheduler reads them
(kube-scheduler's DynamicResources plugin and ``k8s.io/dynamic-resource-allocation/structured``). They are
parsed from raw JSON by :mod:`apis.resource.parse`, never from the kubernetes client's models.

What the allocator only passes through (opaque device configuration, its driver parameters) is kept as
the JSON text the API server gave, so the scheduler can write it back into an allocation unchanged.
Quantities (device capacity, counters) are integer nano-units (:mod:`apis.core.quantity`), with the text
they were written as for CEL's ``quantity`` values and messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from apis.core.frozendict import FrozenDict
from apis.core.types import NodeSelectorTerm, ObjectMeta

GROUP = "resource.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

FINALIZER = "resource.kubernetes.io/delete-protection"
"""``resourceapi.Finalizer``: set by the scheduler before it writes an allocation."""

ALLOCATION_RESULTS_MAX_SIZE = 32
"""``resourceapi.AllocationResultsMaxSize``: devices one claim may be allocated."""
FIRST_AVAILABLE_MAX_SIZE = 8
"""``resourceapi.FirstAvailableDeviceRequestMaxSize``: subrequests of one request (also the score base)."""
CEL_SELECTOR_MAX_COST = 1_000_000
"""``resourceapi.CELSelectorExpressionMaxCost``: the runtime cost budget of one CEL selector."""
CEL_SELECTOR_MAX_LENGTH = 10 * 1024
"""``resourceapi.CELSelectorExpressionMaxLength``."""
RESERVED_FOR_MAX_SIZE = 256
"""``resourceapi.ResourceClaimReservedForMaxSize``."""


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


class AttributeKind(StrEnum):
    """Which of a ``DeviceAttribute``'s four value fields is set."""

    INT = "int"
    BOOL = "bool"
    STRING = "string"
    VERSION = "version"


@dataclass(frozen=True, slots=True)
class DeviceAttribute:
    """One typed attribute value. ``matchAttribute`` compares ``(kind, value)``: an int ``1`` never
    equals a string ``"1"``, and versions compare as their (minimal semver) text."""

    kind: AttributeKind
    value: int | bool | str


@dataclass(frozen=True, slots=True)
class Quantity:
    """A ``resource.Quantity``: exact nano-units and the text it was written as."""

    nanos: int
    text: str


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    effect: str
    """``NoSchedule``, ``NoExecute`` or ``None`` (others are kept and ignored, as upstream does)."""
    value: str = ""


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class Device:
    """One entry of ``ResourceSlice.spec.devices``. Attribute and capacity names are as written
    (``model`` or ``gpu.example.com/model``); CEL and ``matchAttribute`` qualify short names with the
    slice's driver."""

    name: str
    attributes: Mapping[str, DeviceAttribute] = field(default_factory=FrozenDict)
    capacity: Mapping[str, Quantity] = field(default_factory=FrozenDict)
    consumes_counters: tuple[CounterConsumption, ...] = ()
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A driver's devices in one pool (``spec.pool``), available on one node, a selected set of nodes,
    all nodes, or chosen per device (``perDeviceNodeSelection``)."""

    meta: ObjectMeta
    driver: str
    pool: str
    pool_generation: int
    resource_slice_count: int
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """An opaque configuration entry (of a class, a claim, or an allocation): the requests it applies
    to (empty: all) and its ``opaque`` object as JSON text (``{"driver": ..., "parameters": ...}``)."""

    requests: tuple[str, ...]
    opaque_json: str
    source: str = ""
    """``FromClass`` / ``FromClaim`` in an allocation result; empty in a class or claim spec."""


@dataclass(frozen=True, slots=True)
class DeviceClass:
    meta: ObjectMeta
    selectors: tuple[str, ...] = ()
    """CEL expressions, all of which a device of the class must satisfy."""
    config: tuple[DeviceConfig, ...] = ()
    extended_resource_name: str = ""

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """One alternative of a ``firstAvailable`` request (also how an ``exactly`` request is read, with
    ``admin_access``)."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    admin_access: bool | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """``spec.devices.requests[i]``: either ``exactly`` or ``first_available`` is set."""

    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]
    """The (sub)requests it applies to; empty means all."""
    match_attribute: str
    """A fully qualified attribute name every device of those requests must share."""


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """``status.allocation.devices.results[i]``."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def device_id(self) -> DeviceId:
        return DeviceId(self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class AllocationResult:
    results: tuple[DeviceResult, ...] = ()
    config: tuple[DeviceConfig, ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    """Where the allocated devices are available; ``None``: on every node."""
    allocation_timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    """``status.reservedFor[i]``: a pod (``resource: pods``) or another consumer."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    meta: ObjectMeta
    spec: ClaimSpec
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()
    finalizers: tuple[str, ...] = ()
    key: str = field(init=False, repr=False, compare=False)
    """``namespace/name``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.meta.namespace}/{self.meta.name}")

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def uid(self) -> str:
        return self.meta.uid

    def reserved_for_pod(self, pod_uid: str) -> bool:
        """``resourceclaim.IsReservedForPod``."""
        return any(ref.uid == pod_uid for ref in self.reserved_for)


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    meta: ObjectMeta
    spec: ClaimSpec
    claim_labels: Mapping[str, str] = field(default_factory=FrozenDict)
    claim_annotations: Mapping[str, str] = field(default_factory=FrozenDict)
    spec_json: str = "{}"
    """``spec.spec`` as JSON text, which the resourceclaim controller copies into the claims it creates."""

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True, order=True)
class DeviceId:
    """``structured.DeviceID``: a device is named by its driver, pool and name."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"
