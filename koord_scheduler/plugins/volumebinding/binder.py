"""Reserve's assumptions and PreBind's API writes for VolumeBinding (kube-scheduler
``volumebinding/binder.go``: ``AssumePodVolumes``, ``BindPodVolumes``, ``bindAPIUpdate``,
``checkBindings``).

PreBind writes what Reserve assumed: each static volume gets its ``spec.claimRef`` (and
``pv.kubernetes.io/bound-by-controller: "yes"``), each claim to provision gets
``volume.kubernetes.io/selected-node``. Both are merge patches carrying the object's
``resourceVersion``, so a concurrent change fails them as upstream's Update would. Then it waits until
the PersistentVolume controller (and a provisioner) have bound every claim, rechecking on every claim or
volume event, or at least once a second, until ``bindTimeoutSeconds`` runs out. Errors carry
upstream's messages under ``binding volumes: ``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from apis.core.frozendict import FrozenDict
from apis.core.storage import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
)
from apis.core.types import Pod
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.plugins.storageinfo import kinds
from koord_scheduler.plugins.volumebinding.assume_cache import AssumeCache
from koord_scheduler.plugins.volumebinding.policy import (
    DynamicProvision,
    PodVolumes,
    StaticBinding,
    VolumeBindingError,
    bound_to,
    volume_admits,
)

POLL_INTERVAL_S = 1.0
"""Upstream polls every second; events wake the wait sooner."""


def with_annotation(meta_owner: Any, key: str, value: str) -> Any:
    meta = meta_owner.meta
    annotations = FrozenDict({**meta.annotations, key: value})
    return dataclasses.replace(meta_owner, meta=dataclasses.replace(meta, annotations=annotations))


def bind_volume_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """``GetBindVolumeToClaim``: the volume with its claimRef set to the claim, and whether it changed."""
    dirty = False
    set_bound_by_controller = not bound_to(volume, claim)
    out = volume
    ref = volume.claim_ref
    if ref is None or (ref.name, ref.namespace, ref.uid) != (claim.name, claim.namespace, claim.meta.uid):
        out = dataclasses.replace(out, claim_ref=ClaimRef(claim.namespace, claim.name, claim.meta.uid))
        dirty = True
    if set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in out.meta.annotations:
        out = with_annotation(out, ANN_BOUND_BY_CONTROLLER, "yes")
        dirty = True
    return out, dirty


def assume_pod_volumes(
    pod_volumes: PodVolumes,
    node_name: str,
    pv_cache: AssumeCache[PersistentVolume],
    pvc_cache: AssumeCache[PersistentVolumeClaim],
) -> PodVolumes:
    """``AssumePodVolumes`` (for a pod not fully bound): assume the bound volumes and the annotated
    claims; returns what PreBind must write. On failure nothing stays assumed."""
    bindings: list[StaticBinding] = []
    provisions: list[DynamicProvision] = []
    try:
        for binding in pod_volumes.static_bindings:
            volume, dirty = bind_volume_to_claim(binding.volume, binding.claim)
            if dirty:
                pv_cache.assume(volume)
            bindings.append(StaticBinding(binding.claim, volume))
        for provision in pod_volumes.provisions:
            claim = with_annotation(provision.claim, ANN_SELECTED_NODE, node_name)
            pvc_cache.assume(claim)
            provisions.append(DynamicProvision(claim))
    except VolumeBindingError:
        revert(PodVolumes(tuple(bindings), tuple(provisions)), pv_cache, pvc_cache)
        raise
    return PodVolumes(tuple(bindings), tuple(provisions))


def revert(
    pod_volumes: PodVolumes, pv_cache: AssumeCache[PersistentVolume], pvc_cache: AssumeCache[PersistentVolumeClaim]
) -> None:
    """``RevertAssumedPodVolumes``."""
    for binding in pod_volumes.static_bindings:
        pv_cache.restore(binding.volume)
    for provision in pod_volumes.provisions:
        pvc_cache.restore(provision.claim)


def volume_patch(volume: PersistentVolume) -> dict[str, Any]:
    ref = volume.claim_ref
    assert ref is not None
    metadata: dict[str, Any] = {"resourceVersion": volume.meta.resource_version}
    if ANN_BOUND_BY_CONTROLLER in volume.meta.annotations:
        metadata["annotations"] = {ANN_BOUND_BY_CONTROLLER: volume.meta.annotations[ANN_BOUND_BY_CONTROLLER]}
    claim_ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ref.namespace, "name": ref.name}
    if ref.uid:
        claim_ref["uid"] = ref.uid
    return {"metadata": metadata, "spec": {"claimRef": claim_ref}}


def claim_patch(claim: PersistentVolumeClaim) -> dict[str, Any]:
    return {
        "metadata": {
            "resourceVersion": claim.meta.resource_version,
            "annotations": {ANN_SELECTED_NODE: claim.meta.annotations[ANN_SELECTED_NODE]},
        }
    }


def _rv(obj: Any) -> int:
    try:
        return int(obj.meta.resource_version or 0)
    except ValueError:
        return 0


class PodVolumesBinder:
    """PreBind's work for one pod: :meth:`write` then :meth:`wait`."""

    def __init__(
        self,
        cluster: ClusterClient,
        pv_cache: AssumeCache[PersistentVolume],
        pvc_cache: AssumeCache[PersistentVolumeClaim],
        *,
        bind_timeout_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.pv_cache = pv_cache
        self.pvc_cache = pvc_cache
        self.bind_timeout_s = bind_timeout_s
        self.monotonic = monotonic

    async def write(self, pod_volumes: PodVolumes) -> PodVolumes:
        """``bindAPIUpdate``: patch the volumes, then the claims; returns them as the server answered.
        On failure the assumptions not yet written are reverted and the API error is raised."""
        bindings = list(pod_volumes.static_bindings)
        provisions = list(pod_volumes.provisions)
        done_bindings = 0
        done_provisions = 0
        try:
            for i, binding in enumerate(bindings):
                volume = binding.volume
                updated = await self.cluster.patch_object(kinds.VOLUME, volume.name, volume_patch(volume))
                bindings[i] = StaticBinding(binding.claim, updated)
                done_bindings += 1
            for i, provision in enumerate(provisions):
                claim = provision.claim
                updated = await self.cluster.patch_object(
                    kinds.CLAIM, claim.name, claim_patch(claim), namespace=claim.namespace
                )
                provisions[i] = DynamicProvision(updated)
                done_provisions += 1
        except ClusterError as err:
            revert(
                PodVolumes(tuple(bindings[done_bindings:]), tuple(provisions[done_provisions:])),
                self.pv_cache,
                self.pvc_cache,
            )
            raise VolumeBindingError(str(err)) from None
        return PodVolumes(tuple(bindings), tuple(provisions))

    async def wait(
        self,
        pod_volumes: PodVolumes,
        *,
        node_name: str,
        node_labels: Callable[[], Mapping[str, str] | None],
        pod_gone: Callable[[], str],
        changed: asyncio.Event,
    ) -> None:
        """Until :func:`check_bindings` says every claim is bound; ``changed`` is set by the plugin on
        every claim, volume or pod-deletion event."""
        deadline = self.monotonic() + self.bind_timeout_s
        while True:
            changed.clear()
            try:
                if check_bindings(
                    pod_volumes,
                    node_name,
                    labels=node_labels(),
                    pod_gone=pod_gone(),
                    pv_cache=self.pv_cache,
                    pvc_cache=self.pvc_cache,
                ):
                    return
            except VolumeBindingError as err:
                raise VolumeBindingError(f"binding volumes: {err}") from None
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                raise VolumeBindingError("binding volumes: context deadline exceeded")
            with contextlib.suppress(TimeoutError):
                # asyncio.timeout, not wait_for, which on Python 3.11 loses a cancellation that
                # arrives as the event is set.
                async with asyncio.timeout(min(remaining, POLL_INTERVAL_S)):
                    await changed.wait()


def check_bindings(
    pod_volumes: PodVolumes,
    node_name: str,
    *,
    labels: Mapping[str, str] | None,
    pod_gone: str,
    pv_cache: AssumeCache[PersistentVolume],
    pvc_cache: AssumeCache[PersistentVolumeClaim],
) -> bool:
    """``checkBindings`` on the watched objects: True once every claim is fully bound; False to keep
    waiting; raises for a condition that needs a new scheduling attempt."""
    if labels is None:
        raise VolumeBindingError(f'failed to get node "{node_name}": nodes "{node_name}" not found')
    if pod_gone:
        raise VolumeBindingError(f"pod does not exist any more: {pod_gone}")
    for binding in pod_volumes.static_bindings:
        volume = pv_cache.get_api(binding.volume.name)
        if volume is None:
            raise VolumeBindingError(f"failed to check binding: {pv_cache.not_found(binding.volume.name)}")
        claim = pvc_cache.get_api(binding.claim.key)
        if claim is None:
            raise VolumeBindingError(f"failed to check binding: {pvc_cache.not_found(binding.claim.key)}")
        if _rv(binding.volume) > _rv(volume):
            return False
        if not volume_admits(volume, labels):
            raise VolumeBindingError(
                f'pv "{volume.name}" node affinity doesn\'t match node "{node_name}": no matching NodeSelectorTerms'
            )
        if volume.claim_ref is None or not volume.claim_ref.uid:
            raise VolumeBindingError(f'ClaimRef got reset for pv "{volume.name}"')
        if not claim.fully_bound:
            return False
    for provision in pod_volumes.provisions:
        claim = pvc_cache.get_api(provision.claim.key)
        if claim is None:
            raise VolumeBindingError(f"failed to check provisioning pvc: {pvc_cache.not_found(provision.claim.key)}")
        if _rv(provision.claim) > _rv(claim):
            return False
        if not claim.meta.annotations:
            raise VolumeBindingError(f'selectedNode annotation reset for PVC "{claim.name}"')
        if claim.meta.annotations.get(ANN_SELECTED_NODE, "") != node_name:
            raise VolumeBindingError(f'provisioning failed for PVC "{claim.name}"')
        if claim.volume_name:
            volume = pv_cache.get_api(claim.volume_name)
            if volume is None:
                return False
            if not volume_admits(volume, labels):
                raise VolumeBindingError(
                    f'pv "{volume.name}" node affinity doesn\'t match node "{node_name}": no matching NodeSelectorTerms'
                )
        if not claim.fully_bound:
            return False
    return True


def all_bound(pod: Pod, pvc_cache: AssumeCache[PersistentVolumeClaim]) -> bool:
    """``arePodVolumesBound``: every claim of the pod is fully bound (as the assume cache shows it)."""
    for volume in pod.volumes:
        if not volume.claim_name:
            continue
        claim = pvc_cache.get(f"{pod.namespace}/{volume.claim_name}")
        if claim is None or not claim.fully_bound:
            return False
    return True
