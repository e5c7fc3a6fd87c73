"""``BEPodCPUShares``: every interval, set the cpu.shares of every BE pod's cgroup to a fixed low value.

The plugin contract (``koordlet.ExtensionPlugin``): ``init_flags`` adds flags, ``setup`` receives the
context once, ``run`` loops until ``stop``. Decide from a snapshot (``policy.py``), let the executor write.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from koordlet.qosmanager import FeatureSpec, Maturity, PluginContext, PluginEntry
from koordlet_example_qos_plugin.policy import be_cpu_shares_plan

NAME = "BEPodCPUShares"


class BEPodCPUShares:
    def __init__(self) -> None:
        self.ctx: PluginContext | None = None
        self.shares = 2
        self.interval = 1.0

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--be-pod-cpu-shares", type=int, default=2, help="cpu.shares for BE pods (BEPodCPUShares plugin)"
        )
        parser.add_argument(
            "--be-pod-cpu-shares-interval",
            type=float,
            default=1.0,
            help="seconds between BEPodCPUShares reconciliations",
        )

    def setup(self, ctx: PluginContext) -> None:
        self.ctx = ctx
        self.shares = int(ctx.args.be_pod_cpu_shares)
        self.interval = float(ctx.args.be_pod_cpu_shares_interval)
        if not 2 <= self.shares <= 262144:
            raise ValueError("--be-pod-cpu-shares must be in 2..262144")

    def tick(self) -> None:
        assert self.ctx is not None
        plan = be_cpu_shares_plan(self.ctx.states_informer.get_all_pods(), shares=self.shares, owner=NAME)
        self.ctx.executor.apply(plan)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)


# The feature gate has the plugin's name; Alpha plugins are off until --feature-gates or the config says so.
ENTRY = PluginEntry(NAME, BEPodCPUShares, FeatureSpec(False, Maturity.ALPHA))
