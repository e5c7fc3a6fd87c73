"""Arbitration of PodMigrationJobs before they run: Koordinator's arbitrator filters
(``pkg/descheduler/controllers/migration/arbitrator/filter.go``) and object limiters
(``controllers/migration/controller.go`` ``checkPodExceedObjectLimiter``/``trackEvictedPod``), as pure
functions over what the informers show.

A Pending job's pod is checked once it exists:

- **non-retryable** (the job fails, ``ForbiddenMigratePod``): the eviction gates
  (:func:`..evictor.eviction_filter`) and the expected-replicas check (a workload of one replica, or one
  whose ``maxMigratingPerWorkload`` or ``maxUnavailablePerWorkload`` is all its replicas, is never
  migrated, unless ``skipCheckExpectedReplicas``);
- **retryable** (the job stays Pending and is looked at again): ``maxMigratingGlobally``,
  ``maxMigratingPerNode`` (default 2), ``maxMigratingPerNamespace``, ``maxMigratingPerWorkload`` and
  ``maxUnavailablePerWorkload`` (the workload's unavailable pods plus its migrating ones), then the object
  limiters.

"Migrating" means an unfinished, Running job for another pod (a job leaves Pending only by passing
arbitration, which Koordinator marks with an annotation). A pod with the
``descheduler.alpha.kubernetes.io/evict`` annotation passes every filter, as in Koordinator. Each filter
named in ``skipEvictionGates`` is skipped.

A workload's expected replicas are the active (not terminal, not terminating) pods its controller owns as
the informer shows them; Koordinator reads the workload's ``spec.replicas`` (docs/descheduling.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from apis.config.descheduler import MigrationControllerArgs
from apis.config.duration import parse_go_duration
from apis.core.types import Pod
from koord_scheduler.descheduler.evictor import EvictionFilter, eviction_filter

EVICT_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/evict"
GATE_MAX_MIGRATING_GLOBALLY: Final = "MaxMigratingGlobally"
GATE_MAX_MIGRATING_PER_NODE: Final = "MaxMigratingPerNode"
GATE_MAX_MIGRATING_PER_NAMESPACE: Final = "MaxMigratingPerNamespace"
GATE_MAX_MIGRATING_PER_WORKLOAD: Final = "MaxMigratingPerWorkload"
GATE_MAX_UNAVAILABLE_PER_WORKLOAD: Final = "MaxUnavailablePerWorkload"
GATE_EXPECTED_REPLICAS: Final = "ExpectedReplicas"
DEFAULT_MAX_MIGRATING_PER_NODE: Final = 2
LIMITER_WORKLOAD: Final = "workload"
LIMITER_NAMESPACE: Final = "namespace"
DEFAULT_WORKLOAD_LIMITER_SECONDS: Final = 300.0


ANNOTATION_PASSED_ARBITRATION: Final = "descheduler.koordinator.sh/passed-arbitration"
"""Set to ``"true"`` on a job an arbitration pass let through (Koordinator's ``arbitrator.go``
``updatePassedJob``), so a new leader does not arbitrate it again and counts its pod as migrating."""


def scaled_limit(replicas: int, value: int | str | None) -> int:
    """Koordinator's ``GetMaxUnavailable``/``GetMaxMigrating``: an int or a percentage of ``replicas``
    (rounded down); a given value that comes to 0 is 1; unset is 10% above 10 replicas, 2 for 4 to 10 and 1
    below; never more than ``replicas``. Raises ``ValueError`` for a malformed percentage."""
    out = 0
    if value is not None:
        out = _scaled(replicas, value) or 1
    else:
        out = math.floor(replicas * 10 / 100) if replicas > 10 else 2 if replicas >= 4 else 1
    return min(out, replicas)


def _scaled(replicas: int, value: int | str) -> int:
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        return int(text)
    return math.floor(replicas * int(text[:-1]) / 100)


def is_active(pod: Pod) -> bool:
    return not pod.is_terminal and pod.meta.deletion_timestamp is None


def is_available(pod: Pod) -> bool:
    """Active and Ready (``kubecontroller.IsPodActive && podutil.IsPodReady``)."""
    return is_active(pod) and pod.conditions.get("Ready") == "True"


def controller_uid(pod: Pod) -> str:
    for owner in pod.meta.owner_references:
        if owner.controller:
            return owner.uid
    return ""


@dataclass(frozen=True, slots=True)
class Limits:
    """The MigrationControllerArgs fields arbitration reads, defaulted as Koordinator's."""

    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = DEFAULT_MAX_MIGRATING_PER_NODE
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: int | str | None = None
    max_unavailable_per_workload: int | str | None = None
    skip_check_expected_replicas: bool = False
    skip: frozenset[str] = frozenset()

    @classmethod
    def of(cls, args: MigrationControllerArgs) -> Limits:
        return cls(
            max_migrating_globally=args.max_migrating_globally,
            max_migrating_per_node=args.max_migrating_per_node
            if args.max_migrating_per_node is not None
            else DEFAULT_MAX_MIGRATING_PER_NODE,
            max_migrating_per_namespace=args.max_migrating_per_namespace,
            max_migrating_per_workload=args.max_migrating_per_workload,
            max_unavailable_per_workload=args.max_unavailable_per_workload,
            skip_check_expected_replicas=bool(args.skip_check_expected_replicas),
            skip=frozenset(args.skip_eviction_gates or ()),
        )


def expected_replicas_reason(pod: Pod, workload: Sequence[Pod], limits: Limits) -> str:
    """Koordinator's ``filterExpectedReplicas`` (non-retryable); empty when the pod passes."""
    if GATE_EXPECTED_REPLICAS in limits.skip or limits.skip_check_expected_replicas or not controller_uid(pod):
        return ""
    expected = sum(1 for p in workload if is_active(p))
    max_migrating = scaled_limit(expected, limits.max_migrating_per_workload)
    max_unavailable = scaled_limit(expected, limits.max_unavailable_per_workload)
    if expected in (1, max_migrating, max_unavailable):
        return (
            f"its workload expects {expected} replicas and allows {max_migrating} migrating, "
            f"{max_unavailable} unavailable"
        )
    return ""


@dataclass(slots=True)
class MigratingIndex:
    """The pods of the Running jobs (Koordinator's migrating pods), counted the way the retryable filters
    read them, so that arbitrating one job costs O(1) plus its workload instead of a scan of every job.
    :meth:`put` sets (or, with None, removes) the pod one job migrates; every count then excludes the
    entries of the pod being arbitrated (its own job is not counted against it)."""

    pods: dict[str, Pod] = field(default_factory=dict)
    """job name -> the pod it migrates."""
    by_uid: Counter[str] = field(default_factory=Counter)
    by_node: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(node, uid) -> entries; the node's total under (node, "")."""
    by_namespace: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(namespace, uid) -> entries; the namespace's total under (namespace, "")."""
    by_workload: dict[tuple[str, str], Counter[tuple[str, str]]] = field(default_factory=dict)
    """(namespace, controller UID) -> (pod key, uid) -> entries."""

    @classmethod
    def of(cls, pods: Iterable[Pod]) -> MigratingIndex:
        index = cls()
        for i, pod in enumerate(pods):
            index.put(str(i), pod)
        return index

    def put(self, job: str, pod: Pod | None) -> None:
        old = self.pods.pop(job, None)
        if old is not None:
            self._count(old, -1)
        if pod is not None:
            self.pods[job] = pod
            self._count(pod, 1)

    def _count(self, pod: Pod, delta: int) -> None:
        self.by_uid[pod.uid] += delta
        for counter, where in ((self.by_node, pod.node_name), (self.by_namespace, pod.namespace)):
            counter[(where, "")] += delta
            counter[(where, pod.uid)] += delta
        owner = controller_uid(pod)
        if owner:
            workload = self.by_workload.setdefault((pod.namespace, owner), Counter())
            workload[(pod.key, pod.uid)] += delta
            if workload[(pod.key, pod.uid)] <= 0:
                del workload[(pod.key, pod.uid)]
                if not workload:
                    del self.by_workload[(pod.namespace, owner)]

    def total(self, pod: Pod) -> int:
        """Migrating pods other than ``pod``."""
        return len(self.pods) - self.by_uid[pod.uid]

    def on_node(self, pod: Pod) -> int:
        return self.by_node[(pod.node_name, "")] - self.by_node[(pod.node_name, pod.uid)]

    def in_namespace(self, pod: Pod) -> int:
        return self.by_namespace[(pod.namespace, "")] - self.by_namespace[(pod.namespace, pod.uid)]

    def of_workload(self, pod: Pod, owner: str) -> set[str]:
        """Keys of the other migrating pods of ``pod``'s controller."""
        counts = self.by_workload.get((pod.namespace, owner), Counter())
        return {key for (key, uid), n in counts.items() if n > 0 and uid != pod.uid}


def limit_reason(
    pod: Pod,
    migrating: MigratingIndex | Iterable[Pod],
    workload: Sequence[Pod],
    limits: Limits,
) -> str:
    """The retryable filters (module docstring); empty when the pod passes. ``migrating``: the pods of the
    Running jobs (as the informer has them), the pod's own excluded; ``workload``: the pods of the pod's
    controller."""
    index = migrating if isinstance(migrating, MigratingIndex) else MigratingIndex.of(migrating)
    cap = limits.max_migrating_globally
    total = index.total(pod)
    if GATE_MAX_MIGRATING_GLOBALLY not in limits.skip and cap is not None and cap > 0 and total >= cap:
        return f"{total} pods are migrating, maxMigratingGlobally is {cap}"
    cap = limits.max_migrating_per_node
    if GATE_MAX_MIGRATING_PER_NODE not in limits.skip and pod.node_name and cap is not None and cap > 0:
        count = index.on_node(pod)
        if count >= cap:
            return f"{count} pods are migrating from node {pod.node_name}, maxMigratingPerNode is {cap}"
    cap = limits.max_migrating_per_namespace
    if GATE_MAX_MIGRATING_PER_NAMESPACE not in limits.skip and cap is not None and cap > 0:
        count = index.in_namespace(pod)
        if count >= cap:
            return f"{count} pods are migrating in namespace {pod.namespace}, maxMigratingPerNamespace is {cap}"
    return _workload_reason(pod, index, workload, limits)


def _workload_reason(pod: Pod, index: MigratingIndex, workload: Sequence[Pod], limits: Limits) -> str:
    skip_migrating = GATE_MAX_MIGRATING_PER_WORKLOAD in limits.skip
    skip_unavailable = GATE_MAX_UNAVAILABLE_PER_WORKLOAD in limits.skip
    owner = controller_uid(pod)
    if not owner or (skip_migrating and skip_unavailable):
        return ""
    expected = sum(1 for p in workload if is_active(p))
    migrating = index.of_workload(pod, owner)
    if not skip_migrating and migrating:
        cap = scaled_limit(expected, limits.max_migrating_per_workload)
        if len(migrating) >= cap:
            return f"{len(migrating)} pods of its workload are migrating, maxMigratingPerWorkload is {cap}"
    if skip_unavailable:
        return ""
    unavailable = {p.key for p in workload if not is_available(p)} | migrating
    cap = scaled_limit(expected, limits.max_unavailable_per_workload)
    if len(unavailable) >= cap:
        return (
            f"{len(unavailable)} pods of its workload are unavailable or migrating, maxUnavailablePerWorkload is {cap}"
        )
    return ""


@dataclass(slots=True)
class _Bucket:
    rate: float
    burst: int
    tokens: float
    stamp: float
    last_used: float

    def refill(self, now: float) -> None:
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now


@dataclass(frozen=True, slots=True)
class ObjectLimiter:
    """One ``objectLimiters`` entry: at most ``max_migrating`` evictions per ``seconds`` (a token bucket of
    ``burst``, default 1); ``max_migrating`` unset or 0 means the workload's ``maxMigratingPerWorkload``."""

    seconds: float
    max_migrating: int | str | None = None
    burst: int = 1


def object_limiters(args: MigrationControllerArgs) -> dict[str, ObjectLimiter]:
    """``objectLimiters`` with Koordinator's default (a workload limiter over 5 minutes) when none is set.
    Raises ``ValueError`` for a malformed entry (the config loader reports it with its path first)."""
    given: Mapping[str, Any] = args.object_limiters or {}
    if not given:
        return {LIMITER_WORKLOAD: ObjectLimiter(DEFAULT_WORKLOAD_LIMITER_SECONDS)}
    out: dict[str, ObjectLimiter] = {}
    for kind, raw in given.items():
        entry = dict(raw or {})
        duration = entry.get("duration")
        seconds = parse_go_duration(duration) if isinstance(duration, str) else float(duration or 0)
        burst = int(entry.get("burst") or 0) or 1
        out[kind] = ObjectLimiter(seconds, entry.get("maxMigrating"), burst)
    return out


@dataclass(slots=True)
class ObjectLimiters:
    """Koordinator's per-workload and per-namespace eviction limiters. :meth:`exceeded` asks whether the
    next eviction of the pod's workload or namespace would find no token; :meth:`track` takes one after an
    eviction. A limiter unused for 1.5 times its duration is forgotten (Koordinator's limiter cache)."""

    limiters: Mapping[str, ObjectLimiter]
    max_migrating_per_workload: int | str | None = None
    buckets: dict[tuple[str, str], _Bucket] = field(default_factory=dict)

    def _key(self, kind: str, pod: Pod) -> str:
        return controller_uid(pod) if kind == LIMITER_WORKLOAD else pod.namespace if kind == LIMITER_NAMESPACE else ""

    def _rate(self, kind: str, limiter: ObjectLimiter, replicas: int) -> float:
        if kind == LIMITER_NAMESPACE:
            value = limiter.max_migrating
            count = value if isinstance(value, int) else 0
        else:
            value = limiter.max_migrating or self.max_migrating_per_workload
            count = scaled_limit(replicas, value) if replicas > 0 else 0
        return count / limiter.seconds if limiter.seconds > 0 else 0.0

    def _bucket(self, kind: str, key: str, now: float) -> _Bucket | None:
        bucket = self.buckets.get((kind, key))
        if bucket is not None and now - bucket.last_used > 1.5 * self.limiters[kind].seconds:
            del self.buckets[(kind, key)]
            return None
        return bucket

    def exceeded(self, pod: Pod, *, replicas: int, now: float) -> str:
        """Which limiter holds the pod back (``workload``/``namespace``), or empty."""
        for kind, limiter in sorted(self.limiters.items()):
            key = self._key(kind, pod)
            if limiter.seconds <= 0 or not key:
                continue
            bucket = self._bucket(kind, key, now)
            if bucket is None:
                continue
            bucket.rate = self._rate(kind, limiter, replicas) or bucket.rate
            bucket.refill(now)
            if bucket.tokens < 1.0:
                return kind
        return ""

    def track(self, pod: Pod, *, replicas: int, now: float) -> None:
        for kind, limiter in self.limiters.items():
            key = self._key(kind, pod)
            if limiter.seconds <= 0 or not key:
                continue
            rate = self._rate(kind, limiter, replicas)
            if rate <= 0:
                continue
            bucket = self._bucket(kind, key, now)
            if bucket is None:
                bucket = _Bucket(rate, limiter.burst, float(limiter.burst), now, now)
                self.buckets[(kind, key)] = bucket
            bucket.rate = rate
            bucket.refill(now)
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
            bucket.last_used = now


@dataclass(frozen=True, slots=True)
class Verdict:
    """``fail``: why the job must fail (non-retryable); ``wait``: why it stays Pending for now; both empty:
    it may run."""

    fail: str = ""
    wait: str = ""


PASS: Final = Verdict()


@dataclass(slots=True)
class Arbitrator:
    """The arbitration of one MigrationController (built from its args by :meth:`of`)."""

    limits: Limits = field(default_factory=Limits)
    gates: EvictionFilter = field(default_factory=EvictionFilter)
    limiters: ObjectLimiters = field(default_factory=lambda: ObjectLimiters({}))

    @classmethod
    def of(cls, args: MigrationControllerArgs) -> Arbitrator:
        return cls(
            Limits.of(args),
            dataclasses.replace(eviction_filter(args), scheduler_names=frozenset()),
            ObjectLimiters(object_limiters(args), args.max_migrating_per_workload),
        )

    def verdict(
        self, pod: Pod, *, migrating: MigratingIndex | Iterable[Pod], workload: Sequence[Pod], now: float
    ) -> Verdict:
        """The job's verdict for ``pod`` (see the module docstring); ``migrating`` as :func:`limit_reason`."""
        if pod.annotations.get(EVICT_ANNOTATION) is not None:
            return PASS
        reason = self.gates.reason(pod) or expected_replicas_reason(pod, workload, self.limits)
        if reason:
            return Verdict(fail=reason)
        reason = limit_reason(pod, migrating, workload, self.limits)
        if reason:
            return Verdict(wait=reason)
        replicas = sum(1 for p in workload if is_active(p))
        kind = self.limiters.exceeded(pod, replicas=replicas, now=now)
        if kind:
            return Verdict(wait=f"the {kind} object limiter has no token")
        return PASS
