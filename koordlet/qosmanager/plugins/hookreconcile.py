"""The loop of strategies that stand in for Koordinator's runtime hooks (``BatchResource``,
``GroupIdentity``, ``CoreSched``): Koordinator applies their values when a pod or container is created (NRI)
and re-applies them from a reconciler every ``--runtime-hooks-reconcile-interval`` (10 s). pykoord does the
same for the gates in docs/runtime-hooks.md (``BatchResource`` among them; ``GroupIdentity`` and
``CoreSched`` have only this path): :mod:`koordlet.runtimehooks` answers the runtime's NRI events, and these
strategies are the reconciler: they tick every interval and, in addition, right after the pod list, the
NodeSLO or the node changes (without NRI a new pod gets its values within a tick of being seen, not up to
10 s later). Each computes its values with a pure function of the pod and the NodeSLO, the one the NRI hook
calls too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag
from koordlet.statesinformer import RegisterType, StatesInformer

DEFAULT_RECONCILE_SECONDS = 10.0


class HookReconciler(Strategy):
    """Subclasses set ``NAME`` and implement ``tick``; ``configure_hook`` for their own setup."""

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
            help="reconcile period of BatchResource, GroupIdentity, CoreSched (Go duration or seconds; 10s)",
        )

    def configure(self, ctx: PluginContext) -> None:
        for kind in (RegisterType.ALL_PODS, RegisterType.NODE_SLO_SPEC, RegisterType.NODE_METADATA):
            with contextlib.suppress(ValueError):  # set up twice (tests): the first registration stays
                ctx.states_informer.register_callback(kind, self.NAME, self._on_change)
        self.configure_hook(ctx)

    def configure_hook(self, ctx: PluginContext) -> None:
        """Per-strategy setup; raise to refuse to start."""

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
