"""The QoS extension-plugin contract and the context a plugin receives.

A plugin is any object with ``init_flags(parser)``, ``setup(ctx)`` and ``async run(stop)``:

- ``init_flags`` adds the plugin's own command-line flags (prefix them with the plugin name);
- ``setup`` receives a :class:`PluginContext` once, before ``run``; raise to refuse to start;
- ``run`` loops until ``stop`` is set. It should decide from a snapshot (metric cache, pods, NodeSLO)
  and hand plans to ``ctx.executor``; it must not write cgroup files itself.

A plugin that raises from ``setup`` or ``run`` is logged and counted; the agent keeps going.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from koordlet.metriccache import MetricCache
from koordlet.qosmanager.executor import ResourceExecutor
from koordlet.qosmanager.featuregates import FeatureGates, FeatureSpec
from koordlet.statesinformer import StatesInformer
from koordlet.system.clock import Clock

if TYPE_CHECKING:
    from koordlet.statesinformer.apiloop import ApiLoop


class ExtensionPlugin(Protocol):
    def init_flags(self, parser: argparse.ArgumentParser) -> None: ...
    def setup(self, ctx: PluginContext) -> None: ...
    async def run(self, stop: asyncio.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class PluginContext:
    """Services for plugins. ``kube_api`` is koordlet's connection to the API server (requests go through
    :meth:`~koordlet.statesinformer.apiloop.ApiLoop.call`), ``None`` in standalone mode."""

    node_name: str
    metric_cache: MetricCache
    states_informer: StatesInformer
    executor: ResourceExecutor
    metrics_registry: Any
    """A ``prometheus_client.CollectorRegistry`` served at /metrics."""
    args: argparse.Namespace
    clock: Clock
    kube_api: ApiLoop | None = None
    evictor: Any = None
    """The shared ``koordlet.qosmanager.evictor.PodEvictor`` (one 2-minute eviction memory for all
    strategies); ``None`` when the agent has no API server."""
    object_errors: Any = None
    """A ``prometheus_client.Counter`` with labels ``node, strategy``: per-object failures a strategy
    contained (``koordlet_qos_object_errors``); ``None`` when not exported."""
    gates: FeatureGates | None = None
    """The gates the agent runs with (those that cannot act on this node switched off), for plugins whose
    output depends on another gate (NodeTopologyReport on ``HugePageReport``); ``None`` in tests."""


PluginFactory = Callable[[], ExtensionPlugin]


@dataclass(frozen=True, slots=True)
class PluginEntry:
    """A registered plugin: its name (also its feature gate), factory and gate spec."""

    name: str
    factory: PluginFactory
    feature: FeatureSpec
