"""``BECPUSuppress``: limit BE pods to what the rest leaves, right after each metrics collection.

Ticks follow the metric cache's "collected" signal (``Strategy.FOLLOW_COLLECT``), at most one per
``--cpu-suppress-interval-seconds`` (1 s), and decide from the newest sample of each series (not a window
average). A load that appears mid-interval is therefore acted on after the collection that first shows
it in full, at most two collect intervals later, instead of also waiting for an unrelated timer's phase.

The NodeSLO ``resourceUsedThresholdWithBE`` is read every tick. ``enable: false`` (or the plugin stopping)
recovers: besteffort quota back to -1 and every BE cpuset back to all CPUs. Switching policy recovers the
other mechanism. The first tick recovers both, so a quota left by a crashed agent does not linger.

Exports ``koordlet_be_suppress_cpu_cores{node,type}``: the CPU BE got (quota/period, or the CPU count).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from apis.core import boundedjson
from apis.extension import ANNOTATION_NODE_RESERVATION, KubeQOSClass
from apis.slo.quantity import milli_value
from koordlet.metriccache import MetricKind
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.cpusuppress.policy import (
    CFS_QUOTA,
    CPUInfo,
    PodCPU,
    SuppressInput,
    be_cfs_quota,
    be_cpuset_size,
    choose_be_cpus_around_bound,
    cpuset_write_plan,
    suppress_be_milli,
)
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag, arg
from koordlet.statesinformer.nodetopology import pod_cpusets
from koordlet.statesinformer.pods import NodeInfo
from koordlet.system.resources import DEFAULT_CFS_PERIOD_US, format_cpuset, parse_cpuset

NAME = "BECPUSuppress"
METRIC = "koordlet_be_suppress_cpu_cores"
log = logging.getLogger("koordlet.qos")


def read_cpu_topology(sysfs_root: Path) -> list[CPUInfo]:
    """CPU, core, socket and NUMA ids from ``<sysfs>/devices/system/cpu``; ``[]`` when unreadable.

    (The only read outside ``koordlet.system`` in the strategies: sysfs topology has no owner there yet.)
    """
    base = sysfs_root / "devices" / "system" / "cpu"
    out: list[CPUInfo] = []
    try:
        entries = sorted(p for p in base.iterdir() if p.name[3:].isdigit() and p.name.startswith("cpu"))
    except OSError:
        return []
    for entry in entries:
        try:
            core = int((entry / "topology" / "core_id").read_text())
            socket = int((entry / "topology" / "physical_package_id").read_text())
        except (OSError, ValueError):
            continue
        numa = next((int(p.name[4:]) for p in entry.glob("node[0-9]*")), 0)
        out.append(CPUInfo(int(entry.name[3:]), core, socket, numa))
    return out


def reservation(node: NodeInfo) -> tuple[float, frozenset[int]]:
    """(reserved millicores, reserved CPUs) from ``node.koordinator.sh/reservation``."""
    raw = node.annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return 0.0, frozenset()
    try:
        data = boundedjson.loads(raw)
        cpus = parse_cpuset(data.get("reservedCPUs", "") or "")
        milli = float(milli_value((data.get("resources") or {}).get("cpu", 0)))
    except (ValueError, TypeError, AttributeError):
        return 0.0, frozenset()
    return max(milli, len(cpus) * 1000.0), cpus


class CPUSuppress(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "cpu_suppress_interval_seconds"
    FOLLOW_COLLECT = True

    def __init__(self) -> None:
        super().__init__()
        self.gauge: object = None
        self.topology: list[CPUInfo] = []
        self._quota_changed = True
        self._cpuset_changed = True
        self.last_suppress_milli: float | None = None

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser, "--cpu-suppress-interval-seconds", type=positive_seconds, default=1.0, help="CPU suppress tick"
        )
        add_flag(
            parser,
            "--sysfs-root",
            "--sys-root-dir",
            dest="sysfs_root",
            type=Path,
            default=Path("/sys"),
            help="sysfs (CPU topology); Koordinator: --sys-root-dir",
        )

    def configure(self, ctx: PluginContext) -> None:
        from prometheus_client import Gauge

        self.topology = read_cpu_topology(Path(arg(ctx, "sysfs_root", Path("/sys"))))
        self.gauge = Gauge(
            METRIC, "CPU cores BE pods are suppressed to", ["node", "type"], registry=ctx.metrics_registry
        )

    @property
    def be_dir(self) -> str:
        return self.ctx.executor.cgroupfs.layout.qos_dir(KubeQOSClass.BEST_EFFORT)

    def all_cpus(self, node: NodeInfo | None) -> list[CPUInfo]:
        """The node's CPUs: sysfs topology, else one core per CPU of capacity; ``[]`` when unknown yet."""
        if self.topology:
            return self.topology
        count = int((node.capacity.get("cpu", 0) if node else 0) // 1000)
        return [CPUInfo(i, i) for i in range(count)]

    def cpuset_levels(self) -> list[list[str]]:
        """besteffort, BE pod dirs, BE container dirs (parent first)."""
        layout = self.ctx.executor.cgroupfs.layout
        pods = [
            p for p in self.ctx.states_informer.get_all_pods() if p.is_be and p.kube_qos is KubeQOSClass.BEST_EFFORT
        ]
        containers = [d for p in pods for c in p.containers if (d := p.container_dir(layout, c)) is not None]
        return [[self.be_dir], [p.cgroup_dir for p in pods], containers]

    # -- recovery ----------------------------------------------------------------------------

    def recover_quota(self) -> None:
        if self._quota_changed:
            self.apply([ResourceUpdate("cpu.cfs_quota_us", self.be_dir, "-1", NAME)])
            self._quota_changed = False

    def bound_cpus(self) -> tuple[frozenset[int], frozenset[int]]:
        """(LSE CPUs, LSR CPUs) from the pods' resource-status cpusets."""
        bound = pod_cpusets(self.ctx.states_informer.get_all_pods())
        lse = frozenset().union(*(b.cpus for b in bound if b.raw_qos == "LSE"))
        lsr = frozenset().union(*(b.cpus for b in bound if b.raw_qos == "LSR"))
        return lse, lsr

    def recover_cpuset(self) -> None:
        if not self._cpuset_changed:
            return
        node = self.ctx.states_informer.node
        # Recovery still keeps BE off LSE CPUs (Koordinator's calcBECPUSet).
        excluded = (reservation(node)[1] if node else frozenset()) | self.bound_cpus()[0]
        full = frozenset(c.cpu for c in self.all_cpus(node)) - excluded
        if not full:
            return  # CPUs not known yet (no topology, no node): try again next time
        current = self.ctx.executor.cgroupfs.cpuset(self.be_dir) or frozenset()
        self.apply(cpuset_write_plan(self.cpuset_levels(), current, full, NAME))
        self._cpuset_changed = False

    def recover(self) -> None:
        self.recover_quota()
        self.recover_cpuset()

    def recover_disabled(self, ctx: PluginContext) -> None:
        """Called by the QoS manager when the ``BECPUSuppress`` gate is off: undo what an earlier run (or a
        crashed agent) left, so turning the gate off really frees BE pods."""
        self._ctx = ctx
        self.dry_run = bool(arg(ctx, "qos_dry_run", False))
        self.topology = read_cpu_topology(Path(arg(ctx, "sysfs_root", Path("/sys"))))
        self.safe_recover("gate disabled")

    # -- tick ----------------------------------------------------------------------------------

    def snapshot(self, node: NodeInfo) -> SuppressInput | None:
        slo = self.ctx.states_informer.node_slo.resource_used_threshold_with_be
        cache, max_age = self.ctx.metric_cache, 2 * self.collect_interval
        node_used = cache.last(MetricKind.NODE_CPU_USAGE, "", max_age)
        if node_used is None or slo is None:
            return None
        pods = []
        for pod in self.ctx.states_informer.get_all_pods():
            cores = cache.last(MetricKind.POD_CPU_USAGE, pod.uid, max_age)
            pods.append(PodCPU(pod.is_be, None if cores is None else cores * 1000))
        capacity = float(node.capacity.get("cpu", 0))
        return SuppressInput(
            capacity_milli=capacity,
            allocatable_milli=float(node.allocatable.get("cpu", capacity)),
            node_used_milli=node_used * 1000,
            pods=tuple(pods),
            threshold_percent=slo.cpu_suppress_threshold_percent or 65,
            min_percent=slo.cpu_suppress_min_percent,
            reservation_milli=reservation(node)[0],
        )

    def tick(self) -> None:
        slo = self.ctx.states_informer.node_slo.resource_used_threshold_with_be
        if slo is None or not slo.enable:
            self.recover()
            return
        node = self.ctx.states_informer.node
        snap = None if node is None else self.snapshot(node)
        if node is None or snap is None:
            return
        suppress = suppress_be_milli(snap)
        self.last_suppress_milli = suppress
        if (slo.cpu_suppress_policy or "cpuset") == CFS_QUOTA:
            self.recover_cpuset()
            self.adjust_quota(suppress, snap.capacity_milli)
        else:
            self.recover_quota()
            self.adjust_cpuset(suppress, node)

    def adjust_quota(self, suppress_milli: float, capacity_milli: float) -> None:
        current = self.ctx.executor.cgroupfs.cfs_quota(self.be_dir)
        if current is None:
            return
        quota, period = current
        period = period or DEFAULT_CFS_PERIOD_US
        target = be_cfs_quota(suppress_milli, quota, capacity_milli, period)
        if target is not None:
            self.apply([ResourceUpdate("cpu.cfs_quota_us", self.be_dir, str(target), NAME)])
            self._quota_changed = True
            quota = target
        self.gauge.labels(node=self.ctx.node_name, type="cfsQuota").set(  # type: ignore[attr-defined]
            quota / period if quota > 0 else capacity_milli / 1000
        )

    def adjust_cpuset(self, suppress_milli: float, node: NodeInfo) -> None:
        cpus = self.all_cpus(node)
        excluded = reservation(node)[1]
        current = self.ctx.executor.cgroupfs.cpuset(self.be_dir)
        if current is None:
            return
        lse, lsr = self.bound_cpus()
        size = be_cpuset_size(suppress_milli, len(current), len(cpus) - len(excluded & {c.cpu for c in cpus}))
        target = choose_be_cpus_around_bound(size, cpus, excluded=excluded, lse=lse, lsr=lsr)
        if target != current:
            log.info("%s: BE cpuset %s -> %s", NAME, format_cpuset(current), format_cpuset(target))
            self.apply(cpuset_write_plan(self.cpuset_levels(), current, target, NAME))
            self._cpuset_changed = True
        self.gauge.labels(node=self.ctx.node_name, type="cpuset").set(len(target))  # type: ignore[attr-defined]


ENTRY = PluginEntry(NAME, CPUSuppress, KOORDLET_FEATURES[NAME])
