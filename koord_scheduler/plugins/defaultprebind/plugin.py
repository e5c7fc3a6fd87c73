"""The DefaultPreBind plugin (Koordinator ``pkg/scheduler/plugins/defaultprebind``).

Its own PreBind does nothing; it is the profile's
:class:`~koord_scheduler.framework.interfaces.PodPatchApplier`: the runtime gives the PreBind plugins a
:class:`~koord_scheduler.framework.pod_patch.PodPatch` to record label and annotation changes in, and
after all of them succeeded this plugin sends the merged changes as one request (none when nothing
changed). The in-tree contributors (through :func:`~koord_scheduler.framework.pod_patch.patch_at_pre_bind`):
Reservation's ``reservation-allocated``, NodeNUMAResource's ``resource-status`` / ``resource-spec`` and
DeviceShare's ``device-allocated`` annotations. Koordinator appends it at preBind to every profile that
configures plugins, unless the profile disables it (``apis.config.profile.append_default_pre_bind``).

A failed request fails the binding, as a failed PreBind does.
"""

from __future__ import annotations

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import PreBindPlugin
from koord_scheduler.framework.koordinator_stages import PodPatchApplier
from koord_scheduler.framework.pod_patch import PodPatch
from koord_scheduler.framework.status import Status, error, success
from koord_scheduler.plugins import names

NAME = names.DEFAULT_PRE_BIND
ARGS = None


class DefaultPreBind:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return success()

    async def apply_pod_patch(self, state: CycleState, pod: Pod, patch: PodPatch) -> Status:
        if not patch:
            return success()
        try:
            await self.handle.cluster.patch_pod_metadata(
                pod, annotations=dict(patch.annotations) or None, labels=dict(patch.labels) or None
            )
        except ClusterError as exc:
            return error(f"patching pod {pod.key}: {exc}")
        return success()


def new(args: None, handle: Handle) -> DefaultPreBind:
    return DefaultPreBind(handle)


def declared_capabilities(plugin: DefaultPreBind) -> tuple[PreBindPlugin, PodPatchApplier]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin
