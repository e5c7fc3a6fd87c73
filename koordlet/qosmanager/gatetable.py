"""What each feature gate does in pykoord: built, not applicable on this node, or not implemented.

Every gate name koordlet accepts is in :data:`GATE_TABLE` exactly once, as one of:

- **built**: the gate does what Koordinator's does. Some need a kernel or hardware interface
  (``requires``); on a node without it the gate is *not applicable on this node*: one line at start names
  the gate and the missing interface, its ``koordlet_feature_gate_active`` gauge is 0, and it does nothing
  else (Koordinator's plugins check the same interfaces and do nothing without them);
- **not implemented**: pykoord has no code behind the gate. Turning it on by its own name is refused at
  start; one that is on by default, or through ``AllAlpha``/``AllBeta``, is listed once at start.

The table is data; :func:`classify` turns it, the resolved gates and the node's interface probes into the
start-up report (no I/O here: the probes are handed in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from koordlet.qosmanager.featuregates import FeatureGates


class Implementation(StrEnum):
    BUILT = "built"
    NOT_IMPLEMENTED = "not implemented"


class GateState(StrEnum):
    """A gate's state on this node, after start."""

    ACTIVE = "active"
    OFF = "off"
    NOT_APPLICABLE = "not applicable on this node"
    NOT_IMPLEMENTED = "not implemented"


class Interface(StrEnum):
    """Kernel or hardware interfaces built gates need; the agent probes each once at start."""

    RESCTRL = "resctrl"
    BVT = "group-identity"
    CORE_SCHED = "core-sched"
    BLKIO = "blkio"
    PERF_HW = "perf-hardware-events"
    KIDLED = "kidled"
    HUGEPAGES = "hugepages"
    PSI = "psi"
    NVML = "nvml"
    RDMA = "rdma"


INTERFACE_TEXT: Mapping[Interface, str] = MappingProxyType(
    {
        Interface.RESCTRL: "the resctrl filesystem (`/sys/fs/resctrl`)",
        Interface.BVT: "`cpu.bvt_warp_ns` or `kernel.sched_group_identity_enabled` (Anolis/Alibaba kernels)",
        Interface.CORE_SCHED: "core scheduling (`prctl(PR_SCHED_CORE)`) or `cpu.idle`; cookies need the former",
        Interface.BLKIO: "the blkio (v1) or io (v2) cgroup controller",
        Interface.PERF_HW: "hardware perf events (cycles, instructions) and perf_event cgroups",
        Interface.KIDLED: "kidled (`/sys/kernel/mm/kidled`)",
        Interface.HUGEPAGES: "per-NUMA hugepages in sysfs",
        Interface.PSI: "PSI files (`/proc/pressure`, cgroup `*.pressure`)",
        Interface.NVML: "NVML (NVIDIA driver and nvidia-ml-py)",
        Interface.RDMA: "an RDMA NIC on the PCI bus (`/sys/bus/pci/devices/*/infiniband`)",
    }
)


@dataclass(frozen=True, slots=True)
class GateImplementation:
    implementation: Implementation
    what: str
    """Built: what the gate does. Not implemented: what Koordinator's gate does that pykoord lacks."""
    requires: tuple[Interface, ...] = ()


def _built(what: str, *requires: Interface) -> GateImplementation:
    return GateImplementation(Implementation.BUILT, what, requires)


def _missing(what: str) -> GateImplementation:
    return GateImplementation(Implementation.NOT_IMPLEMENTED, what)


GATE_TABLE: Mapping[str, GateImplementation] = MappingProxyType(
    {
        "AuditEvents": _missing("audit log files of cgroup writes under --audit-log-dir"),
        "AuditEventsHTTPHandler": _missing("the audit log served at /events"),
        "BECPUSuppress": _built("caps BE pods' CPU (cpuset or CFS quota) to what LS pods and the system leave"),
        "BECPUManager": _missing("a BE CPU manager that owns BE cpusets (CPU suppress steps aside)"),
        "BECPUEvict": _built("evicts BE pods whose CPU satisfaction stays low"),
        "CPUEvict": _built("priority-based eviction on node CPU usage"),
        "CPUAllocatableEvict": _built("evicts batch/mid pods whose CPU requests exceed the node's allocatable"),
        "BEMemoryEvict": _built("evicts BE pods when node memory passes the threshold"),
        "MemoryEvict": _built("priority-based eviction on node memory usage"),
        "MemoryAllocatableEvict": _built("evicts batch/mid pods whose memory requests exceed the allocatable"),
        "CPUBurst": _built("CFS burst and quota scaling for burstable pods"),
        "SystemConfig": _built("min_free_kbytes, watermark_scale_factor and memcg reaper from NodeSLO"),
        "RdtResctrl": _built("resctrl groups LSR/LS/BE with L3 ways and memory bandwidth", Interface.RESCTRL),
        "ResctrlCollector": _built("LLC occupancy and memory bandwidth per resctrl group", Interface.RESCTRL),
        "CgroupReconcile": _built("memory QoS per class (min/low/high, wmark, priority, oom group)"),
        "NodeTopologyReport": _built("publishes the node's NodeResourceTopology"),
        "Accelerators": _built("GPU Device object and GPU usage", Interface.NVML),
        "RDMADevices": _built("RDMA NICs (and their SR-IOV VFs) in the Device object", Interface.RDMA),
        "CPICollector": _built("cycles and instructions per container (CPI)", Interface.PERF_HW),
        "Libpfm4": _missing("CPI events encoded by libpfm4 (pykoord uses the generic hardware events)"),
        "PSICollector": _built("PSI of pods and containers", Interface.PSI),
        "BlkIOReconcile": _built("blkio weights and throttles per class from NodeSLO", Interface.BLKIO),
        "ColdPageCollector": _built("cold page size from kidled for node, pods and containers", Interface.KIDLED),
        "HugePageReport": _built("hugepages per NUMA node in the NodeResourceTopology", Interface.HUGEPAGES),
        "PodResourcesProxy": _missing("a proxy of the kubelet's pod-resources socket"),
        "HamiCoreVGPUMonitor": _missing("HAMi-core vGPU monitoring"),
        "PerCPUMetric": _missing("per-CPU share-pool gauges"),
        "NodeMetricPromMetrics": _missing("koordlet_node_metric_* gauges of the NodeMetric report"),
        # runtime-hook gates (Koordinator adds them to the same gate set)
        "GroupIdentity": _built("cpu.bvt_warp_ns per QoS class from NodeSLO cpuQOS", Interface.BVT),
        "CPUSetAllocator": _built("containers on their bound cpuset or the share pool"),
        "BatchResource": _built("BE pods' cgroups from their batch resources"),
        "GPUEnvInject": _built(
            "GPU env (NVIDIA_VISIBLE_DEVICES; for HAMi-core shared GPUs its limits, `LD_PRELOAD` and the library "
            "and `/tmp/vgpulock` mounts) injected at creation through NRI"
        ),
        "RDMADeviceInject": _missing("RDMA devices injected at container creation (a runtime hook)"),
        "CPUNormalization": _built("LS pods' CFS quota scaled by the node's CPU normalization ratio"),
        "CoreSched": _built("core-scheduling cookies per group and cpu.idle per class", Interface.CORE_SCHED),
        "TerwayQoS": _missing("network QoS through Terway"),
        "TCNetworkQoS": _missing("network QoS through tc"),
        "Resctrl": _built("per-pod resctrl groups from the pod's resctrl annotation", Interface.RESCTRL),
        "OOMScoreAdj": _built("oom_score_adj of containers from pod annotations"),
    }
)
"""Koordinator's koordlet gates (``pkg/features/koordlet_features.go`` and ``runtimehooks/config.go``)."""

PYKOORD_GATES: Mapping[str, GateImplementation] = MappingProxyType(
    {"BECPUThrottleReporter": _built("exports koordlet_be_cpu_throttled_ratio")}
)
"""Gates of pykoord's own built-in plugins (Koordinator has no such gate)."""


def implementation_of(name: str) -> GateImplementation:
    """A gate's entry; gates of out-of-tree QoS plugins are built by definition."""
    return GATE_TABLE.get(name) or PYKOORD_GATES.get(name) or _built("an out-of-tree QoS plugin")


def refused_gates(gates: FeatureGates) -> list[str]:
    """Not-implemented gates turned on by their own name: koordlet refuses to start with them."""
    return [
        n for n in gates.explicitly_enabled() if implementation_of(n).implementation is Implementation.NOT_IMPLEMENTED
    ]


Probe = Callable[[], str | None]
"""Returns ``None`` when the interface is there, else a short phrase saying what is missing."""


@dataclass(frozen=True, slots=True)
class GateRow:
    name: str
    state: GateState
    detail: str = ""


@dataclass(frozen=True, slots=True)
class GateReport:
    rows: tuple[GateRow, ...]

    def names(self, state: GateState) -> list[str]:
        return [r.name for r in self.rows if r.state is state]

    @property
    def inactive(self) -> frozenset[str]:
        """Gates that are on but do nothing here (not applicable or not implemented)."""
        return frozenset(r.name for r in self.rows if r.state in (GateState.NOT_APPLICABLE, GateState.NOT_IMPLEMENTED))

    def lines(self) -> list[str]:
        """The start-up report: one line per gate that is on but not applicable, one line for the
        not-implemented gates that are on (by default or in bulk), and one line with the active gates."""
        out = [
            f"feature gate {r.name} is on but not applicable on this node: {r.detail}"
            for r in self.rows
            if r.state is GateState.NOT_APPLICABLE
        ]
        missing = self.names(GateState.NOT_IMPLEMENTED)
        if missing:
            out.append("feature gates on but not implemented in pykoord, they do nothing: " + ", ".join(missing))
        out.append("feature gates active: " + (", ".join(self.names(GateState.ACTIVE)) or "none"))
        return out


def classify(gates: FeatureGates, probes: Mapping[Interface, Probe]) -> GateReport:
    """Each known gate's state. An interface without a probe counts as present (tests, embedding); each
    probe runs at most once."""
    answers: dict[Interface, str | None] = {}

    def missing(interface: Interface) -> str | None:
        if interface not in answers:
            probe = probes.get(interface)
            answers[interface] = probe() if probe is not None else None
        return answers[interface]

    rows: list[GateRow] = []
    for name in gates.known():
        entry = implementation_of(name)
        if not gates.enabled(name):
            rows.append(GateRow(name, GateState.OFF))
        elif entry.implementation is Implementation.NOT_IMPLEMENTED:
            rows.append(GateRow(name, GateState.NOT_IMPLEMENTED, entry.what))
        else:
            why = next((w for w in map(missing, entry.requires) if w is not None), None)
            if why is None:
                rows.append(GateRow(name, GateState.ACTIVE))
            else:
                rows.append(GateRow(name, GateState.NOT_APPLICABLE, why))
    return GateReport(tuple(rows))
