"""DefaultPreBind: PreBind plugins' label/annotation changes go out as one patch per pod, and the plugin
is appended at preBind to every profile that configures plugins (Koordinator's AppendDefaultPlugins)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from apis.config import parse_scheduler_config
from apis.config.profile import append_default_pre_bind
from apis.config.types import Plugin, Plugins, PluginSet
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.pod_patch import pending_pod_patch
from koord_scheduler.framework.registry import PluginSpec
from koord_scheduler.framework.status import Status, success
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod

REGISTERED = {"DefaultPreBind", "Reservation"}


def pre_bind(*enabled: str, disabled: tuple[str, ...] = ()) -> Plugins:
    return Plugins(
        pre_bind=PluginSet(
            enabled=tuple(Plugin(name=n) for n in enabled), disabled=tuple(Plugin(name=n) for n in disabled)
        )
    )


@pytest.mark.parametrize(
    ("plugins", "registered", "want"),
    [
        pytest.param(None, REGISTERED, None, id="no-plugins-section-untouched"),
        pytest.param(pre_bind("Reservation"), REGISTERED, ["Reservation", "DefaultPreBind"], id="appended-last"),
        pytest.param(pre_bind(), REGISTERED, ["DefaultPreBind"], id="appended-to-empty"),
        pytest.param(
            pre_bind("DefaultPreBind", "Reservation"),
            REGISTERED,
            ["DefaultPreBind", "Reservation"],
            id="already-enabled-keeps-its-place",
        ),
        pytest.param(pre_bind("Reservation", disabled=("*",)), REGISTERED, ["Reservation"], id="all-disabled"),
        pytest.param(
            pre_bind("Reservation", disabled=("DefaultPreBind",)), REGISTERED, ["Reservation"], id="disabled-by-name"
        ),
        pytest.param(pre_bind("Reservation"), {"Reservation"}, ["Reservation"], id="not-registered"),
    ],
)
def test_append_default_pre_bind(plugins: Plugins | None, registered: set[str], want: list[str] | None) -> None:
    got = append_default_pre_bind(plugins, registered)
    assert (None if got is None else [p.name for p in got.pre_bind.enabled]) == want


class CountingCluster(MemoryCluster):
    patches: list[tuple[str, Mapping[str, str | None] | None, Mapping[str, str | None] | None]]

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        self.patches.append((pod.key, annotations, labels))
        await super().patch_pod_metadata(pod, annotations=annotations, labels=labels)


class Contributor:
    """A PreBind plugin that records into the merged patch when there is one, else patches itself."""

    def __init__(self, name: str, key: str, handle: Handle) -> None:
        self.name = name
        self.key = key
        self.handle = handle

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        patch = pending_pod_patch(state)
        if patch is None:
            await self.handle.cluster.patch_pod_metadata(pod, annotations={self.key: node_name})
        else:
            patch.annotations[self.key] = node_name
            patch.labels["touched-by"] = self.name
        return success()


def profile(disabled: str = "") -> str:
    extra = f"\n      disabled: [{{name: {disabled}}}]" if disabled else ""
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    preBind:
      enabled: [{{name: A}}, {{name: B}}]{extra}
"""


async def run(config: str) -> CountingCluster:
    registry = in_tree_registry()
    registry.add(PluginSpec("A", lambda args, handle: Contributor("A", "example.com/a", handle)))
    registry.add(PluginSpec("B", lambda args, handle: Contributor("B", "example.com/b", handle)))
    cluster = CountingCluster.from_objects(
        [make_node("n1").capacity(cpu="4", memory="8Gi", pods=110).build()], [make_pod("p").req(cpu="1").build()]
    )
    assert isinstance(cluster, CountingCluster)
    cluster.patches = []
    scheduler = build_scheduler(parse_scheduler_config(config, source="test"), registry, cluster, clock=lambda: 1.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return cluster


async def test_pre_bind_changes_go_out_as_one_patch() -> None:
    cluster = await run(profile())
    assert cluster.pods["default/p"].node_name == "n1"
    assert cluster.patches == [
        ("default/p", {"example.com/a": "n1", "example.com/b": "n1"}, {"touched-by": "B"}),
    ]
    assert cluster.pods["default/p"].annotations["example.com/b"] == "n1"


async def test_without_default_pre_bind_plugins_patch_on_their_own() -> None:
    cluster = await run(profile(disabled="DefaultPreBind"))
    assert cluster.pods["default/p"].node_name == "n1"
    assert [(key, dict(a or {})) for key, a, _ in cluster.patches] == [
        ("default/p", {"example.com/a": "n1"}),
        ("default/p", {"example.com/b": "n1"}),
    ]
