"""``GroupIdentity`` (Beta, on by default): ``cpu.bvt_warp_ns`` per QoS class, on kernels that have it.

Koordinator's runtime hook ``hooks/groupidentity`` (``ruleUpdateCb`` and its pod/kube-QoS reconcilers),
delivered by a :class:`HookReconciler` with the same decisions (:mod:`.policy`). Each tick:

1. with the rule on and the ``kernel.sched_group_identity_enabled`` sysctl present: turn core scheduling off
   (``kernel.sched_core=0``, if present: the two exclude each other) and the sysctl on; with the rule off and
   the sysctl 0, stop here (nothing is set);
2. the kube-QoS cgroups (kubepods 0, burstable = LS, besteffort = BE);
3. each pod and its child cgroups (containers, sandbox) with the pod's value;
4. pod cgroups of pods no longer listed (dangling) with their kube-QoS directory's value.

Writes go through the executor (cached, only when the file differs). The agent starts this strategy only
where ``cpu.bvt_warp_ns`` or the sysctl exists (an Anolis/Alibaba kernel); elsewhere the gate is reported
not applicable. Host applications are not handled (pykoord has no host-application reconciler).
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from apis.extension import KubeQOSClass
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.groupidentity.policy import BVT, NAME, BvtRule, bvt_rule, bvt_updates, pod_bvt
from koordlet.qosmanager.plugins.hookreconcile import HookReconciler
from koordlet.qosmanager.plugins.strategy import arg
from koordlet.statesinformer import PodMeta
from koordlet.system.layout import pod_uid_from_dir
from koordlet.system.sysctl import SYSCTL_SCHED_CORE, SYSCTL_SCHED_GROUP_IDENTITY, KernelFiles

log = logging.getLogger("koordlet.qos")


class GroupIdentity(HookReconciler):
    NAME = NAME

    def __init__(self) -> None:
        super().__init__()
        self.kernel = KernelFiles()

    def configure_hook(self, ctx: PluginContext) -> None:
        self.kernel = KernelFiles(
            Path(arg(ctx, "proc_root", Path("/proc"))), Path(arg(ctx, "sysfs_root", Path("/sys")))
        )

    def _sysctl(self, name: str, value: str) -> None:
        path = self.kernel.sysctl_path(name)
        if self.dry_run:
            if self.kernel.read(path) != value:
                log.warning("%s dry-run: would set %s = %s", self.NAME, path, value)
            return
        if self.kernel.write_if_different(path, value):
            log.info("%s: %s <- %s", self.NAME, path, value)

    def sysctl_allows(self, rule: BvtRule) -> bool:
        """Step 1; False when cgroups need no update (rule off and the kernel switch off)."""
        switch = self.kernel.sysctl_path(SYSCTL_SCHED_GROUP_IDENTITY)
        if not self.kernel.exists(switch):
            return True  # older Anolis kernels: bvt is on whenever cpu.bvt_warp_ns exists
        if rule.enable:
            if self.kernel.exists(self.kernel.sysctl_path(SYSCTL_SCHED_CORE)):
                self._sysctl(SYSCTL_SCHED_CORE, "0")
            self._sysctl(SYSCTL_SCHED_GROUP_IDENTITY, "1")
            return True
        return self.kernel.read_int(switch) != 0

    def tick(self) -> None:
        informer = self.ctx.states_informer
        rule = bvt_rule(informer.node_slo)
        if not self.sysctl_allows(rule):
            return
        fs = self.ctx.executor.cgroupfs
        layout = fs.layout
        self.apply([ResourceUpdate(BVT, layout.qos_dir(q), str(rule.kube_dir[q]), NAME) for q in KubeQOSClass])
        listed: set[str] = set()
        for pod in informer.get_all_pods():
            listed.add(pod.uid)
            self.contain(f"pod {pod.namespace}/{pod.name}", partial(self.reconcile_pod, pod, rule))
        for qos in KubeQOSClass:
            parent = layout.qos_dir(qos)
            for child in fs.list_children(parent, "cpu"):
                uid = pod_uid_from_dir(child)
                if uid is None or uid in listed:
                    continue
                rel = f"{parent}/{child}"
                self.apply(bvt_updates(rel, rule.kube_dir[qos], fs.list_children(rel, "cpu")))

    def reconcile_pod(self, pod: PodMeta, rule: BvtRule) -> None:
        value = pod_bvt(rule, pod.labels, pod.annotations, pod.kube_qos)
        fs = self.ctx.executor.cgroupfs
        self.apply(bvt_updates(pod.cgroup_dir, value, fs.list_children(pod.cgroup_dir, "cpu")))


ENTRY = PluginEntry(NAME, GroupIdentity, KOORDLET_FEATURES[NAME])
