"""Starting the NRI plugin from koordlet's flags, beside the reconcilers, and saying once which path applies
the runtime-hook values."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from koordlet.qosmanager.executor import ResourceExecutor
from koordlet.qosmanager.featuregates import FeatureGates
from koordlet.runtimehooks.failure_policy import POLICY_IGNORE
from koordlet.runtimehooks.hooks import DEFAULT_HAMI_CORE_LIBRARY
from koordlet.runtimehooks.nri.handlers import HookHandlers
from koordlet.runtimehooks.nri.plugin import HookMetrics, NRIOptions, NRIPlugin
from koordlet.runtimehooks.rules import HookRuleSource
from koordlet.statesinformer import StatesInformer
from koordlet.system import CgroupVersion

log = logging.getLogger("koordlet.nri")

GIL_SWITCH_INTERVAL_S = 0.0005
"""koordlet's GIL switch interval while the NRI plugin runs (Python's default is 5 ms)."""


def nri_socket_path(args: argparse.Namespace) -> Path:
    """``--runtime-hooks-nri-socket-path``, under ``--var-run-root-dir`` when relative (as Koordinator)."""
    raw = Path(getattr(args, "runtime_hooks_nri_socket_path", None) or "nri/nri.sock")
    root = Path(getattr(args, "var_run_root_dir", None) or "/var/run")
    return raw if raw.is_absolute() else root / raw


def nri_options(args: argparse.Namespace) -> NRIOptions | None:
    """The plugin's options, or ``None`` with ``--enable-nri-runtime-hook=false``."""
    if not getattr(args, "enable_nri_runtime_hook", True):
        return None
    return NRIOptions(
        socket_path=nri_socket_path(args),
        plugin_name=getattr(args, "runtime_hooks_nri_plugin_name", None) or "koordlet_nri",
        plugin_idx=getattr(args, "runtime_hooks_nri_plugin_index", None) or "00",
        connect_timeout=float(getattr(args, "runtime_hooks_nri_connect_timeout", None) or 6.0),
        failure_policy=getattr(args, "runtime_hooks_plugin_failure_policy", None) or POLICY_IGNORE,
    )


def build_plugin(
    options: NRIOptions,
    *,
    informer: StatesInformer,
    gates: FeatureGates,
    strategies: list[object],
    executor: ResourceExecutor,
    registry: object = None,
    node: str = "",
    hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY,
) -> NRIPlugin:
    """The plugin with the hook decisions wired to the running strategies. ``executor`` is the plugin's
    own (pod-level writes at sandbox creation happen on its thread, not the reconcilers')."""
    cgroup_v2 = executor.cgroupfs.version == CgroupVersion.V2
    rules = HookRuleSource.of(informer, gates, strategies, cgroup_v2=cgroup_v2, hami_core_library=hami_core_library)
    handlers = HookHandlers(informer, rules, executor)
    metrics = HookMetrics(registry, node) if registry is not None else None
    return NRIPlugin(options, handlers, metrics=metrics)


def announce(options: NRIOptions | None, reconcile_interval: float) -> None:
    """The one start-up line about how runtime-hook values reach new containers."""
    if options is None:
        log.info(
            "runtime hooks: NRI off (--enable-nri-runtime-hook=false); new containers get their values at the "
            "next reconcile (every %gs)",
            reconcile_interval,
        )
    elif not options.socket_path.exists():
        log.info(
            "runtime hooks: no NRI socket at %s; new containers get their values at the next reconcile (every "
            "%gs), koordlet connects if the socket appears",
            options.socket_path,
            reconcile_interval,
        )
    else:
        log.info("runtime hooks: NRI at %s, values applied at container creation", options.socket_path)


def answer_promptly(interval: float = GIL_SWITCH_INTERVAL_S) -> float:
    """Lower the process's GIL switch interval to ``interval`` (never raise it); returns the one before.

    The thread that reads an NRI request wakes with the GIL held by another koordlet thread (metric
    collection, a reconciler tick); CPython makes the holder let go only after the switch interval, 5 ms by
    default, and may then hand it to another busy thread, so one answer waits for several intervals (tens
    of ms with two busy threads, bench/nri_answer.py). At 0.5 ms the wait is a tenth; the busy threads pay
    some more GIL hand-overs, nothing else changes.
    """
    before = sys.getswitchinterval()
    if interval < before:
        sys.setswitchinterval(interval)
    return before


async def run_plugin(plugin: NRIPlugin, stop: asyncio.Event) -> None:
    """Run the plugin's blocking loop in its own thread until ``stop`` (with :func:`answer_promptly`)."""
    answer_promptly()
    worker = asyncio.ensure_future(asyncio.to_thread(plugin.run))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({worker, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        plugin.stop()
        stopper.cancel()
        await worker
