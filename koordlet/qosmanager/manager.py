"""The QoS manager: sets up and runs the enabled plugins, in registry order, each under supervision."""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass, field

from koordlet.qosmanager.featuregates import FeatureGates
from koordlet.qosmanager.framework import ExtensionPlugin, PluginContext
from koordlet.qosmanager.registry import QOSPluginRegistry
from koordlet.system.errorlog import describe

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PluginState:
    name: str
    plugin: ExtensionPlugin
    running: bool = False
    failures: int = 0
    last_error: str = ""


@dataclass(slots=True)
class QOSManager:
    """Instantiate plugins with ``instantiate`` (before flags are parsed, so they can add flags)."""

    registry: QOSPluginRegistry
    plugins: list[PluginState] = field(default_factory=list)

    def instantiate(self) -> None:
        self.plugins = [PluginState(e.name, e.factory()) for e in self.registry]

    def init_flags(self, parser: object) -> None:
        for state in self.plugins:
            state.plugin.init_flags(parser)  # type: ignore[arg-type]

    def enabled(self, gates: FeatureGates) -> list[PluginState]:
        return [s for s in self.plugins if gates.enabled(s.name)]

    def _fail(self, state: PluginState, stage: str) -> None:
        state.failures += 1
        state.running = False
        state.last_error = stage
        err = sys.exc_info()[1]
        log.error(
            "QoS plugin %s failed in %s: %s; the agent keeps running without it",
            state.name,
            stage,
            describe(err) if err is not None else "unknown error",
            exc_info=log.isEnabledFor(logging.DEBUG),
        )

    async def run(self, gates: FeatureGates, ctx: PluginContext, stop: asyncio.Event) -> None:
        """Set up and run each enabled plugin until ``stop``. Never raises for a plugin's failure."""
        self.recover_disabled(gates, ctx)
        started: list[PluginState] = []
        for state in self.enabled(gates):
            try:
                state.plugin.setup(ctx)
            except Exception:
                self._fail(state, "setup")
                continue
            started.append(state)
        async with asyncio.TaskGroup() as group:
            for state in started:
                group.create_task(self._supervise(state, stop), name=f"qos-plugin-{state.name}")

    def recover_disabled(self, gates: FeatureGates, ctx: PluginContext) -> None:
        """Give each plugin whose gate is off, and that has ``recover_disabled(ctx)``, the chance to undo
        what an earlier run left in the cgroups (e.g. a BE quota). Failures are logged, never raised."""
        for state in self.plugins:
            recover = getattr(state.plugin, "recover_disabled", None)
            if gates.enabled(state.name) or recover is None:
                continue
            try:
                recover(ctx)
            except Exception as err:
                log.warning(
                    "QoS plugin %s failed to recover while disabled: %s",
                    state.name,
                    describe(err),
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )

    async def _supervise(self, state: PluginState, stop: asyncio.Event) -> None:
        state.running = True
        try:
            await state.plugin.run(stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            self._fail(state, "run")
            return
        state.running = False
