"""``BatchResource`` (Beta, on by default): keep BE pods' cgroups at what their batch resources say.

Koordinator applies these values in runtime hooks when a pod or container is created, and re-applies them
from a reconciler every ``--runtime-hooks-reconcile-interval`` (10 s). pykoord has no runtime hook, so this
strategy is the reconciler: it runs every interval and, in addition, right after the pod list, the NodeSLO
or the node changes (a new BE pod gets its limits within a tick of being seen, not up to 10 s later).
Writes go through the executor's leveled update (pod first widened, then exact values child first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from functools import partial

from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
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
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag
from koordlet.statesinformer import PodMeta, RegisterType, StatesInformer

log = logging.getLogger("koordlet.qos")

DEFAULT_RECONCILE_SECONDS = 10.0


class BatchResource(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "runtime_hooks_reconcile_interval"
    DEFAULT_INTERVAL = DEFAULT_RECONCILE_SECONDS

    def __init__(self) -> None:
        super().__init__()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser,
            "--runtime-hooks-reconcile-interval",
            type=positive_seconds,
            default=DEFAULT_RECONCILE_SECONDS,
            help="BatchResource reconcile period (Go duration or seconds; default 10s)",
        )

    def configure(self, ctx: PluginContext) -> None:
        for kind in (RegisterType.ALL_PODS, RegisterType.NODE_SLO_SPEC, RegisterType.NODE_METADATA):
            with contextlib.suppress(ValueError):  # set up twice (tests): the first registration stays
                ctx.states_informer.register_callback(kind, NAME, self._on_change)

    def _on_change(self, _kind: RegisterType, _informer: StatesInformer) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(wake.set)

    async def run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        try:
            while not stop.is_set():
                self._wake.clear()
                self.safe_tick()
                stopper = asyncio.ensure_future(stop.wait())
                waker = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait({stopper, waker}, timeout=self.interval, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopper.cancel()
                    waker.cancel()
        finally:
            self._loop = self._wake = None

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
