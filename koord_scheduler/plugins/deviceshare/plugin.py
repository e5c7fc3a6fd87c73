"""DeviceShare: GPU sharing and whole-GPU allocation from the node's ``Device`` object (Koordinator
``pkg/scheduler/plugins/deviceshare``).

- PreFilter reads the pod's device request (:mod:`.request`: GPU, RDMA, FPGA) and its allocate hints and
  joint allocation (:mod:`.hints`); a bad combination makes the pod unresolvable with Koordinator's
  message. Pods asking for no device skip every other point.
- GPU shared resource templates (:mod:`.templates`): a shared GPU request naming a ``matchedResources``
  resource must equal a template of the watched ConfigMap, and only nodes of a GPU model having it pass.
- Filter, per node: a pod sharing a GPU is kept off nodes whose GPU vendor/model pair is in
  ``gpuShareUnsupportedModels``; otherwise its devices must fit (:mod:`.allocator`: ``Insufficient gpu
  devices``...). A node without a Device object passes, as in Koordinator (NodeResourcesFit still checks
  its allocatable).
- Score: Koordinator's node score under ``scoringStrategy`` (:mod:`.allocation`), summed over the
  requested types, normalised to 0..100.
- Reserve picks the devices (and RDMA VFs) and holds them; Unreserve and forgotten pods give them back.
- PreBind writes ``scheduling.koordinator.sh/device-allocated`` (PreBindReservation on a Reservation).

Pods bound elsewhere are accounted from their annotation (pod events); terminal and deleted pods free
their devices. Reservations hold devices and give them back to their owners (:mod:`.reservation`);
preemption dry runs see victims' devices as free (:mod:`.preemption`). On nodes with a NUMA topology
policy, DeviceShare gives NodeNUMAResource's topology manager its hints (:mod:`.numa_hints`) and takes
the devices inside the NUMA affinity chosen (unless ``disableDeviceNumaTopologyAlignment``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from apis.config.deviceshare_args import DeviceShareArgs
from apis.core.types import Pod
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_FPGA,
    DEVICE_GPU,
    DEVICE_RDMA,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    DeviceAllocation,
    decode_device_allocations,
    encode_device_allocations,
)
from apis.scheduling import GROUP, VERSION
from apis.scheduling.device import DEVICE_KIND, DEVICE_PLURAL, NodeDeviceRecord, parse_device
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient, Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterPlugin,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from koord_scheduler.framework.koordinator_stages import NUMAHintProvider, ReservationPreBindPlugin
from koord_scheduler.framework.numa_affinity import NUMA_AFFINITY_KEY, NUMATopologyHint
from koord_scheduler.framework.pod_patch import patch_at_pre_bind
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity
from koord_scheduler.framework.services import ApiRoute, APIServiceProvider
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import SUCCESS, Status, error, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    NodeFilterResult,
    ObjectKind,
    PreFilterResult,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.deviceshare import preemption, service
from koord_scheduler.plugins.deviceshare import reservation as resv
from koord_scheduler.plugins.deviceshare.allocation import Scorer, can_allocate
from koord_scheduler.plugins.deviceshare.allocator import Failure, PodDevices, allocate, pod_devices
from koord_scheduler.plugins.deviceshare.allocator import score as allocator_score
from koord_scheduler.plugins.deviceshare.cache import DeviceCache, NodeDevices
from koord_scheduler.plugins.deviceshare.hints import HintError
from koord_scheduler.plugins.deviceshare.numa_hints import bits, device_numa_hints
from koord_scheduler.plugins.deviceshare.partitions import NodePartitions, PartitionError, honored, node_partitions
from koord_scheduler.plugins.deviceshare.preemption import PREEMPTIBLE_KEY, PreemptibleDevices
from koord_scheduler.plugins.deviceshare.report import allocation_rows, device_rows
from koord_scheduler.plugins.deviceshare.request import DeviceRequest, DeviceRequestError
from koord_scheduler.plugins.deviceshare.templates import (
    ERR_NO_MATCHED_TEMPLATE,
    TemplatesCache,
    config_map_kind,
    name_template,
    node_templates,
)
from koord_scheduler.plugins.helpers import default_normalize_score
from koord_scheduler.plugins.kinds import RESERVATION_KIND

log = logging.getLogger(__name__)

NAME = names.DEVICE_SHARE
ARGS = DeviceShareArgs

DEVICE_OBJECT_KIND = ObjectKind(
    kind=DEVICE_KIND, group=GROUP, version=VERSION, plural=DEVICE_PLURAL, namespaced=False, parse=parse_device
)

ERR_INSUFFICIENT_GPU = "Insufficient gpu devices"
ERR_SHARE_UNSUPPORTED = 'model "{}" of vendor "{}" does not support GPU Share'
_INSUFFICIENT = unschedulable(ERR_INSUFFICIENT_GPU)
_NO_GPUS = unresolvable(ERR_INSUFFICIENT_GPU)
_NO_TEMPLATE = unresolvable(ERR_NO_MATCHED_TEMPLATE)

_TERMINAL = frozenset({"Succeeded", "Failed"})
_ALLOCATED_TYPES = frozenset({DEVICE_GPU, DEVICE_RDMA, DEVICE_FPGA})


@dataclass(frozen=True, slots=True)
class PreFilterState:
    pod: PodDevices
    templates: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None  # by GPU model; None: not enforced

    @property
    def request(self) -> DeviceRequest:
        return self.pod.request


@dataclass(slots=True)
class ReserveState:
    node: str
    allocations: dict[str, tuple[DeviceAllocation, ...]]
    reservation: str = ""
    """For a reserve pod: the name of its Reservation (PreBindReservation writes there)."""


@dataclass(frozen=True, slots=True)
class _Cycle:
    """What the cycle state holds for every node: a preemption dry run's changes, the Reservation restored
    per node, the NUMA affinity chosen per node."""

    dry_run: PreemptibleDevices | None
    restored: RestoredCapacity | None
    affinities: Mapping[str, int | None] | None


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node's devices as one pod may use them in this cycle: the cache's, with a Reservation's remainder
    given back to its owner and a preemption dry run's changes; the minors to take first."""

    devices: NodeDevices
    preferred: Mapping[str, frozenset[int]]
    reservation: str = ""
    """The uid of the Reservation the pod consumes on the node ("" for none)."""
    node: str = ""


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
RESERVE_KEY: StateKey[ReserveState] = StateKey("Reserve" + NAME)


class DeviceShare:
    name = NAME

    def __init__(
        self, args: DeviceShareArgs, cluster: ClusterClient | None = None, snapshot: ClusterSnapshot | None = None
    ) -> None:
        self.args = args
        self.cache = DeviceCache()
        self.scorer = Scorer(args.scoring_strategy.type, {r.name: r.weight for r in args.scoring_strategy.resources})
        self._unsupported = args.unsupported_models()
        self._cluster = cluster
        self._snapshot = snapshot
        self._align = not args.disable_device_numa_topology_alignment
        self.templates = TemplatesCache(args.templates_config(), cluster)
        self.placements: dict[str, tuple[str, dict[str, tuple[DeviceAllocation, ...]]]] = {}
        """Pod key → (node, allocations) for the pods this scheduler placed (``simulate`` report)."""

    # ----- events -----

    def on_device(self, event: EventType, old: Any, new: Any) -> None:
        if new is None:
            if isinstance(old, NodeDeviceRecord):
                self.cache.delete_device(old.name)
            return
        if isinstance(new, NodeDeviceRecord):
            self.cache.set_device(new)

    def on_pod(self, event: EventType, old: Any, new: Any) -> None:
        if new is None:
            if isinstance(old, Pod):
                self.cache.unassign(old.key)
            return
        if not isinstance(new, Pod):
            return
        if new.phase in _TERMINAL:
            self.cache.unassign(new.key)
            return
        if not new.node_name:
            return
        text = new.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
        if not text:
            return
        try:
            decoded = decode_device_allocations(text)
        except ValueError as exc:
            log.warning("pod %s: %s", new.key, exc)
            return
        allocations = {t: tuple(v) for t, v in decoded.items()}
        self.cache.assign(new.key, new.node_name, allocations, reservation=resv.consumed_reservation(new))

    def on_reservation(self, event: EventType, old: Any, new: Any) -> None:
        """An Available Reservation holds its devices on its node; a finished or deleted one gives them back."""
        resv.apply_reservation_event(self.cache, event, old, new)

    def on_forget_pod(self, pod: Pod) -> None:
        key = resv.holding_key(pod)
        self.cache.unassign(key)
        self.placements.pop(key, None)

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if ANNOTATION_DEVICE_ALLOCATED in pod.annotations:
            return None, skip()
        if pod.resource_claims:
            # Koordinator's plan for DRA: a pod with ResourceClaims is DynamicResources', never DeviceShare's.
            return None, skip()
        try:
            devices = pod_devices(pod)
        except (DeviceRequestError, HintError, PartitionError) as exc:
            return None, unresolvable(str(exc))
        if devices is None:
            return None, skip()
        templates = self.templates.pod_templates(devices.request.gpu)
        if templates is not None and not templates:
            return None, _NO_TEMPLATE
        state.write(PRE_FILTER_KEY, PreFilterState(devices, templates))
        return None, success()

    # ----- PreFilterExtensions (preemption dry runs, nominated pods) -----

    def pre_filter_extensions(self) -> DeviceShare:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        """``AddPod``: ``pod_to_add`` runs on the node in this state; what it holds (or, for a pod the cache
        holds nothing for, what Reserve would give it there) is taken (:mod:`.preemption`)."""
        if state.get(PRE_FILTER_KEY) is None:
            return SUCCESS
        node = node_info.name
        preemptible = self._preemptible(state)
        key = resv.holding_key(pod_to_add)
        held = self.cache.held(node, key)
        if held:
            preemptible.take(node, held)
            return SUCCESS
        placed = preemptible.placed.setdefault(node, {})
        if key in placed:
            return SUCCESS
        try:
            devices = pod_devices(pod_to_add)
        except (DeviceRequestError, HintError, PartitionError):
            return SUCCESS  # its own PreFilter rejects it; it holds nothing here
        view = self._view(state, node, -1)
        if devices is None or view is None:
            return SUCCESS
        chosen = self._allocate(devices, view)
        if isinstance(chosen, dict):
            placed[key] = chosen
            preemptible.take(node, chosen)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        """``RemovePod``: ``pod_to_remove`` is off the node in this state; its devices are free here."""
        if state.get(PRE_FILTER_KEY) is None:
            return SUCCESS
        node = node_info.name
        preemptible = self._preemptible(state)
        key = resv.holding_key(pod_to_remove)
        placed = preemptible.placed.get(node, {}).pop(key, None)
        held = placed or self.cache.held(node, key)
        if held:
            preemptible.give_back(node, held)
        return SUCCESS

    @staticmethod
    def _preemptible(state: CycleState) -> PreemptibleDevices:
        preemptible = state.get(PREEMPTIBLE_KEY)
        if preemptible is None:
            preemptible = PreemptibleDevices()
            state.write(PREEMPTIBLE_KEY, preemptible)
        return preemptible

    # ----- the node as this pod sees it -----

    def _cycle(self, state: CycleState) -> _Cycle:
        """What this cycle's state says about every node, read once per Filter or Score call."""
        affinities = state.get(NUMA_AFFINITY_KEY) if self._align else None
        return _Cycle(preemption.dry_run_of(state), state.get(RESTORED_CAPACITY), affinities)

    def _view(self, state: CycleState, node: str, position: int) -> NodeView | None:
        return self._view_in(self._cycle(state), node, position)

    def _view_in(self, cycle: _Cycle, node: str, position: int) -> NodeView | None:
        """The node's devices for this cycle's pod (None when the node has no Device object): a matched
        Reservation's remainder restored at ``position`` (-1: none), then a preemption dry run's changes."""
        devices = self.cache.node_devices(node)
        if devices is None:
            return None
        preferred: Mapping[str, frozenset[int]] = {}
        uid = ""
        owner = cycle.restored.owner_at(position) if cycle.restored is not None and position >= 0 else None
        if owner is not None and owner.uid in devices.remainders:
            uid = owner.uid
            devices, preferred = devices.for_owner(uid, restricted=owner.restricted)
        if cycle.dry_run is not None:
            devices = preemption.apply_dry_run(cycle.dry_run, node, devices)
        return NodeView(devices, preferred, uid, node)

    def _partitions(self, node_name: str) -> NodePartitions:
        """The node's GPU partition table (its Device's, else the built-in one of its GPU model) and
        whether it is honored."""
        record = self.cache.devices.get(node_name)
        info = self._snapshot.node_info(node_name) if self._snapshot is not None else None
        node_labels = info.node.labels if info is not None and info.node is not None else {}
        table = self.cache.partition_tables.get(node_name)
        return node_partitions(table, record.labels if record is not None else {}, node_labels)

    def _honors_partitions(self, node_info: NodeInfo) -> bool:
        record = self.cache.devices.get(node_info.name)
        has_table = node_info.name in self.cache.partition_tables
        device_labels = record.labels if record is not None else {}
        return honored(has_table, device_labels, node_info.node.labels if node_info.node is not None else {})

    def _position(self, node_name: str) -> int:
        info = self._snapshot.node_info(node_name) if self._snapshot is not None else None
        return info.position if info is not None else -1

    def _allocate(
        self, pod: PodDevices, view: NodeView, numa: int | None = None
    ) -> dict[str, tuple[DeviceAllocation, ...]] | Status:
        """The devices the pod gets on the node (inside the NUMA nodes of the ``numa`` mask), or why not."""
        if pod.request.gpu is not None and not view.devices.group(DEVICE_GPU).devices:
            return _NO_GPUS
        nodes = bits(numa) if numa is not None else None
        partitions = self._partitions(view.node) if pod.request.gpu is not None else None
        got = allocate(
            pod, view.devices.groups, self.scorer, preferred=view.preferred, numa=nodes, partitions=partitions
        )
        if isinstance(got, Failure):
            return unresolvable(*got.reasons) if got.unresolvable else unschedulable(*got.reasons)
        return got

    # ----- Filter -----

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return SUCCESS
        return self._filter_in(self._cycle(state), pre, node_info)

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return NodeFilterResult.all_pass(len(positions))
        cycle = self._cycle(state)
        passed = np.ones(len(positions), dtype=np.bool_)
        reason_ids = np.zeros(len(positions), dtype=np.int32)
        statuses: list[Status] = []
        index: dict[Status, int] = {}
        for i, pos in enumerate(positions.tolist()):
            status = self._filter_in(cycle, pre, snapshot.info(pos))
            if status.is_success:
                continue
            passed[i] = False
            at = index.get(status)
            if at is None:
                at = index[status] = len(statuses)
                statuses.append(status)
            reason_ids[i] = at
        if passed.all():
            return NodeFilterResult(passed, every_node_passed=True)
        return NodeFilterResult(passed, reason_ids, tuple(statuses))

    def _filter_in(self, cycle: _Cycle, pre: PreFilterState, node_info: NodeInfo) -> Status:
        gpu = pre.request.gpu
        if pre.templates is not None and node_info.name in self.cache.devices and not node_templates(pre, node_info):
            return _NO_TEMPLATE
        if gpu is not None and gpu.shared and self._unsupported:
            status = self._share_supported(node_info)
            if status is not None:
                return status
        if cycle.affinities is not None and node_info.name in cycle.affinities:
            return SUCCESS  # the topology manager admitted the pod here with the devices inside its affinity
        view = self._view_in(cycle, node_info.name, node_info.position)
        if view is None:
            return SUCCESS
        if gpu is not None and pre.pod.simple_gpu and not self._honors_partitions(node_info):
            group = view.devices.group(DEVICE_GPU)
            if not group.devices:
                return _NO_GPUS
            return SUCCESS if can_allocate(gpu, group.devices) else _INSUFFICIENT
        got = self._allocate(pre.pod, view)
        return got if isinstance(got, Status) else SUCCESS

    def _share_supported(self, node_info: NodeInfo) -> Status | None:
        labels = node_info.node.labels if node_info.node is not None else {}
        device = self.cache.devices.get(node_info.name)
        vendor = labels.get(LABEL_GPU_VENDOR) or (device.labels.get(LABEL_GPU_VENDOR, "") if device else "")
        model = labels.get(LABEL_GPU_MODEL) or (device.labels.get(LABEL_GPU_MODEL, "") if device else "")
        if (vendor, model) in self._unsupported:
            return unresolvable(ERR_SHARE_UNSUPPORTED.format(model, vendor))
        return None

    # ----- NUMA hint provider (NodeNUMAResource's topology manager) -----

    def _affinity(self, state: CycleState, node: str) -> tuple[bool, int | None]:
        """Whether the topology manager chose a NUMA affinity for this pod on ``node`` (not when the node
        has no NUMA policy, or alignment is off), and that affinity (a mask; None for any NUMA node)."""
        affinities = state.get(NUMA_AFFINITY_KEY) if self._align else None
        if affinities is None or node not in affinities:
            return False, None
        return True, affinities[node]

    def numa_topology_hints(
        self, state: CycleState, pod: Pod, node_name: str
    ) -> tuple[Mapping[str, Sequence[NUMATopologyHint]] | None, Status]:
        """``GetPodTopologyHints`` (:mod:`.numa_hints`): NUMA sets the pod's devices fit in."""
        pre = state.get(PRE_FILTER_KEY)
        if not self._align or pre is None:
            return None, SUCCESS
        view = self._view(state, node_name, self._position(node_name))
        if view is None:
            return None, SUCCESS
        hints = device_numa_hints(pre.pod, view.devices.groups, self.scorer, preferred=view.preferred)
        if isinstance(hints, Failure):
            return None, unresolvable(*hints.reasons) if hints.unresolvable else unschedulable(*hints.reasons)
        return hints, SUCCESS

    def allocate_numa(self, state: CycleState, pod: Pod, node_name: str, affinity: int | None) -> Status:
        """``Allocate``: the pod's devices fit inside the chosen NUMA ``affinity``."""
        pre = state.get(PRE_FILTER_KEY)
        if not self._align or pre is None:
            return SUCCESS
        view = self._view(state, node_name, self._position(node_name))
        if view is None:
            return SUCCESS
        got = self._allocate(pre.pod, view, affinity)
        return got if isinstance(got, Status) else SUCCESS

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        return skip() if state.get(PRE_FILTER_KEY) is None else success()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return 0
        view = self._view(state, node_info.name, node_info.position)
        return allocator_score(pre.pod, view.devices.groups, self.scorer) if view is not None else 0

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        scores = np.zeros(len(positions), dtype=np.int64)
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return scores
        cycle = self._cycle(state)
        for i, pos in enumerate(positions.tolist()):
            info = snapshot.info(pos)
            view = self._view_in(cycle, info.name, pos)
            if view is not None:
                scores[i] = allocator_score(pre.pod, view.devices.groups, self.scorer)
        return scores

    def score_extensions(self) -> DeviceShare:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(100, False, scores)
        return SUCCESS

    # ----- Reserve / PreBind -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return SUCCESS
        view = self._view(state, node_name, self._position(node_name))
        if view is None:
            return SUCCESS
        chosen = self._allocate(pre.pod, view, self._affinity(state, node_name)[1])
        if isinstance(chosen, Status):
            return chosen
        chosen = name_template(chosen, pre, self._snapshot.node_info(node_name) if self._snapshot else None)
        key = resv.holding_key(pod)
        self.cache.assign(key, node_name, chosen, reservation=view.reservation)
        name = resv.reservation_name(pod) if resv.is_reserve_pod(pod) else ""
        state.write(RESERVE_KEY, ReserveState(node_name, chosen, name))
        self.placements[key] = (node_name, chosen)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if state.get(RESERVE_KEY) is not None:
            state.delete(RESERVE_KEY)
            key = resv.holding_key(pod)
            self.cache.unassign(key)
            self.placements.pop(key, None)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reserved = state.get(RESERVE_KEY)
        if reserved is None or reserved.reservation:
            return SUCCESS  # a reserve pod's devices go on its Reservation (pre_bind_reservation)
        if self._cluster is None:
            return error("DeviceShare: no cluster client to write the device allocation")
        value = encode_device_allocations(reserved.allocations)
        await patch_at_pre_bind(state, self._cluster, pod, annotations={ANNOTATION_DEVICE_ALLOCATED: value})
        return SUCCESS

    async def pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status:
        """``PreBindReservation``: the reserve pod's devices as ``device-allocated`` on the Reservation."""
        reserved = state.get(RESERVE_KEY)
        if reserved is None or not reserved.reservation:
            return SUCCESS
        if self._cluster is None:
            return error("DeviceShare: no cluster client to write the device allocation")
        body = {
            "metadata": {"annotations": {ANNOTATION_DEVICE_ALLOCATED: encode_device_allocations(reserved.allocations)}}
        }
        try:
            await self._cluster.patch_object(RESERVATION_KIND, reserved.reservation, body)
        except ClusterError as exc:
            return error(f"writing {ANNOTATION_DEVICE_ALLOCATED} of Reservation {reserved.reservation}: {exc}")
        return SUCCESS

    # ----- queue -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL)),
        )

    # ----- simulate -----

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        """Which devices each pod (and Reservation) this scheduler placed got."""
        return "DeviceShare allocations", allocation_rows(self.placements)

    def devices_report(self) -> tuple[str, list[dict[str, Any]]]:
        """Every node's Device object: devices by type (healthy/total)."""
        return "Devices", device_rows(self.cache.devices, _ALLOCATED_TYPES)

    def api_routes(self) -> Sequence[ApiRoute]:
        """``/apis/v1/plugins/DeviceShare/nodeDeviceSummaries[/:name]`` (:mod:`.service`)."""
        return service.routes(self)


def new(args: DeviceShareArgs | None, handle: Handle) -> DeviceShare:
    plugin = DeviceShare(args or DeviceShareArgs(), handle.cluster, handle.snapshot)
    handle.watch(DEVICE_OBJECT_KIND, plugin.on_device)
    handle.watch(RESERVATION_KIND, plugin.on_reservation)
    handle.watch_pods(plugin.on_pod)
    handle.watch(config_map_kind(plugin.args.templates_config()), plugin.templates.on_config_map)
    handle.register_forget_pod_handler(plugin.on_forget_pod)
    handle.add_simulation_report(plugin.simulation_report)
    handle.add_simulation_report(plugin.devices_report)
    return plugin


def declared_capabilities(
    plugin: DeviceShare,
) -> tuple[
    PreFilterExtensions,
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    BatchScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    ReservationPreBindPlugin,
    NUMAHintProvider,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin


_services: type[APIServiceProvider] = DeviceShare
"""The ``/apis/v1`` routes (not one of the framework's extension points, so not in the list above)."""
