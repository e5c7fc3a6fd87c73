"""The collectors behind feature gates that run on their own interval (not every collect tick): built
here from the gates the agent runs with, so ``agent.py`` only starts what this returns."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor.coldpage import ColdPageCollector
from koordlet.metricsadvisor.cpi import CPICollector
from koordlet.metricsadvisor.gpu import GPUReporter, PyNVML
from koordlet.metricsadvisor.rdma import RDMASource
from koordlet.metricsadvisor.resctrl import DEFAULT_INTERVAL_SECONDS as RESCTRL_INTERVAL
from koordlet.metricsadvisor.resctrl import ResctrlCollector
from koordlet.qosmanager import FeatureGates
from koordlet.statesinformer import StatesInformer
from koordlet.system import CgroupFS, ProcFS
from koordlet.system.clock import Clock
from koordlet.system.kidled import Kidled
from koordlet.system.pcidevices import PCIDevices
from koordlet.system.resctrl import ResctrlFS


@dataclass(frozen=True, slots=True)
class GatedCollector:
    name: str
    run: Callable[[asyncio.Event], Coroutine[Any, Any, None]]
    collector: object


@dataclass(frozen=True, slots=True)
class CollectorDeps:
    """What the gated collectors read and write."""

    cgroupfs: CgroupFS
    procfs: ProcFS
    cache: MetricCache
    registry: CollectorRegistry
    informer: StatesInformer


def _seconds(args: argparse.Namespace, name: str, default: float) -> float:
    value = getattr(args, name, None)
    return float(value) if value else default


def gated_collectors(
    gates: FeatureGates, args: argparse.Namespace, deps: CollectorDeps, *, node: str, clock: Clock
) -> list[GatedCollector]:
    """The collectors whose gates are on, each with its run coroutine."""
    cache, registry = deps.cache, deps.registry
    out: list[GatedCollector] = []
    if gates.enabled("ResctrlCollector"):
        root = Path(getattr(args, "sys_fs_root_dir", None) or "/sys/fs") / "resctrl"
        resctrl = ResctrlCollector(ResctrlFS(root), cache, registry, node=node, clock=clock)
        interval = float(getattr(args, "resctrl_collector_interval", None) or RESCTRL_INTERVAL)
        out.append(GatedCollector("ResctrlCollector", lambda stop: resctrl.run(stop, interval=interval), resctrl))
    if gates.enabled("CPICollector"):
        cpi = CPICollector(
            deps.cgroupfs,
            cache,
            registry,
            deps.informer.get_all_pods,
            node=node,
            clock=clock,
            cpus=range(deps.procfs.num_cpus()),
        )
        cpi_interval = _seconds(args, "cpi_collector_interval", 60.0)
        cpi_window = _seconds(args, "collect_cpi_timewindow", 10.0)
        out.append(
            GatedCollector("CPICollector", lambda stop: cpi.run(stop, interval=cpi_interval, window=cpi_window), cpi)
        )
    if gates.enabled("ColdPageCollector"):
        sysfs = Path(getattr(args, "sysfs_root", None) or "/sys")
        cold = ColdPageCollector(
            deps.cgroupfs, deps.procfs, cache, deps.informer.get_all_pods, kidled=Kidled(sysfs), clock=clock
        )
        cold_interval = _seconds(args, "coldpage_collector_interval", 5.0)
        out.append(GatedCollector("ColdPageCollector", lambda stop: cold.run(stop, interval=cold_interval), cold))
    return out


def device_reporter(
    node: str, registry: CollectorRegistry, gates: FeatureGates, args: argparse.Namespace, *, clock: Clock
) -> GPUReporter | None:
    """The Device object reporter: GPUs through NVML with ``Accelerators``, RDMA NICs from sysfs
    (``--sysfs-root``) with ``RDMADevices``, both in one object; None when neither gate is on."""
    gpus, rdma = gates.enabled("Accelerators"), gates.enabled("RDMADevices")
    if not gpus and not rdma:
        return None
    sysfs = Path(getattr(args, "sysfs_root", None) or "/sys")
    return GPUReporter(
        node,
        registry,
        nvml_factory=PyNVML if gpus else None,
        clock=clock,
        extra_devices=RDMASource(PCIDevices(sysfs)) if rdma else None,
    )
