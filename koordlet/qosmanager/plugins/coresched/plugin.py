"""``CoreSched`` (Alpha): core-scheduling cookies per group and ``cpu.idle`` per QoS class.

Koordinator's runtime hook ``hooks/coresched`` (``ruleUpdateCb`` → ``refreshForAllPods``), delivered by a
:class:`HookReconciler` with the same decisions (:mod:`.policy`) and cookie steps (:mod:`.cookies`). Each
tick:

1. ``cpu.idle`` of the kube-QoS cgroups (1 where the class has ``schedIdle: 1`` under ``cpuPolicy:
   coreSched``, else 0), through the executor;
2. where the kernel has core scheduling: with the rule on, the ``kernel.sched_group_identity_enabled``
   sysctl is turned off if present (the two exclude each other); on the first tick the cookies processes
   already hold are read back; then every container cgroup of every non-SYSTEM pod (its containers and its
   sandbox) joins its group's cookie when enabled, or has its cookie cleared when it was in a group before.

Koordinator sets ``cpu.idle`` also on kernels without core scheduling, and so does this strategy (the agent
reports the gate not applicable only when neither exists). The processes are the cgroup's ``cgroup.procs``.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from prometheus_client import Gauge

from apis.extension import KubeQOSClass, QoSClass
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.coresched.cookies import CookieBook
from koordlet.qosmanager.plugins.coresched.policy import (
    NAME,
    CoreSchedRule,
    core_sched_rule,
    cpu_idle_updates,
    pod_core_sched,
)
from koordlet.qosmanager.plugins.hookreconcile import HookReconciler
from koordlet.qosmanager.plugins.strategy import arg
from koordlet.statesinformer import PodMeta
from koordlet.system.coresched import CoreSchedOps, PrctlCoreSched, core_sched_missing
from koordlet.system.sysctl import SYSCTL_SCHED_GROUP_IDENTITY, KernelFiles

log = logging.getLogger("koordlet.qos")


class CoreSched(HookReconciler):
    NAME = NAME

    def __init__(self, ops: CoreSchedOps | None = None) -> None:
        super().__init__()
        self._ops = ops
        self.book: CookieBook | None = None
        self.kernel = KernelFiles()
        self.cookie_gauge: Gauge | None = None

    def configure_hook(self, ctx: PluginContext) -> None:
        self.kernel = KernelFiles(
            Path(arg(ctx, "proc_root", Path("/proc"))), Path(arg(ctx, "sysfs_root", Path("/sys")))
        )
        ops = self._ops
        if ops is None:
            missing = core_sched_missing()
            if missing is None:
                ops = PrctlCoreSched()
            else:
                log.warning("CoreSched: no core scheduling on this node (%s): only cpu.idle is set", missing)
        self.book = CookieBook(ops) if ops is not None else None
        if ctx.metrics_registry is not None and self.book is not None:
            self.cookie_gauge = Gauge(
                "koordlet_container_core_sched_cookie",
                "Core-scheduling cookie of a container's processes (CoreSched gate)",
                ["node", "pod_uid", "container", "core_sched_group"],
                registry=ctx.metrics_registry,
            )

    def tick(self) -> None:
        informer = self.ctx.states_informer
        rule = core_sched_rule(informer.node_slo)
        layout = self.ctx.executor.cgroupfs.layout
        self.apply(cpu_idle_updates(rule, {q: layout.qos_dir(q) for q in KubeQOSClass}))
        book = self.book
        if book is None:
            return
        if rule.enable and not self.dry_run:
            switch = self.kernel.sysctl_path(SYSCTL_SCHED_GROUP_IDENTITY)
            if self.kernel.exists(switch) and self.kernel.write_if_different(switch, "0"):
                log.info("CoreSched: %s <- 0 (group identity off for core scheduling)", switch)
        pods = [
            p for p in informer.get_all_pods() if p.phase in ("Running", "Pending", "") and p.qos is not QoSClass.SYSTEM
        ]
        if not book.loaded:
            book.load(self._containers(rule, pods))
        live: set[str] = set()
        for pod in pods:
            for key, _group, _pids in self._containers(rule, [pod]):
                live.add(key)
            self.contain(f"pod {pod.namespace}/{pod.name}", partial(self.reconcile_pod, pod, rule, book))
        book.forget(live)

    def _containers(self, rule: CoreSchedRule, pods: list[PodMeta]) -> list[tuple[str, str, list[int]]]:
        """(key, group, pids) of each container cgroup (containers and sandbox) of ``pods``."""
        fs = self.ctx.executor.cgroupfs
        out = []
        for pod in pods:
            _enabled, group = pod_core_sched(rule, pod.labels, pod.kube_qos, pod.uid)
            for child in sorted(fs.list_children(pod.cgroup_dir, "cpu")):
                out.append((f"{pod.uid}/{child}", group, fs.pids(f"{pod.cgroup_dir}/{child}") or []))
        return out

    def reconcile_pod(self, pod: PodMeta, rule: CoreSchedRule, book: CookieBook) -> None:
        enabled, group = pod_core_sched(rule, pod.labels, pod.kube_qos, pod.uid)
        for key, _group, pids in self._containers(rule, [pod]):
            if self.dry_run:
                log.warning("%s dry-run: would %s cookies of %s", self.NAME, "set" if enabled else "clear", key)
                continue
            if enabled:
                cookie = book.enable(key, group, pids)
                if cookie is not None and self.cookie_gauge is not None:
                    container = key.split("/", 1)[1]
                    labels = {"node": self.ctx.node_name, "pod_uid": pod.uid, "container": container}
                    self.cookie_gauge.labels(**labels, core_sched_group=group).set(cookie)
            else:
                book.disable(key, pids)


ENTRY = PluginEntry(NAME, CoreSched, KOORDLET_FEATURES[NAME])
