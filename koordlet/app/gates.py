"""The feature-gate start-up report: probe the node's interfaces, classify every gate, log the report and
export ``koordlet_feature_gate_active{node, gate}`` (1: the gate is on and acts on this node, else 0).

A gate that is on but cannot act (not applicable on this node, or not implemented) is turned off in the
gate set the agent runs with, so nothing behind it starts.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge

from koordlet.metricsadvisor.gpu import NVMLUnavailableError, PyNVML
from koordlet.qosmanager import FeatureGates
from koordlet.qosmanager.gatetable import GateReport, GateState, Interface, Probe, classify
from koordlet.system import CgroupFS, CgroupVersion
from koordlet.system.coresched import core_sched_missing
from koordlet.system.kernelfeatures import (
    blkio_missing,
    group_identity_missing,
    hugepages_missing,
    kidled_missing,
    psi_missing,
    resctrl_missing,
)
from koordlet.system.pcidevices import PCIDevices
from koordlet.system.perf import perf_hardware_missing

log = logging.getLogger("koordlet.featuregates")

METRIC = "koordlet_feature_gate_active"


def _nvml_missing() -> str | None:
    try:
        gpus = PyNVML().gpus()
    except NVMLUnavailableError as err:
        return str(err)
    except Exception as err:  # an NVML call failing
        return f"NVML query failed: {err}"
    return None if gpus else "no GPUs found by NVML"


def _rdma_missing(sysfs: Path) -> str | None:
    nics, _ = PCIDevices(sysfs).rdma_nics()
    return None if nics else f"no RDMA NIC under {sysfs / 'bus' / 'pci' / 'devices'}"


def _core_sched_missing(cgroupfs: CgroupFS) -> str | None:
    """CoreSched acts with core scheduling (cookies) or ``cpu.idle`` (idle QoS cgroups), as Koordinator's."""
    missing = core_sched_missing()
    idle = cgroupfs.file_path("cpu.idle", "")
    if missing is None or (idle is not None and idle.is_file()):
        return None
    return f"{missing}; and no cpu.idle in the cpu cgroup"


def node_probes(cgroupfs: CgroupFS, args: argparse.Namespace, *, proc_root: Path) -> dict[Interface, Probe]:
    """The probes of this node, rooted where the agent reads (``--cgroup-root``, ``--proc-root``,
    ``--sysfs-root``, ``--sys-fs-root-dir`` for resctrl)."""
    sysfs = Path(getattr(args, "sysfs_root", None) or "/sys")
    sys_fs = Path(getattr(args, "sys_fs_root_dir", None) or "/sys/fs")
    v2 = cgroupfs.version is CgroupVersion.V2
    return {
        Interface.RESCTRL: lambda: resctrl_missing(sys_fs / "resctrl"),
        Interface.BVT: lambda: group_identity_missing(cgroupfs, proc_root),
        Interface.CORE_SCHED: lambda: _core_sched_missing(cgroupfs),
        Interface.BLKIO: lambda: blkio_missing(cgroupfs),
        Interface.PERF_HW: lambda: perf_hardware_missing(cgroupfs.root, v2=v2),
        Interface.KIDLED: lambda: kidled_missing(sysfs),
        Interface.HUGEPAGES: lambda: hugepages_missing(sysfs),
        Interface.PSI: lambda: psi_missing(proc_root),
        Interface.NVML: _nvml_missing,
        Interface.RDMA: lambda: _rdma_missing(sysfs),
    }


def export_report(report: GateReport, registry: CollectorRegistry, node: str) -> Gauge:
    gauge = Gauge(
        METRIC,
        "1 when the feature gate is on and acts on this node; 0 when it is off, not applicable here, or not "
        "implemented",
        ["node", "gate"],
        registry=registry,
    )
    for row in report.rows:
        gauge.labels(node=node, gate=row.name).set(1 if row.state is GateState.ACTIVE else 0)
    return gauge


def report_gates(
    gates: FeatureGates,
    probes: Mapping[Interface, Probe],
    *,
    registry: CollectorRegistry,
    node: str,
) -> tuple[FeatureGates, GateReport]:
    """Classify and export the gauge. Returns the gates to run with (those that cannot act forced off) and
    the report; :func:`log_report` prints it once the agent has started."""
    report = classify(gates, probes)
    export_report(report, registry, node)
    return gates.without(report.inactive), report


def log_report(report: GateReport) -> None:
    """Each report line at warning level, so it shows at the default verbosity."""
    for line in report.lines():
        log.warning("%s", line)
