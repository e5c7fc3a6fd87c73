"""``BatchResource`` (Beta, on by default): keep BE pods' cgroups at what their batch resources say.

Koordinator applies these values in runtime hooks; here a :class:`HookReconciler` applies them (every
``--runtime-hooks-reconcile-interval`` and right after a pod, NodeSLO or node change). Writes go through the
executor's leveled update (pod first widened, then exact values child first).
"""

from __future__ import annotations

import logging
from functools import partial

from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.framework import PluginEntry
from koordlet.qosmanager.plugins.batchresource.policy import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    NAME,
    BatchRule,
    BatchSpec,
    ExtendedResourceSpecError,
    batch_plan,
    batch_rule,
    batch_spec,
    parse_extended_resource_spec,
    resolve_specs,
)
from koordlet.qosmanager.plugins.hookreconcile import HookReconciler
from koordlet.statesinformer import PodMeta

log = logging.getLogger("koordlet.qos")


class BatchResource(HookReconciler):
    NAME = NAME

    def tick(self) -> None:
        informer = self.ctx.states_informer
        node = informer.node
        rule = batch_rule(informer.node_slo, node.annotations if node else {})
        for pod in informer.get_all_pods():
            if pod.phase not in ("Running", "Pending", "") or not pod.labelled_be:
                continue
            self.contain(f"pod {pod.namespace}/{pod.name}", partial(self.reconcile_pod, pod, rule))

    def reconcile_pod(self, pod: PodMeta, rule: BatchRule) -> None:
        """One BE pod. A malformed extended-resource-spec annotation is an error only when the pod has no
        batch resources of its own to go by (then it is contained to this pod)."""
        layout = self.ctx.executor.cgroupfs.layout
        own = [(c.name, pod.container_dir(layout, c), batch_spec(c.requests, c.limits)) for c in pod.containers]
        annotation: dict[str, BatchSpec] | None = None
        raw = pod.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
        if raw is not None:
            try:
                annotation = parse_extended_resource_spec(raw)
            except ExtendedResourceSpecError as err:
                if all(spec is None for _, _, spec in own):
                    raise ExtendedResourceSpecError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: {err}") from err
        containers, pod_specs = resolve_specs(own, annotation)
        self.apply([], leveled=batch_plan(pod.cgroup_dir, containers, pod_specs, rule))


ENTRY = PluginEntry(NAME, BatchResource, KOORDLET_FEATURES[NAME])
