"""VolumeBinding (kube-scheduler ``volumebinding/volume_binding.go``): pods with PersistentVolumeClaims
go where their volumes can be, and their unbound claims get a volume there.

- PreFilter: Skip for pods without claims; a claim the pod cannot use, or an unbound claim that is not
  ``WaitForFirstConsumer``, rejects the pod (UnschedulableAndUnresolvable, upstream's messages).
- Filter, per node: bound volumes' node affinity; for each unbound ``WaitForFirstConsumer`` claim an
  available static volume or dynamic provisioning the class's ``allowedTopologies`` (and the CSI
  driver's CSIStorageCapacity, when it asks for capacity checks) allow on the node (:mod:`.policy`).
- PreScore/Score: only with StorageCapacityScoring, which ``args.shape`` turns on (upstream refuses a
  shape unless that feature gate is on): the shape over the volumes' utilisation (:mod:`.scoring`),
  in :class:`CapacityScoringVolumeBinding`.
- Reserve/Unreserve: assume the chosen volumes and annotated claims in the assume caches
  (:mod:`.assume_cache`), so no other pod takes them meanwhile.
- PreBind: write the bindings and ``selected-node`` annotations and wait until the PersistentVolume
  controller has bound every claim, up to ``bindTimeoutSeconds`` (:mod:`.binder`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.config.plugin_args import VolumeBindingArgs
from apis.core.storage import PersistentVolume, PersistentVolumeClaim
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PreBindPlugin,
    PreBindPreFlight,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from koord_scheduler.framework.per_node_filter import PerNodeFilter
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status, error, skip, success, unresolvable
from koord_scheduler.framework.types import (
    ClusterEventWithHint,
    NodeFilterResult,
    PreFilterResult,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.storageinfo.listers import StorageListers, claim_key, volume_key
from koord_scheduler.plugins.volumebinding import binder, events, policy, scoring
from koord_scheduler.plugins.volumebinding.assume_cache import AssumeCache
from koord_scheduler.plugins.volumebinding.policy import PodVolumeClaims, PodVolumes, StorageView, VolumeBindingError

NAME = names.VOLUME_BINDING
ARGS = VolumeBindingArgs


@dataclass(slots=True)
class CycleData:
    """upstream's ``stateData``: the pod's claims, and what Filter found per node."""

    claims: PodVolumeClaims
    view: StorageView
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    reserved: PodVolumes | None = None
    """What Reserve assumed (None: the pod's claims were all bound)."""


STATE_KEY: StateKey[CycleData] = StateKey(NAME)
_MAX_PLACEMENTS = 4096


class VolumeBinding:
    name = NAME

    def __init__(self, args: VolumeBindingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.listers = StorageListers().subscribe(handle)
        self.pv_cache: AssumeCache[PersistentVolume] = AssumeCache(
            self.listers.volumes, lambda v: v.name, "persistentvolumes"
        )
        self.pvc_cache: AssumeCache[PersistentVolumeClaim] = AssumeCache(
            self.listers.claims, lambda c: c.key, "persistentvolumeclaims"
        )
        self.shape = scoring.scaled_shape([(p.utilization, p.score) for p in args.shape]) if args.shape else None
        self.binder = binder.PodVolumesBinder(
            handle.cluster, self.pv_cache, self.pvc_cache, bind_timeout_s=float(args.bind_timeout_seconds)
        )
        self._waiting: dict[str, set[asyncio.Event]] = {}
        """wake-up key (a claim's or volume's, :mod:`storageinfo.listers`) -> the events of the pods in
        PreBind that wait on it: a claim or volume event wakes only those pods."""
        self.listers.on_change.append(self._wake)
        self.placements: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Claim key -> how PreBind got it a volume (the latest few thousand), for ``simulate``."""
        handle.add_simulation_report(self.simulation_report)

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.pvc_names:
            return None, skip()
        problem = policy.claims_problem(pod, self.listers.claims)
        if problem:
            return None, unresolvable(problem)
        claims = [self.pvc_cache.get(f"{pod.namespace}/{name}") for name in pod.pvc_names]
        try:
            classified = policy.classify_claims(
                [c for c in claims if c is not None], self.listers.classes, self._volumes_by_class()
            )
        except VolumeBindingError as err:
            return None, error(str(err))
        if classified.unbound_immediate:
            return None, unresolvable(policy.ERR_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, CycleData(classified, self._view()))
        return None, success()

    def _volumes_by_class(self) -> Mapping[str, Sequence[PersistentVolume]]:
        return _AssumedVolumesByClass(self.listers.volumes_by_class, self.pv_cache)

    def pre_filter_extensions(self) -> None:
        return None

    # ----- Filter -----

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        data = state.get(STATE_KEY)
        node = node_info.node
        if data is None or node is None:
            return success()
        try:
            found, reasons = policy.find_pod_volumes(data.claims, node.name, node.labels, data.view)
        except VolumeBindingError as err:
            return error(str(err))
        if reasons:
            return unresolvable(*reasons)
        data.by_node[node.name] = found
        return success()

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        if state.get(STATE_KEY) is None:
            return NodeFilterResult.all_pass(len(positions))
        return PerNodeFilter(self).filter_nodes(state, pod, snapshot, positions)

    def _view(self) -> StorageView:
        volumes: Mapping[str, PersistentVolume] = _AssumedVolumes(self.listers.volumes, self.pv_cache)
        return StorageView(
            volumes, self.listers.classes, self.listers.csi_drivers, list(self.listers.capacities.values())
        )

    # ----- Reserve -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        data = state.get(STATE_KEY)
        if data is None:
            return success()
        found = data.by_node.get(node_name)
        if found is None or binder.all_bound(pod, self.pvc_cache):
            data.reserved = None
            return success()
        try:
            data.reserved = binder.assume_pod_volumes(found, node_name, self.pv_cache, self.pvc_cache)
        except VolumeBindingError as err:
            return error(str(err))
        return success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data = state.get(STATE_KEY)
        if data is not None and data.reserved is not None:
            binder.revert(data.reserved, self.pv_cache, self.pvc_cache)

    # ----- PreBind -----

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """``PreBindPreFlight``: PreBind has work unless every claim of the pod was already bound."""
        data = state.get(STATE_KEY)
        return success() if data is not None and data.reserved is not None else skip()

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        data = state.get(STATE_KEY)
        if data is None or data.reserved is None:
            return success()
        changed = asyncio.Event()
        keys = _wake_keys(data.reserved)
        for key in keys:
            self._waiting.setdefault(key, set()).add(changed)
        try:
            written = await self.binder.write(data.reserved)
            data.reserved = written
            await self.binder.wait(
                written,
                node_name=node_name,
                node_labels=lambda: self._node_labels(node_name),
                pod_gone=lambda: self._pod_gone(pod, node_name),
                changed=changed,
            )
        except VolumeBindingError as err:
            return error(str(err))
        finally:
            for key in keys:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(changed)
                    if not waiters:
                        del self._waiting[key]
        self._record(pod, node_name, written)
        return success()

    def _record(self, pod: Pod, node_name: str, written: PodVolumes) -> None:
        rows = [(b.claim, b.volume.name, "bound to an available volume") for b in written.static_bindings]
        for provision in written.provisions:
            current = self.listers.claims.get(provision.claim.key)
            rows.append((provision.claim, current.volume_name if current else "", f"provisioned for {node_name}"))
        for claim, volume, how in rows:
            self.placements.pop(claim.key, None)
            self.placements[claim.key] = {"pod": pod.key, "claim": claim.key, "volume": volume, "how": how}
        while len(self.placements) > _MAX_PLACEMENTS:
            self.placements.popitem(last=False)

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        return "Volumes", list(self.placements.values())

    def _node_labels(self, node_name: str) -> Mapping[str, str] | None:
        info = self.handle.snapshot.node_info(node_name)
        return None if info is None or info.node is None else info.node.labels

    def _pod_gone(self, pod: Pod, node_name: str) -> str:
        """Upstream's pod lister check: the pod assumed on the node was deleted meanwhile (the scheduler
        cache drops a deleted pod); the message is the API server's NotFound."""
        info = self.handle.snapshot.node_info(node_name)
        current = info.pods.get(pod.key) if info is not None else None
        if current is None or (pod.uid and current.uid != pod.uid):
            return f'pods "{pod.name}" not found'
        return ""

    def _wake(self, keys: frozenset[str]) -> None:
        for key in keys:
            for changed in self._waiting.get(key, ()):
                changed.set()

    # ----- queueing -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return events.volume_binding_events()


def _wake_keys(volumes: PodVolumes) -> frozenset[str]:
    """The claims and volumes a pod's PreBind waits on (a provisioned volume names its claim)."""
    keys = {claim_key(b.claim.key) for b in volumes.static_bindings}
    keys |= {volume_key(b.volume.name) for b in volumes.static_bindings}
    keys |= {claim_key(p.claim.key) for p in volumes.provisions}
    return frozenset(keys)


class CapacityScoringVolumeBinding(VolumeBinding):
    """VolumeBinding with StorageCapacityScoring (``args.shape`` given): PreScore and Score as upstream.
    Without the feature upstream's PreScore always returns Skip, so the plain plugin has no Score at all
    and pods pay nothing for it."""

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        if state.get(STATE_KEY) is None:
            return skip()
        return success()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        data = state.get(STATE_KEY)
        if self.shape is None or data is None:
            return 0
        found = data.by_node.get(node_info.name)
        if found is None:
            return 0
        return scoring.node_score(self.shape, class_resources(found))

    def score_extensions(self) -> None:
        return None


def class_resources(found: PodVolumes) -> dict[str, tuple[int, int]]:
    """Score's per-class (requested, capacity): the static bindings' claims and volumes when there are
    any, else the dynamic provisions with a CSIStorageCapacity (the class's capacity on the node)."""
    out: dict[str, tuple[int, int]] = {}
    if found.static_bindings:
        for binding in found.static_bindings:
            requested, capacity = out.get(binding.volume.class_name, (0, 0))
            out[binding.volume.class_name] = (
                requested + (binding.claim.request_bytes or 0),
                capacity + binding.volume.capacity_bytes,
            )
        return out
    for provision in found.provisions:
        if provision.capacity is None:
            continue
        requested, _ = out.get(provision.claim.class_name, (0, 0))
        out[provision.claim.class_name] = (
            requested + (provision.claim.request_bytes or 0),
            provision.capacity.capacity_bytes or 0,
        )
    return out


class _AssumedVolumes(Mapping[str, PersistentVolume]):
    """The watched volumes by name, read through the assume cache."""

    def __init__(self, api: Mapping[str, PersistentVolume], cache: AssumeCache[PersistentVolume]) -> None:
        self._api = api
        self._cache = cache

    def __getitem__(self, key: str) -> PersistentVolume:
        found = self._cache.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Any:
        return iter(self._api)

    def __len__(self) -> int:
        return len(self._api)


class _AssumedVolumesByClass(Mapping[str, Sequence[PersistentVolume]]):
    """Volumes of a class (``ListPVs``), with assumed copies in place."""

    def __init__(self, api: Mapping[str, Mapping[str, PersistentVolume]], cache: AssumeCache[PersistentVolume]) -> None:
        self._api = api
        self._cache = cache

    def __getitem__(self, key: str) -> Sequence[PersistentVolume]:
        return self._cache.list(self._api.get(key, {}).values())

    def __iter__(self) -> Any:
        return iter(self._api)

    def __len__(self) -> int:
        return len(self._api)


def new(args: VolumeBindingArgs | None, handle: Handle) -> VolumeBinding:
    args = args or VolumeBindingArgs()
    return CapacityScoringVolumeBinding(args, handle) if args.shape else VolumeBinding(args, handle)


def declared_capabilities(
    plugin: VolumeBinding,
) -> tuple[
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    ReservePlugin,
    PreBindPlugin,
    PreBindPreFlight,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin


def declared_capabilities_capacity_scoring_volume_binding(
    plugin: CapacityScoringVolumeBinding,
) -> tuple[
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    PreBindPreFlight,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin
