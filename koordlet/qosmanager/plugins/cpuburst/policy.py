"""CPU burst decisions (Koordinator ``plugins/cpuburst``), as pure functions.

NodeSLO ``cpuBurstStrategy.policy``: ``none`` | ``cpuBurstOnly`` (static ``cpu.cfs_burst_us``) |
``cfsQuotaBurstOnly`` (dynamic quota) | ``auto`` (both). Applies to LS pods (not LSE, LSR or BE).

- Static burst: container ``cfs_burst_us = limit cores * cpuBurstPercent/100 * period``; pod = sum.
- Dynamic quota, per container with a CPU limit: ``base = limit quota``, ``ceil = base *
  cfsQuotaBurstPercent/100``. Throttled → scale up x1.2; the token bucket exhausted → scale down x0.8;
  otherwise remain. The node's shared pool overrides: overloaded (usage >= sharePoolThresholdPercent)
  turns up/remain into down; cooling (>= 90 % of the threshold) or unknown turns up into remain.
  Results are clamped to [base, ceil].
- Write order: pod before containers when the pod's quota grows, containers before the pod when it
  shrinks (cgroup v1 refuses a child quota above its parent's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from apis.core import boundedjson
from apis.extension import LABEL_POD_QOS
from koordlet.qosmanager.executor import ResourceUpdate

NONE, CPU_BURST_ONLY, CFS_QUOTA_BURST_ONLY, AUTO = "none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"
ANNOTATION_CPU_BURST = "koordinator.sh/cpuBurst"
"""Pod annotation: a CPUBurstConfig JSON (``policy``, ``cpuBurstPercent``, ``cfsQuotaBurstPercent``,
``cfsQuotaBurstPeriodSeconds``) laid over the node's ``cpuBurstStrategy``."""
_BURST_FIELDS = {
    "policy": "policy",
    "cpuBurstPercent": "cpu_burst_percent",
    "cfsQuotaBurstPercent": "cfs_quota_burst_percent",
    "cfsQuotaBurstPeriodSeconds": "cfs_quota_burst_period_seconds",
}


@dataclass(frozen=True, slots=True)
class BurstConfig:
    """One pod's burst settings (the node's ``cpuBurstStrategy`` with the pod's annotation over it)."""

    policy: str = NONE
    cpu_burst_percent: int = 1000
    cfs_quota_burst_percent: int = 300
    cfs_quota_burst_period_seconds: int = -1


def burstable_by_label(labels: Mapping[str, str]) -> bool:
    """Koordinator's ``IsPodCPUBurstable``: the raw ``koordinator.sh/qosClass`` label is not LSR, LSE or BE.
    An unlabelled pod is burstable whatever its Kubernetes QoS (a Guaranteed pod included)."""
    return labels.get(LABEL_POD_QOS) not in ("LSR", "LSE", "BE")


def pod_burst_config(node: BurstConfig, annotation: str | None) -> tuple[BurstConfig, str | None]:
    """``node`` with the pod annotation's fields over it (JSON overlay, as ``genPodBurstConfig``).

    Returns (config, problem): an unparsable annotation gives the node's config and a one-line problem.
    """
    if annotation is None:
        return node, None
    try:
        data = boundedjson.loads(annotation)
    except ValueError as err:
        return node, f"annotation {ANNOTATION_CPU_BURST} is not JSON: {err}"
    if not isinstance(data, dict):
        return node, f"annotation {ANNOTATION_CPU_BURST}: want a JSON object"
    changes: dict[str, object] = {}
    for wire, attr in _BURST_FIELDS.items():
        value = data.get(wire)
        if value is None:
            continue
        if attr == "policy" and not isinstance(value, str):
            return node, f"annotation {ANNOTATION_CPU_BURST}: policy must be a string"
        if attr != "policy" and (isinstance(value, bool) or not isinstance(value, int)):
            return node, f"annotation {ANNOTATION_CPU_BURST}: {wire} must be an integer"
        changes[attr] = value
    return replace(node, **changes), None  # type: ignore[arg-type]


SCALE_UP, SCALE_DOWN = 1.2, 0.8
COOLING_FRACTION = 0.9
LIMITER_REFILL_BELOW_PERCENT = 60


def policy_switches(policy: str | None) -> tuple[bool, bool]:
    """(static cfs burst on, dynamic quota burst on) for a policy name; unknown names are ``none``."""
    return policy in (CPU_BURST_ONLY, AUTO), policy in (CFS_QUOTA_BURST_ONLY, AUTO)


def container_cfs_burst_us(limit_milli: float, cpu_burst_percent: int, period_us: int) -> int:
    return int(limit_milli / 1000 * cpu_burst_percent / 100 * period_us)


class PoolState(StrEnum):
    IDLE = "idle"
    COOLING = "cooling"
    OVERLOAD = "overload"
    UNKNOWN = "unknown"


def share_pool_state(
    node_used_milli: float | None,
    exclusive_used_milli: float,
    capacity_milli: float,
    exclusive_request_milli: float,
    threshold_percent: int,
) -> PoolState:
    """``usage = (node used - LSE/LSR/BE used) / (CPUs - LSE/LSR requests)`` against the threshold."""
    if node_used_milli is None:
        return PoolState.UNKNOWN
    pool = capacity_milli - exclusive_request_milli
    if pool <= 0:
        return PoolState.OVERLOAD
    usage = (node_used_milli - exclusive_used_milli) / pool
    threshold = threshold_percent / 100
    if usage >= threshold:
        return PoolState.OVERLOAD
    if usage >= COOLING_FRACTION * threshold:
        return PoolState.COOLING
    return PoolState.IDLE


class Operation(StrEnum):
    UP = "scaleUp"
    DOWN = "scaleDown"
    REMAIN = "remain"
    RESET = "reset"


def container_operation(
    throttled_ratio: float | None, limiter_allows: bool, pool: PoolState, enabled: bool
) -> Operation:
    if not enabled:
        return Operation.RESET
    if not limiter_allows:
        op = Operation.DOWN
    elif throttled_ratio is not None and throttled_ratio > 0:
        op = Operation.UP
    else:
        op = Operation.REMAIN
    if pool is PoolState.OVERLOAD and op in (Operation.UP, Operation.REMAIN):
        return Operation.DOWN
    if pool in (PoolState.COOLING, PoolState.UNKNOWN) and op is Operation.UP:
        return Operation.REMAIN
    return op


def scaled_quota(current_us: int, base_us: int, burst_percent: int, op: Operation) -> int:
    """The container's next quota, clamped to ``[base, base * burst_percent/100]``."""
    ceil = int(base_us * burst_percent / 100)
    if op is Operation.RESET or current_us <= 0:
        return base_us
    value = current_us
    if op is Operation.UP:
        value = int(current_us * SCALE_UP)
    elif op is Operation.DOWN:
        value = int(current_us * SCALE_DOWN)
    return min(max(value, base_us), max(ceil, base_us))


@dataclass(frozen=True, slots=True)
class TokenBucket:
    """Koordinator's burst limiter: capacity ``period * (burstPercent - 100)`` percent-seconds."""

    capacity: float
    tokens: float
    last_time: float

    def step(self, usage_percent: float, now: float) -> tuple[TokenBucket, bool]:
        """Spend ``usage% - 100`` per second above the limit, refill ``100 - usage%`` per second below 60 %."""
        seconds = max(now - self.last_time, 0.0)
        tokens = self.tokens
        if usage_percent >= 100:
            tokens -= (usage_percent - 100) * seconds
        elif usage_percent < LIMITER_REFILL_BELOW_PERCENT:
            tokens = min(tokens + (100 - usage_percent) * seconds, self.capacity)
        bucket = TokenBucket(self.capacity, tokens, now)
        return bucket, tokens > 0


def quota_write_plan(
    pod_dir: str, pod_old_us: int, pod_new_us: int, containers: Sequence[tuple[str, int]], owner: str
) -> list[ResourceUpdate]:
    """Pod first when growing, containers first when shrinking (or unchanged)."""
    pod = [ResourceUpdate("cpu.cfs_quota_us", pod_dir, str(pod_new_us), owner)]
    children = [ResourceUpdate("cpu.cfs_quota_us", d, str(q), owner) for d, q in containers]
    growing = pod_new_us < 0 or (pod_old_us > 0 and pod_new_us > pod_old_us)
    return pod + children if growing else children + pod
