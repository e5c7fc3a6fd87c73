"""GPU partitions (Koordinator ``deviceshare/allocator_gpu.go`` ``allocateByPartition``,
``allocator_gpu_helper.go``, ``apis/extension/device_share.go``), pure.

A partition is a set of GPUs meant to be given together (linked by NVLink, say). A node's partition
table comes from its Device object's ``scheduling.koordinator.sh/gpu-partitions`` annotation (JSON:
number of GPUs → partitions ``{"minors": [...], "gpuLinkType": "NVLink", "ringBusBandwidth": "400Gi",
"allocationScore": 1}``), else, for NVIDIA H100, H800 and H20 nodes (``node.koordinator.sh/gpu-model``),
Koordinator's built-in Hopper table (pairs 0-1, 2-3..., quads 0-3 and 4-7, all 8). The table is honored
(a pod's whole GPUs must form one partition) when the Device object, or else the Node, is labelled
``node.koordinator.sh/gpu-partition-policy: Honor``, or the pod asks with
``scheduling.koordinator.sh/gpu-partition-spec``; otherwise (``Prefer``) a partition is taken when one
fits, else the GPUs are chosen as without a table.

For a pod of n whole GPUs: the partitions of n GPUs, by group of equal ``allocationScore`` (ascending,
as Koordinator sorts them), whose GPUs are all free and healthy and whose ring-bus bandwidth covers the
pod's; the first group with any (only the first group, ``allocatePolicy: Restricted``). Among them the
one that leaves most bigger partitions whole (``selectPartitionByBinPack``: for 8-, 4- and 2-GPU
partitions at least as big as the pod's, 10000, 100 and 1 per untouched partition times its score);
the first one on ties. A shared GPU never uses partitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.core.quantity import value as quantity_value
from koord_scheduler.plugins.deviceshare.allocation import DeviceState
from koord_scheduler.plugins.deviceshare.request import GPURequest

ANNOTATION_GPU_PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"
ANNOTATION_GPU_PARTITION_SPEC = "scheduling.koordinator.sh/gpu-partition-spec"
LABEL_GPU_PARTITION_POLICY = "node.koordinator.sh/gpu-partition-policy"
HONOR = "Honor"
RESTRICTED = "Restricted"
NVLINK = "NVLink"
HOPPER_MODELS = frozenset({"H100", "H800", "H20"})
ERR_MISSING_TABLE = "node(s) missing GPU Partition Table"
ERR_UNSUPPORTED_COUNT = "node(s) Unsupported number of GPU requests"
ERR_INSUFFICIENT = "Insufficient Partitioned GPU Devices"
_BIN_PACK = ((8, 10000), (4, 100), (2, 1))


@dataclass(frozen=True, slots=True)
class Partition:
    minors: tuple[int, ...]
    link_type: str = ""
    ring_bus_bandwidth: int | None = None
    allocation_score: int = 0

    @property
    def mask(self) -> int:
        mask = 0
        for m in self.minors:
            mask |= 1 << m
        return mask


PartitionIndex = Mapping[int, tuple[tuple[Partition, ...], ...]]
"""Number of GPUs → its partitions grouped by allocation score, ascending."""


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """The pod's ``gpu-partition-spec``."""

    restricted: bool = False
    ring_bus_bandwidth: int | None = None


class PartitionError(ValueError):
    """A malformed partition table or spec; the message names the annotation."""


def index_of(table: Mapping[int, Sequence[Partition]]) -> PartitionIndex:
    """``GetGPUPartitionIndexer``."""
    out: dict[int, tuple[tuple[Partition, ...], ...]] = {}
    for count, partitions in table.items():
        by_score: dict[int, list[Partition]] = {}
        for p in partitions:
            by_score.setdefault(p.allocation_score, []).append(p)
        out[count] = tuple(tuple(by_score[s]) for s in sorted(by_score))
    return out


HOPPER: PartitionIndex = index_of(
    {
        1: [Partition((m,), NVLINK, None, 1) for m in range(8)],
        2: [Partition((m, m + 1), NVLINK, None, 1) for m in range(0, 8, 2)],
        4: [Partition((0, 1, 2, 3), NVLINK, None, 1), Partition((4, 5, 6, 7), NVLINK, None, 1)],
        8: [Partition(tuple(range(8)), NVLINK, None, 1)],
    }
)


def _bandwidth(raw: object, where: str) -> int | None:
    if raw is None:
        return None
    try:
        return quantity_value(raw)  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        raise PartitionError(f"{where}: ringBusBandwidth: {exc}") from None


def parse_partition_table(text: str) -> dict[int, list[Partition]]:
    """The Device's ``gpu-partitions`` annotation. Raises :class:`PartitionError`."""
    where = f"annotation {ANNOTATION_GPU_PARTITIONS}"
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise PartitionError(f"{where}: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise PartitionError(f"{where}: expected an object of GPU counts")
    table: dict[int, list[Partition]] = {}
    for count, partitions in raw.items():
        try:
            n = int(count)
        except ValueError:
            raise PartitionError(f"{where}: {count!r} is no number of GPUs") from None
        if not isinstance(partitions, list):
            raise PartitionError(f"{where}: {count!r} must be a list")
        for p in partitions:
            minors = p.get("minors") if isinstance(p, dict) else None
            if not isinstance(minors, list) or not all(isinstance(m, int) and 0 <= m < 64 for m in minors):
                raise PartitionError(f"{where}: {count!r}: a partition needs minors (0..63)")
            score = p.get("allocationScore", 0)
            if not isinstance(score, int):
                raise PartitionError(f"{where}: {count!r}: allocationScore must be an integer")
            link = p.get("gpuLinkType", "")
            table.setdefault(n, []).append(
                Partition(tuple(minors), str(link), _bandwidth(p.get("ringBusBandwidth"), where), score)
            )
    return table


def partition_spec(annotations: Mapping[str, str]) -> PartitionSpec | None:
    """The pod's ``gpu-partition-spec`` (None without it). Raises :class:`PartitionError` with
    Koordinator's message."""
    text = annotations.get(ANNOTATION_GPU_PARTITION_SPEC)
    if text is None:
        return None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise PartitionError(f"invalid GPUPartitionSpec annotation, err: {exc}") from None
    if not isinstance(raw, dict):
        raise PartitionError("invalid GPUPartitionSpec annotation, err: expected a JSON object")
    policy = raw.get("allocatePolicy") or "BestEffort"
    bandwidth = _bandwidth(raw.get("ringBusBandwidth"), "invalid GPUPartitionSpec annotation, err")
    return PartitionSpec(policy == RESTRICTED, bandwidth)


@dataclass(frozen=True, slots=True)
class NodePartitions:
    index: PartitionIndex | None
    honor: bool


def honored(has_table: bool, device_labels: Mapping[str, str], node_labels: Mapping[str, str]) -> bool:
    """Whether a node's partition table must be honored: the Device's label when the Device carries the
    table, else the Node's."""
    labels = device_labels if has_table else node_labels
    return labels.get(LABEL_GPU_PARTITION_POLICY) == HONOR


def node_partitions(
    table: PartitionIndex | None, device_labels: Mapping[str, str], node_labels: Mapping[str, str]
) -> NodePartitions:
    """The node's partition index and whether it must be honored (see the module docstring)."""
    if table is not None:
        return NodePartitions(table, device_labels.get(LABEL_GPU_PARTITION_POLICY) == HONOR)
    vendor = node_labels.get("node.koordinator.sh/gpu-vendor", "")
    designated = (
        HOPPER
        if vendor in ("", "nvidia") and node_labels.get("node.koordinator.sh/gpu-model") in HOPPER_MODELS
        else None
    )
    return NodePartitions(designated, node_labels.get(LABEL_GPU_PARTITION_POLICY) == HONOR)


@dataclass(frozen=True, slots=True)
class PartitionFailure:
    reason: str
    unresolvable: bool


def _bin_pack_score(used: int, partition: Partition, index: PartitionIndex, wanted: int) -> int:
    allocated = used | partition.mask
    score = 0
    for size, weight in _BIN_PACK:
        if size < wanted:
            continue
        groups = index.get(size)
        if not groups:
            continue
        for p in groups[0]:
            if p.mask & allocated:
                continue
            score += weight * p.allocation_score
    return score


def _bandwidth_ok(spec: PartitionSpec | None, p: Partition) -> bool:
    wanted = spec.ring_bus_bandwidth if spec is not None else None
    return wanted is None or (p.ring_bus_bandwidth is not None and wanted <= p.ring_bus_bandwidth)


def allocate_by_partition(
    gpu: GPURequest, devices: Sequence[DeviceState], index: PartitionIndex | None, spec: PartitionSpec | None
) -> tuple[int, ...] | PartitionFailure | None:
    """The minors of the partition for the pod, a failure, or None (no partition for a shared GPU)."""
    if gpu.shared:
        return None
    if index is None:
        return PartitionFailure(ERR_MISSING_TABLE, True)
    groups = index.get(gpu.count)
    if not groups:
        return PartitionFailure(ERR_UNSUPPORTED_COUNT, True)
    free_mask = used = 0
    for d in devices:
        if any(d.total.values()):
            free_mask |= 1 << d.minor
        if any(d.free.get(k, 0) < v for k, v in d.total.items()):
            used |= 1 << d.minor
    feasible: list[Partition] = []
    for group in groups:
        for p in group:
            if p.mask & used or free_mask & p.mask != p.mask or not _bandwidth_ok(spec, p):
                continue
            feasible.append(p)
        if feasible or (spec is not None and spec.restricted):
            break
    if not feasible:
        return PartitionFailure(ERR_INSUFFICIENT, False)
    if len(feasible) == 1:
        return feasible[0].minors
    best = max(feasible, key=lambda p: _bin_pack_score(used, p, index, gpu.count))  # first wins ties
    return best.minors
