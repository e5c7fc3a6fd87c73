"""Lean, immutable views of the Kubernetes core objects the scheduler reads.

These are parsed from raw JSON (see :mod:`apis.core.parse`), never from the kubernetes client's model
classes, which cost about a millisecond per pod. Resource amounts are plain ``int``: CPU in millicores,
everything else in base units (bytes, counts), exactly as ``Quantity.MilliValue()`` / ``Value()`` give them.

Every mapping field holds a :class:`~apis.core.frozendict.FrozenDict` (an immutable, hashable ``dict``), so
all these types are hashable and safe to share between threads and caches. Construct them with
``FrozenDict(...)`` (the parser and ``tests/builders.py`` do); a plain ``dict`` would make the object
unhashable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from apis.core.frozendict import FrozenDict

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

ResourceList = Mapping[str, int]
"""Resource name -> amount (cpu in millicores, everything else in base units)."""

EMPTY_RESOURCES: ResourceList = FrozenDict()
EMPTY_LABELS: Mapping[str, str] = FrozenDict()


class Operator(StrEnum):
    """Selector requirement operators (label selectors use the first four, node selectors all six)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector. An empty selector matches everything; ``None`` (at use sites) matches nothing."""

    match_labels: Mapping[str, str] = field(default_factory=FrozenDict)
    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One ORed term of a node selector; requirements inside it are ANDed.

    ``match_fields`` supports only ``metadata.name`` as in Kubernetes.
    """

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    required: tuple[NodeSelectorTerm, ...] | None = None
    """``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``; None when absent."""
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """Used for both podAffinity and podAntiAffinity."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: TaintEffect
    value: str = ""


@dataclass(frozen=True, slots=True)
class Toleration:
    """``effect`` None means all effects; ``operator`` is "Equal" or "Exists"."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port with ``hostPort > 0``. Empty host IP is normalised to 0.0.0.0, protocol to TCP."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    """"DoNotSchedule" or "ScheduleAnyway"."""
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    labels: Mapping[str, str] = field(default_factory=FrozenDict)
    annotations: Mapping[str, str] = field(default_factory=FrozenDict)
    owner_references: tuple[OwnerReference, ...] = ()
    creation_timestamp: float | None = None
    """Seconds since the epoch (UTC)."""
    deletion_timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class PodVolume:
    """A pod volume the volume plugins look at: claims, and the inline disks that can conflict or count
    against a node's attach limit. Other volume types (configMap, emptyDir, ...) are not kept.

    ``source`` is the volume type as the pod spec names it (``persistentVolumeClaim``, ``ephemeral``,
    ``gcePersistentDisk``, ``awsElasticBlockStore``, ``azureDisk``, ``cinder``, ``portworxVolume``,
    ``rbd``, ``iscsi``); ``disk`` identifies the disk (``pdName``, ``volumeID``, ``diskURI``, the iSCSI
    ``iqn``, the RBD ``pool/image``); ``monitors`` are the RBD Ceph monitors.
    """

    name: str
    source: str
    claim_name: str = ""
    """The claim a ``persistentVolumeClaim`` volume names, or ``<pod>-<volume>`` for ``ephemeral``."""
    disk: str = ""
    read_only: bool = False
    monitors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """``spec.resourceClaims[i]``: a claim the pod uses, named directly (``claim_name``) or created for the
    pod from a ResourceClaimTemplate (``template_name``) by kube-controller-manager. Exactly one is set."""

    name: str
    claim_name: str = ""
    template_name: str = ""


@dataclass(frozen=True, slots=True)
class Pod:
    """What the scheduler needs of a Pod.

    ``requests`` is the effective pod request used by Filter (kube-scheduler's ``PodRequests``: containers
    summed, max'ed with init containers (sidecars accounted), plus overhead; pod-level resources honoured).
    ``non_zero_cpu`` / ``non_zero_memory`` are the scoring requests where a container missing a request
    counts as 100m / 200Mi.
    """

    meta: ObjectMeta
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    requests: ResourceList = field(default_factory=FrozenDict)
    limits: ResourceList = field(default_factory=FrozenDict)
    non_zero_cpu: int = 0
    non_zero_memory: int = 0
    node_selector: Mapping[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    pvc_names: tuple[str, ...] = ()
    """Names of PersistentVolumeClaims the pod mounts (ephemeral volumes included, as ``<pod>-<volume>``)."""
    images: tuple[str, ...] = ()
    volumes: tuple[PodVolume, ...] = ()
    """The volumes the volume plugins read (see :class:`PodVolume`), in spec order."""
    local_storage: bool = False
    """The pod mounts an ``emptyDir`` or ``hostPath`` volume (the descheduler's local-storage gate)."""
    phase: str = "Pending"
    qos_class: str = "BestEffort"
    """Kubernetes QoS class: Guaranteed, Burstable or BestEffort."""
    nominated_node_name: str = ""
    conditions: Mapping[str, str] = field(default_factory=FrozenDict)
    """Pod condition type -> status ("True"/"False"/"Unknown")."""
    condition_times: Mapping[str, float] = field(default_factory=FrozenDict)
    """Pod condition type -> ``lastTransitionTime`` (seconds since the epoch), where the server set one."""
    resource_claims: tuple[PodResourceClaim, ...] = ()
    """``spec.resourceClaims``: the ResourceClaims (Dynamic Resource Allocation) the pod needs."""
    resource_claim_statuses: Mapping[str, str] = field(default_factory=FrozenDict)
    """``status.resourceClaimStatuses``: pod claim name -> the name of the claim generated for it from its
    template (``""`` when the controller decided none was needed)."""
    restart_count: int = 0
    """The sum of ``status.containerStatuses[].restartCount``."""
    init_restart_count: int = 0
    """The sum of ``status.initContainerStatuses[].restartCount``."""
    key: str = field(init=False, repr=False, compare=False)
    """``namespace/name``, the identity the queue and cache use. Computed once here (including by
    ``dataclasses.replace``): the scheduler reads it a few dozen times per pod."""

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

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.meta.annotations

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class ContainerImage:
    names: tuple[str, ...]
    size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    allocatable: ResourceList = field(default_factory=FrozenDict)
    capacity: ResourceList = field(default_factory=FrozenDict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    images: tuple[ContainerImage, ...] = ()
    conditions: Mapping[str, str] = field(default_factory=FrozenDict)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.meta.annotations
