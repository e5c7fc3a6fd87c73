"""``OOMScoreAdj`` (Alpha, off by default): every process of a container gets the ``oom_score_adj`` its
pod's annotations ask for (:func:`~.policy.oom_score_adj`).

New containers get it at creation through NRI (the runtime writes it before the first instruction); this
reconciler keeps it on running containers every ``--runtime-hooks-reconcile-interval`` and right after a pod
change (processes forked later, or a value changed on the pod). It writes ``<--proc-root>/<pid>/oom_score_adj``
for the pids in the container's ``cgroup.procs``; lowering a score needs ``CAP_SYS_RESOURCE`` and a writable
``/proc``, which the chart's koordlet does not have: there the creation-time value is what applies, and each
refused write is reported per pod.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.hookreconcile import HookReconciler
from koordlet.qosmanager.plugins.oomscoreadj.policy import NAME, oom_score_adj
from koordlet.qosmanager.plugins.strategy import arg
from koordlet.statesinformer import PodMeta
from koordlet.system import ProcFS


class OOMScoreAdj(HookReconciler):
    NAME = NAME

    def __init__(self) -> None:
        super().__init__()
        self.procfs: ProcFS | None = None
        self.written = 0

    def configure_hook(self, ctx: PluginContext) -> None:
        self.procfs = ProcFS(Path(arg(ctx, "proc_root", Path("/proc"))))

    def tick(self) -> None:
        for pod in self.ctx.states_informer.get_all_pods():
            if pod.phase not in ("Running", "Pending", ""):
                continue
            self.contain(f"pod {pod.namespace}/{pod.name}", partial(self.reconcile_pod, pod))

    def reconcile_pod(self, pod: PodMeta) -> None:
        assert self.procfs is not None
        fs = self.ctx.executor.cgroupfs
        for container in pod.containers:
            rel = pod.container_dir(fs.layout, container)
            want = oom_score_adj(pod.annotations, container.name)
            if rel is None or want is None:
                continue
            for pid in fs.pids(rel) or []:
                current = self.procfs.oom_score_adj(pid)
                if current is None or current == want:
                    continue  # gone, or already right
                if self.dry_run:
                    continue
                self.procfs.set_oom_score_adj(pid, want)
                self.written += 1


ENTRY = PluginEntry(NAME, OOMScoreAdj, KOORDLET_FEATURES[NAME])
