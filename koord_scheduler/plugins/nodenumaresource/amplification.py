"""CPU amplification for bound CPUs (Koordinator ``nodenumaresource`` ``filterAmplifiedCPUs`` and
``scoreWithAmplifiedCPUs``; the ratio is ``node.koordinator.sh/resource-amplification-ratio``).

koord-manager amplifies a node's allocatable cpu by the ratio (``{"cpu": 1.5}``), so a pod's cpu request
counts against amplified capacity. A bound cpuset is whole physical CPUs, though: on such a node a pod
with bound CPUs needs its request * ratio, and the CPUs already bound count * ratio in what the node
has given out. Pods without bound CPUs keep their request as is. NodeResourcesFit knows nothing of the
ratio (as in Koordinator); this check is NodeNUMAResource's Filter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from apis.core import boundedjson
from apis.core.types import CPU
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo
from koord_scheduler.framework.status import Status, success, unresolvable, unschedulable
from koord_scheduler.plugins.nodenumaresource.cache import NodeAllocations
from koord_scheduler.plugins.resource_scoring import ScoredResource

RowScorer = Callable[[Sequence[int], Sequence[int], Sequence[int]], int]

ANNOTATION_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"
ERR_INVALID_RATIO = "node(s) invalid CPU amplification ratio"
ERR_INSUFFICIENT_AMPLIFIED_CPU = "Insufficient amplified cpu"


@lru_cache(maxsize=512)
def _ratios(text: str) -> Mapping[str, float]:
    body = boundedjson.loads(text)
    if not isinstance(body, dict):
        raise ValueError("expected an object of resource name to ratio")
    ratios: dict[str, float] = {}
    for name, value in body.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"ratio of {name!r} is not a number: {value!r}")
        ratios[name] = float(value)
    return ratios


def cpu_ratio(annotations: Mapping[str, str]) -> float:
    """The node's cpu amplification ratio; -1 when none is set (``GetNodeResourceAmplificationRatio``).
    Raises ``ValueError`` for an annotation that is not an object of numbers."""
    text = annotations.get(ANNOTATION_AMPLIFICATION_RATIO)
    if text is None:
        return -1.0
    return _ratios(text).get("cpu", -1.0)


def amplify(amount: int, ratio: float) -> int:
    """``Amplify``: ``ceil(amount * ratio)`` when the ratio is above one, else ``amount``."""
    if ratio <= 1:
        return amount
    return math.ceil(amount * ratio)


def fits_amplified(
    pod_milli: int, request_bind: bool, *, allocatable_milli: int, requested_milli: int, bound_milli: int, ratio: float
) -> bool:
    """``filterAmplifiedCPUs``: whether the pod's cpu fits the node's amplified allocatable.

    ``requested_milli`` is what the node's pods request; ``bound_milli`` is 1000 per CPU bound to cpuset
    pods there, which counts amplified (when the requests cover it).
    """
    if pod_milli == 0 or ratio <= 1:
        return True
    if request_bind:
        pod_milli = amplify(pod_milli, ratio)
    if requested_milli >= bound_milli > 0:
        requested_milli = requested_milli - bound_milli + amplify(bound_milli, ratio)
    return pod_milli <= allocatable_milli - requested_milli


def amplified_requested(requested_milli: int, bound_milli: int, ratio: float) -> int:
    """``scoreWithAmplifiedCPUs``: the node's requested cpu with bound CPUs counted amplified."""
    if ratio <= 1:
        return requested_milli
    return requested_milli - bound_milli + amplify(bound_milli, ratio)


def amplified_filter(
    annotations: Mapping[str, str],
    pod_milli: int,
    request_bind: bool,
    *,
    allocatable_milli: int,
    requested_milli: int,
    bound_milli: int,
) -> Status:
    """Filter's amplification step on one node (success where the node has no ratio above one)."""
    try:
        ratio = cpu_ratio(annotations)
    except ValueError:
        return unresolvable(ERR_INVALID_RATIO)
    if fits_amplified(
        pod_milli,
        request_bind,
        allocatable_milli=allocatable_milli,
        requested_milli=requested_milli,
        bound_milli=bound_milli,
        ratio=ratio,
    ):
        return success()
    return unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU)


def _bound_milli(allocations: NodeAllocations, node: str) -> int:
    return len(allocations.taken(node)[0]) * 1000


def amplified_filter_at(
    snapshot: ClusterSnapshot, allocations: NodeAllocations, node_info: NodeInfo, pod_milli: int, request_bind: bool
) -> Status:
    """:func:`amplified_filter` on a snapshot node."""
    node, pos, col = node_info.node, node_info.position, snapshot.column(CPU)
    if node is None or col is None:
        return success()
    return amplified_filter(
        node.annotations,
        pod_milli,
        request_bind,
        allocatable_milli=snapshot.allocatable.item(pos, col),
        requested_milli=snapshot.requested.item(pos, col),
        bound_milli=_bound_milli(allocations, node.name),
    )


def row_score(
    snapshot: ClusterSnapshot,
    resources: Sequence[ScoredResource],
    pos: int,
    scorer: RowScorer,
    adjust_cpu: Callable[[int], int] | None = None,
) -> int:
    """Node-level score of one node (requested with the pod, over allocatable); ``adjust_cpu`` rewrites
    the node's requested cpu before the pod's is added."""
    cpu_col = snapshot.column(CPU)
    used = []
    for r in resources:
        node_used = (
            snapshot.non_zero_requested.item(pos, r.non_zero_col)
            if r.non_zero_col >= 0
            else snapshot.requested.item(pos, r.column)
        )
        if adjust_cpu is not None and r.column == cpu_col:
            node_used = adjust_cpu(node_used)
        used.append(node_used + r.amount)
    caps = [snapshot.allocatable.item(pos, r.column) for r in resources]
    return scorer(used, caps, [r.weight for r in resources])


def amplified_score(
    snapshot: ClusterSnapshot,
    allocations: NodeAllocations,
    resources: Sequence[ScoredResource],
    node_info: NodeInfo,
    scorer: RowScorer,
) -> int | None:
    """``scoreWithAmplifiedCPUs``: on a node with a cpu ratio above one, the CPUs bound to cpusets count
    amplified in what the node has given out. None where that changes nothing (no ratio, no cpu asked)."""
    node = node_info.node
    if node is None or ANNOTATION_AMPLIFICATION_RATIO not in node.annotations:
        return None
    try:
        ratio = cpu_ratio(node.annotations)
    except ValueError:
        return None
    cpu_col = snapshot.column(CPU)
    if ratio <= 1 or not any(r.column == cpu_col and r.amount for r in resources):
        return None
    bound = _bound_milli(allocations, node.name)
    return row_score(
        snapshot, resources, node_info.position, scorer, lambda used: amplified_requested(used, bound, ratio)
    )
