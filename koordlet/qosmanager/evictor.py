"""The eviction executor: evicts pods through the Eviction API so PodDisruptionBudgets hold.

Strategies decide *which* pods to evict (a pure victim list); :class:`PodEvictor` does it, and guards:

- a pod evicted less than :data:`DEDUP_SECONDS` ago is not evicted again (it may still be terminating);
- a BE gate (``BEMemoryEvict``, ``BECPUEvict``) evicts only pods labelled ``koordinator.sh/qosClass: BE``;
- each eviction posts ``policy/v1`` ``Eviction`` with a UID precondition (a pod recreated under the same
  name is never hit), records an Event on the pod naming the gate, and counts
  ``koordlet_pod_eviction{node,reason=<gate>}``;
- in dry-run mode it logs and does nothing else.

Koordinator's default kills containers through the CRI and ignores PDBs; here the API
path is the only path. A PDB refusal (HTTP 429) is an outcome, not an error.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from apis.core.paths import api_path
from koordlet.statesinformer import PodMeta
from koordlet.system.clock import Clock, wall_clock
from koordlet.system.errorlog import FailureLog

if TYPE_CHECKING:
    from koordlet.statesinformer.apiloop import ApiLoop
    from kubeapi.http import ApiHttp

log = logging.getLogger("koordlet.evictor")

DEDUP_SECONDS = 120.0
BE_ONLY_GATES = frozenset({"BEMemoryEvict", "BECPUEvict"})
EVENT_SUCCESS, EVENT_FAIL = "evictPodSuccess", "evictPodFail"
"""Koordinator's event reasons (``qosmanager/helpers/reason.go``); both are Warning events there."""
EVICT_REASON_PREFIX = "trigger by koordlet feature "


class EvictionOutcome(StrEnum):
    EVICTED = "evicted"
    DRY_RUN = "dry-run"
    RECENTLY_EVICTED = "recently-evicted"
    NOT_ALLOWED = "not-allowed"
    """The rules forbid this victim (a non-BE pod for a BE gate)."""
    BLOCKED = "blocked"
    """The API server refused: a PodDisruptionBudget does not allow it now (429)."""
    GONE = "gone"
    """The pod no longer exists, or exists under another UID (404/409)."""
    FAILED = "failed"

    @property
    def releases(self) -> bool:
        """Whether the pod's resources count as (being) released."""
        return self in (EvictionOutcome.EVICTED, EvictionOutcome.RECENTLY_EVICTED, EvictionOutcome.GONE)


class EvictionAPI(Protocol):
    """The two API calls the evictor makes. Both raise only for transport failures."""

    def evict(self, namespace: str, name: str, uid: str) -> int:
        """POST the pod's ``eviction`` subresource; returns the HTTP status (201/200 done, 429 PDB, 404 gone)."""
        ...

    def record_event(self, pod: PodMeta, reason: str, message: str, event_type: str) -> None: ...


def eviction_body(namespace: str, name: str, uid: str) -> dict[str, Any]:
    """A ``policy/v1`` Eviction that only applies to the pod with this UID."""
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }


def event_body(pod: PodMeta, reason: str, message: str, event_type: str, *, node: str, now: float) -> dict[str, Any]:
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": "koordlet", "host": node},
        "reportingComponent": "koordlet",
        "reportingInstance": node,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class KubeEvictionAPI:
    """:class:`EvictionAPI` through kubeapi: each POST runs on ``api``'s loop (its request-line and header
    checks, its token bucket) and blocks the calling thread until answered.

    An API error is its HTTP status, returned; a 429 is returned at once, never retried here (a PDB
    refusal is an answer: the evictor passes the pod over and a later round tries again). A transport
    failure, a request refused before sending (a hostile name) or ``timeout`` without an answer raise."""

    def __init__(self, api: ApiLoop, node_name: str, *, clock: Clock = wall_clock, timeout: float = 60.0) -> None:
        self.api = api
        self.node_name = node_name
        self.clock = clock
        self.timeout = timeout

    def _post(self, path: str, body: dict[str, Any]) -> int:
        """POST ``body`` to ``path`` (built by :func:`apis.core.paths.api_path`); the HTTP status."""

        from kubeapi.http import ApiError  # the HTTP stack loads with the first request, not with the plugins

        async def post(http: ApiHttp) -> int:
            try:
                return await http.request_status("POST", path, body=body, retry_throttled=False)
            except ApiError as err:
                return err.status

        return self.api.call(post, timeout=self.timeout)

    def evict(self, namespace: str, name: str, uid: str) -> int:
        path = api_path("", "v1", "pods", namespace=namespace, name=name, subresource="eviction")
        return self._post(path, eviction_body(namespace, name, uid))

    def record_event(self, pod: PodMeta, reason: str, message: str, event_type: str) -> None:
        body = event_body(pod, reason, message, event_type, node=self.node_name, now=self.clock())
        status = self._post(api_path("", "v1", "events", namespace=pod.namespace), body)
        if status >= 300:
            log.warning("event %s on pod %s/%s not recorded: HTTP %d", reason, pod.namespace, pod.name, status)


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    time: float
    namespace: str
    name: str
    uid: str
    gate: str
    outcome: EvictionOutcome
    message: str


class PodEvictor:
    """Evicts pods for the eviction strategies; shared by all of them (one 2-minute memory of evictions)."""

    def __init__(
        self,
        api: EvictionAPI | None,
        *,
        node_name: str,
        metrics_registry: Any = None,
        clock: Clock = wall_clock,
        dry_run: bool = False,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.clock = clock
        self.dry_run = dry_run
        self._evicted: dict[str, float] = {}
        self.failure_log = FailureLog(log)
        self._lock = threading.Lock()
        self.history: list[EvictionRecord] = []
        self._counter: Any = None
        if metrics_registry is not None:
            from prometheus_client import Counter

            self._counter = Counter(
                "koordlet_pod_eviction",
                "Pods evicted by the koordlet, by the feature gate that triggered it",
                ["node", "reason"],
                registry=metrics_registry,
            )

    def recently_evicted(self, uid: str) -> bool:
        with self._lock:
            when = self._evicted.get(uid)
            return when is not None and self.clock() - when < DEDUP_SECONDS

    def _record(self, pod: PodMeta, gate: str, outcome: EvictionOutcome, message: str) -> EvictionOutcome:
        record = EvictionRecord(self.clock(), pod.namespace, pod.name, pod.uid, gate, outcome, message)
        with self._lock:
            self.history.append(record)
            del self.history[:-256]
        level = logging.INFO if outcome in (EvictionOutcome.EVICTED, EvictionOutcome.DRY_RUN) else logging.WARNING
        log.log(level, "evict %s/%s (%s) for %s: %s; %s", pod.namespace, pod.name, pod.uid, gate, outcome, message)
        return outcome

    def evict(self, pod: PodMeta, gate: str, message: str) -> EvictionOutcome:
        """Evict ``pod`` because of ``gate`` (a Koordinator feature-gate name). Never raises."""
        if gate in BE_ONLY_GATES and not pod.labelled_be:
            return self._record(pod, gate, EvictionOutcome.NOT_ALLOWED, f"{pod.qos or pod.kube_qos} is not BE")
        now = self.clock()
        with self._lock:
            for uid in [u for u, t in self._evicted.items() if now - t >= DEDUP_SECONDS]:
                del self._evicted[uid]
            if pod.uid in self._evicted:
                return EvictionOutcome.RECENTLY_EVICTED
        reason = f"{EVICT_REASON_PREFIX}{gate}"
        detail = f"evict Pod:{pod.namespace}/{pod.name}, reason: {reason}, message: {message}"
        if self.dry_run or self.api is None:
            return self._record(pod, gate, EvictionOutcome.DRY_RUN, detail)
        try:
            status = self.api.evict(pod.namespace, pod.name, pod.uid)
        except Exception as err:
            return self._record(pod, gate, EvictionOutcome.FAILED, f"{detail}: {err}")
        if status in (200, 201):
            outcome = EvictionOutcome.EVICTED
            with self._lock:
                self._evicted[pod.uid] = now
            if self._counter is not None:
                self._counter.labels(node=self.node_name, reason=gate).inc()
        elif status in (404, 409):
            # gone (or recreated under another UID): remember it too, so a pod list that still shows it
            # does not make every tick try (and log) again
            with self._lock:
                self._evicted[pod.uid] = now
            log.debug("evict %s/%s for %s: already gone (HTTP %d)", pod.namespace, pod.name, gate, status)
            return EvictionOutcome.GONE
        elif status == 429:
            outcome = EvictionOutcome.BLOCKED
        else:
            outcome = EvictionOutcome.FAILED
        event_reason = EVENT_SUCCESS if outcome is EvictionOutcome.EVICTED else EVENT_FAIL
        event_message = detail if outcome is EvictionOutcome.EVICTED else f"{detail}, error HTTP {status} ({outcome})"
        try:
            self.api.record_event(pod, event_reason, event_message, "Warning")
        except Exception as err:
            self.failure_log.failed("recording an eviction Event", err)
        return self._record(pod, gate, outcome, f"{detail} (HTTP {status})")
