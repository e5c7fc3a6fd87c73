"""One merged metadata patch per pod at PreBind (Koordinator's PreBindExtensions / DefaultPreBind).

When the profile has a :class:`~koord_scheduler.framework.interfaces.PodPatchApplier` at preBind, the
runtime puts an empty :class:`PodPatch` in the cycle state before the PreBind plugins run. A plugin
that would patch the pod's labels or annotations records the change there instead (``state.get
(POD_PATCH)`` is not None); after every PreBind plugin succeeded, the applier sends all of them as one
request. Without an applier, ``POD_PATCH`` is absent and plugins patch on their own:
:func:`patch_at_pre_bind` does either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey


@dataclass(slots=True)
class PodPatch:
    """Label and annotation changes; None deletes a key. Later writes of a key win."""

    annotations: dict[str, str | None] = field(default_factory=dict)
    labels: dict[str, str | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.annotations or self.labels)


POD_PATCH: StateKey[PodPatch] = StateKey("PreBind/pod-patch")


def pending_pod_patch(state: CycleState) -> PodPatch | None:
    """The cycle's patch to record into, or None when the plugin must patch on its own."""
    return state.get(POD_PATCH)


class PodMetadataPatcher(Protocol):
    """The one cluster write :func:`patch_at_pre_bind` needs (``ClusterClient.patch_pod_metadata``)."""

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None: ...


async def patch_at_pre_bind(
    state: CycleState,
    cluster: PodMetadataPatcher,
    pod: Pod,
    *,
    annotations: Mapping[str, str | None] | None = None,
    labels: Mapping[str, str | None] | None = None,
) -> None:
    """A PreBind plugin's label/annotation change: recorded into the cycle's merged patch when the
    profile has DefaultPreBind, else sent now (a failure raises, failing the PreBind)."""
    patch = pending_pod_patch(state)
    if patch is None:
        await cluster.patch_pod_metadata(pod, annotations=annotations, labels=labels)
        return
    patch.annotations.update(annotations or {})
    patch.labels.update(labels or {})
