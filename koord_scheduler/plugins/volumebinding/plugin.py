"""VolumeBinding, minimal: a pod with PersistentVolumeClaims is never bound blindly.

PreFilter returns Skip for pods without claims. For the others it reads the claims and volumes watched
from the cluster (``v1`` PersistentVolumeClaims and PersistentVolumes) and rejects the pod, with
UnschedulableAndUnresolvable and kube-scheduler's reason, unless every claim is bound to a known volume
(:mod:`.policy`). Filter then keeps the nodes every bound volume's node affinity admits. Nothing is bound
or provisioned: ``bindTimeoutSeconds`` is accepted and unused. No EnqueueExtensions, so any cluster event
(a claim created or bound among them) sends a rejected pod back to the queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from apis.config.plugin_args import VolumeBindingArgs
from apis.core.parse import parse_node_selector_term, parse_object_meta
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import WatchingHandle
from koord_scheduler.framework.interfaces import BatchFilterPlugin, PreFilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable
from koord_scheduler.framework.types import EventType, NodeFilterResult, ObjectKind, PreFilterResult
from koord_scheduler.plugins import names
from koord_scheduler.plugins.volumebinding import policy
from koord_scheduler.plugins.volumebinding.policy import ClaimRecord, VolumeRecord

NAME = names.VOLUME_BINDING
ARGS = VolumeBindingArgs

_CONFLICT = unresolvable(policy.ERR_NODE_CONFLICT)


def parse_claim(raw: Mapping[str, Any]) -> ClaimRecord:
    meta = parse_object_meta(dict(raw), "PersistentVolumeClaim", default_namespace="default")
    spec = raw.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"PersistentVolumeClaim {meta.namespace}/{meta.name}: spec must be an object")
    volume = spec.get("volumeName") or ""
    if not isinstance(volume, str):
        raise ValueError(f"PersistentVolumeClaim {meta.namespace}/{meta.name}: spec.volumeName must be a string")
    return ClaimRecord(meta.namespace, meta.name, volume, meta.deletion_timestamp is not None)


def parse_volume(raw: Mapping[str, Any]) -> VolumeRecord:
    meta = parse_object_meta(dict(raw), "PersistentVolume")
    spec = raw.get("spec") or {}
    affinity = spec.get("nodeAffinity") if isinstance(spec, Mapping) else None
    required = affinity.get("required") if isinstance(affinity, Mapping) else None
    if not isinstance(required, Mapping):
        return VolumeRecord(meta.name, None)
    terms = required.get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        raise ValueError(f"PersistentVolume {meta.name}: nodeAffinity.required.nodeSelectorTerms must be a list")
    return VolumeRecord(meta.name, tuple(parse_node_selector_term(t) for t in terms))


CLAIM_KIND = ObjectKind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, parse_claim)
VOLUME_KIND = ObjectKind("PersistentVolume", "", "v1", "persistentvolumes", False, parse_volume)


@dataclass(frozen=True, slots=True)
class PreFilterState:
    volumes: tuple[VolumeRecord, ...]


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)


class VolumeBinding:
    name = NAME

    def __init__(self, args: VolumeBindingArgs, handle: WatchingHandle) -> None:
        self.args = args
        self.claims: dict[str, ClaimRecord] = {}
        self.volumes: dict[str, VolumeRecord] = {}
        handle.watch(CLAIM_KIND, self._on_claim)
        handle.watch(VOLUME_KIND, self._on_volume)

    def _on_claim(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, ClaimRecord):
                self.claims.pop(f"{old.namespace}/{old.name}", None)
        elif isinstance(new, ClaimRecord):
            self.claims[f"{new.namespace}/{new.name}"] = new

    def _on_volume(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, VolumeRecord):
                self.volumes.pop(old.name, None)
        elif isinstance(new, VolumeRecord):
            self.volumes[new.name] = new

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.pvc_names:
            return None, skip()
        reason, volumes = policy.claims_verdict(pod.namespace, pod.pvc_names, self.claims, self.volumes)
        if reason:
            return None, unresolvable(reason)
        if all(v.node_affinity is None for v in volumes):
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState(volumes))
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return NodeFilterResult.all_pass(len(positions))
        passed = np.fromiter(
            (
                policy.volumes_fit_node(pre.volumes, (node := snapshot.node(p)).labels, node.name)
                for p in positions.tolist()
            ),
            dtype=np.bool_,
            count=len(positions),
        )
        return NodeFilterResult.from_mask(passed, _CONFLICT)


def new(args: VolumeBindingArgs | None, handle: WatchingHandle) -> VolumeBinding:
    return VolumeBinding(args or VolumeBindingArgs(), handle)


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = VolumeBinding
    _filter: type[BatchFilterPlugin] = VolumeBinding
