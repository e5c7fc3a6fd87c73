"""DeviceShare: GPU sharing and whole-GPU allocation from the node's ``Device`` object (Koordinator
``pkg/scheduler/plugins/deviceshare``).

- PreFilter reads the pod's device request (:mod:`.request`); a bad combination makes the pod
  unresolvable with Koordinator's message. Pods asking for no device skip every other point. Asking for
  a device type other than GPU (RDMA, FPGA) is unresolvable: such devices are kept in the model and shown
  by ``simulate``, but not allocated.
- Filter, per node: a pod sharing a GPU is kept off nodes whose GPU vendor/model pair is in
  ``gpuShareUnsupportedModels``; otherwise the GPUs must fit (``Insufficient gpu devices``). A node
  without a Device object passes, as in Koordinator (NodeResourcesFit still checks its allocatable).
- Score: Koordinator's node score under ``scoringStrategy`` (:mod:`.allocation`), normalised to 0..100.
- Reserve picks the GPUs and holds them; Unreserve and forgotten pods give them back.
- PreBind writes ``scheduling.koordinator.sh/device-allocated``.

Pods bound elsewhere are accounted from their annotation (pod events); terminal and deleted pods free
their devices.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from apis.config.deviceshare_args import DeviceShareArgs
from apis.core.types import Pod
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_GPU,
    DOMAIN,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    DeviceAllocation,
    decode_device_allocations,
    encode_device_allocations,
    format_device_quantity,
)
from apis.scheduling import GROUP, VERSION
from apis.scheduling.device import DEVICE_KIND, DEVICE_PLURAL, NodeDeviceRecord, parse_device
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.interfaces import (
    EnqueueExtensions,
    FilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from koord_scheduler.framework.pod_patch import patch_at_pre_bind
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import SUCCESS, Status, error, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    ObjectKind,
    PreFilterResult,
    SimulationReporter,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.deviceshare.allocation import Scorer, allocate_gpus, can_allocate, score_node
from koord_scheduler.plugins.deviceshare.cache import DeviceCache
from koord_scheduler.plugins.deviceshare.request import DeviceRequest, DeviceRequestError, parse_device_request
from koord_scheduler.plugins.helpers import default_normalize_score

log = logging.getLogger(__name__)

NAME = names.DEVICE_SHARE
ARGS = DeviceShareArgs

DEVICE_OBJECT_KIND = ObjectKind(
    kind=DEVICE_KIND, group=GROUP, version=VERSION, plural=DEVICE_PLURAL, namespaced=False, parse=parse_device
)

ERR_INSUFFICIENT_GPU = "Insufficient gpu devices"
ERR_UNSUPPORTED_TYPE = "DeviceShare: allocating {} devices is not supported by this scheduler"
ERR_SHARE_UNSUPPORTED = 'model "{}" of vendor "{}" does not support GPU Share'
_INSUFFICIENT = unschedulable(ERR_INSUFFICIENT_GPU)
_NO_GPUS = unresolvable(ERR_INSUFFICIENT_GPU)

_TERMINAL = frozenset({"Succeeded", "Failed"})


class DeviceShareHandle(Protocol):
    """What this plugin uses of the scheduler's handle (a subset of ``ExtendedHandle``)."""

    @property
    def cluster(self) -> ClusterClient: ...

    def watch(self, kind: ObjectKind, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def watch_pods(self, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None: ...

    def add_simulation_report(self, reporter: SimulationReporter) -> None: ...


@dataclass(frozen=True, slots=True)
class PreFilterState:
    request: DeviceRequest


@dataclass(slots=True)
class ReserveState:
    node: str
    allocations: dict[str, tuple[DeviceAllocation, ...]]


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
RESERVE_KEY: StateKey[ReserveState] = StateKey("Reserve" + NAME)


class DeviceShare:
    name = NAME

    def __init__(self, args: DeviceShareArgs, cluster: ClusterClient | None = None) -> None:
        self.args = args
        self.cache = DeviceCache()
        self.scorer = Scorer(args.scoring_strategy.type, {r.name: r.weight for r in args.scoring_strategy.resources})
        self._unsupported = args.unsupported_models()
        self._cluster = cluster
        if not args.disable_device_numa_topology_alignment:
            # Koordinator aligns a pod's devices with NUMA nodes through NodeNUMAResource's topology manager,
            # on nodes whose NUMA topology policy (node.koordinator.sh/numa-topology-policy, or kubelet's
            # in the NodeResourceTopology) is not None; with the default None it does not align either.
            log.warning("DeviceShare: GPUs are allocated without NUMA topology alignment, also on nodes with a "
                        "NUMA topology policy (disableDeviceNumaTopologyAlignment: false asks for it there; "
                        "not implemented)")
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
        self.cache.assign(new.key, new.node_name, {t: tuple(v) for t, v in decoded.items()})

    def on_forget_pod(self, pod: Pod) -> None:
        self.cache.unassign(pod.key)
        self.placements.pop(pod.key, None)

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
            request = parse_device_request(pod.requests)
        except DeviceRequestError as exc:
            return None, unresolvable(str(exc))
        if request is None:
            return None, skip()
        others = request.other_types
        if others:
            return None, unresolvable(ERR_UNSUPPORTED_TYPE.format(", ".join(others)))
        state.write(PRE_FILTER_KEY, PreFilterState(request))
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None

    # ----- Filter -----

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None or pre.request.gpu is None:
            return SUCCESS
        gpu = pre.request.gpu
        node_name = node_info.name
        if gpu.shared and self._unsupported:
            status = self._share_supported(node_info)
            if status is not None:
                return status
        gpus = self.cache.gpus(node_name)
        if gpus is None:
            return SUCCESS
        if not gpus.gpus:
            return _NO_GPUS
        return SUCCESS if can_allocate(gpu, gpus.gpus) else _INSUFFICIENT

    def _share_supported(self, node_info: NodeInfo) -> Status | None:
        labels = node_info.node.labels if node_info.node is not None else {}
        device = self.cache.devices.get(node_info.name)
        vendor = labels.get(LABEL_GPU_VENDOR) or (device.labels.get(LABEL_GPU_VENDOR, "") if device else "")
        model = labels.get(LABEL_GPU_MODEL) or (device.labels.get(LABEL_GPU_MODEL, "") if device else "")
        if (vendor, model) in self._unsupported:
            return unresolvable(ERR_SHARE_UNSUPPORTED.format(model, vendor))
        return None

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        return skip() if pre is None or pre.request.gpu is None else success()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None or pre.request.gpu is None:
            return 0
        gpus = self.cache.gpus(node_info.name)
        return score_node(pre.request.gpu, gpus, self.scorer) if gpus is not None else 0

    def score_extensions(self) -> DeviceShare:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(100, False, scores)
        return SUCCESS

    # ----- Reserve / PreBind -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None or pre.request.gpu is None:
            return SUCCESS
        gpus = self.cache.gpus(node_name)
        if gpus is None:
            return SUCCESS
        chosen = allocate_gpus(pre.request.gpu, gpus.gpus, self.scorer)
        if chosen is None:
            return _INSUFFICIENT
        allocations = {DEVICE_GPU: chosen}
        self.cache.assign(pod.key, node_name, allocations)
        state.write(RESERVE_KEY, ReserveState(node_name, allocations))
        self.placements[pod.key] = (node_name, allocations)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if state.get(RESERVE_KEY) is not None:
            self.cache.unassign(pod.key)
            self.placements.pop(pod.key, None)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reserved = state.get(RESERVE_KEY)
        if reserved is None:
            return SUCCESS
        if self._cluster is None:
            return error("DeviceShare: no cluster client to write the device allocation")
        value = encode_device_allocations(reserved.allocations)
        await patch_at_pre_bind(state, self._cluster, pod, annotations={ANNOTATION_DEVICE_ALLOCATED: value})
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
        """Which devices each pod this scheduler placed got."""
        rows: list[dict[str, Any]] = []
        for key, (node, allocations) in sorted(self.placements.items()):
            for device_type, items in allocations.items():
                for a in items:
                    rows.append(
                        {
                            "pod": key,
                            "node": node,
                            "device": f"{device_type}/{a.minor}",
                            "resources": " ".join(
                                f"{k.removeprefix(DOMAIN)}={v}" for k, v in sorted(_formatted(a).items())
                            ),
                        }
                    )
        return "DeviceShare allocations", rows

    def devices_report(self) -> tuple[str, list[dict[str, Any]]]:
        """Every node's Device object: devices by type (GPUs healthy/total, others counted)."""
        rows: list[dict[str, Any]] = []
        for node, record in sorted(self.cache.devices.items()):
            for device_type in sorted({d.type for d in record.devices}):
                of_type = record.of_type(device_type)
                healthy = sum(1 for d in of_type if d.health)
                note = "" if device_type == DEVICE_GPU else "not allocated by this scheduler"
                rows.append({"node": node, "type": device_type, "healthy": f"{healthy}/{len(of_type)}", "note": note})
        return "Devices", rows


def _formatted(a: DeviceAllocation) -> dict[str, str]:
    return {k: format_device_quantity(k, v) for k, v in a.resources.items()}


def new(args: DeviceShareArgs | None, handle: DeviceShareHandle) -> DeviceShare:
    plugin = DeviceShare(args or DeviceShareArgs(), handle.cluster)
    handle.watch(DEVICE_OBJECT_KIND, plugin.on_device)
    handle.watch_pods(plugin.on_pod)
    handle.register_forget_pod_handler(plugin.on_forget_pod)
    handle.add_simulation_report(plugin.simulation_report)
    handle.add_simulation_report(plugin.devices_report)
    return plugin


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = DeviceShare
    _filter: type[FilterPlugin] = DeviceShare
    _pre_score: type[PreScorePlugin] = DeviceShare
    _score: type[ScorePlugin] = DeviceShare
    _reserve: type[ReservePlugin] = DeviceShare
    _pre_bind: type[PreBindPlugin] = DeviceShare
    _enqueue: type[EnqueueExtensions] = DeviceShare
