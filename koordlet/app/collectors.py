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
from koordlet.metricsadvisor.resctrl import DEFAULT_INTERVAL_SECONDS as RESCTRL_INTERVAL
from koordlet.metricsadvisor.resctrl import ResctrlCollector
from koordlet.qosmanager import FeatureGates
from koordlet.system.clock import Clock
from koordlet.system.resctrl import ResctrlFS


@dataclass(frozen=True, slots=True)
class GatedCollector:
    name: str
    run: Callable[[asyncio.Event], Coroutine[Any, Any, None]]
    collector: object


def gated_collectors(
    gates: FeatureGates,
    args: argparse.Namespace,
    *,
    cache: MetricCache,
    registry: CollectorRegistry,
    node: str,
    clock: Clock,
) -> list[GatedCollector]:
    out: list[GatedCollector] = []
    if gates.enabled("ResctrlCollector"):
        root = Path(getattr(args, "sys_fs_root_dir", None) or "/sys/fs") / "resctrl"
        resctrl = ResctrlCollector(ResctrlFS(root), cache, registry, node=node, clock=clock)
        interval = float(getattr(args, "resctrl_collector_interval", None) or RESCTRL_INTERVAL)
        out.append(GatedCollector("ResctrlCollector", lambda stop: resctrl.run(stop, interval=interval), resctrl))
    return out
