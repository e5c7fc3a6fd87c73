"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` package does it.

Several replicas may run; only the one holding the Lease schedules. The rules (``tryAcquireOrRenew``):

- The Lease is free when it does not exist, has no holder, or its record has not changed for
  ``leaseDurationSeconds`` as measured on *this* process's clock since it last saw the record change
  (never by comparing ``renewTime`` with the local clock, so clock skew between replicas is harmless).
- Taking it writes ``holderIdentity``, ``acquireTime``, ``renewTime`` and ``leaseTransitions + 1`` with
  the read ``resourceVersion``; of two replicas racing, one gets ``409 Conflict`` and stays a candidate.
- The leader renews every ``retryPeriod``. If no renewal succeeds within ``renewDeadline`` it has lost
  the Lease and must stop scheduling at once (kube-scheduler exits): by then another replica may take
  over, since ``leaseDuration > renewDeadline``.
- A candidate reads a Lease another replica holds four times per ``retryPeriod`` and tries again just
  after it runs out (:meth:`LeaderElector.next_attempt_delay`), so a standby takes over a dead leader
  about a lease duration after its last renewal (client-go's candidate polls once per ``retryPeriod``).
- A leader that stops cleanly releases the Lease (no holder, duration 1 s), so a standby takes over
  within ``retryPeriod`` instead of ``leaseDuration``.

Defaults (``RecommendedDefaultLeaderElectionConfiguration``): 15 s / 10 s / 2 s, Lease
``kube-system/kube-scheduler``. Requests use their own connection pool and no client-side rate limit
(kube-scheduler has a separate clientset for this too), so a flood of binds never delays a renewal.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apis.core.paths import dns1123_label_problem, dns1123_subdomain_problem, shown
from kubeapi.errors import ClusterError
from kubeapi.events import micro_time
from kubeapi.http import ApiError, ApiHttp
from kubeapi.paths import resource_path

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""Candidates retry after ``retryPeriod * (1 + random() * (JITTER_FACTOR - 1))`` (``wait.JitterUntil``)."""


EXPIRY_MARGIN = 0.05
OBSERVE_FRACTION = 0.25
"""A candidate reads a Lease another replica holds every ``retryPeriod * OBSERVE_FRACTION`` (jittered)."""
"""Seconds after an observed Lease runs out at which a candidate tries again
(:meth:`LeaderElector.next_attempt_delay`)."""


def default_identity() -> str:
    """``<hostname>_<uuid>``, kube-scheduler's identity."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionOptions:
    """Durations in seconds; ``lease_duration > renew_deadline > retry_period * JITTER_FACTOR``."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    namespace: str = "kube-system"
    name: str = "kube-scheduler"
    identity: str = ""
    release_on_cancel: bool = True

    def validate(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if problem := dns1123_label_problem(self.namespace):
            raise ValueError(f"resourceNamespace {shown(self.namespace)}: {problem}")
        if problem := dns1123_subdomain_problem(self.name):
            raise ValueError(f"resourceName {shown(self.name)}: {problem}")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    lease_duration: int
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.lease_duration,
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.transitions,
        }


class LeaderElector:
    """Acquires, renews and releases one Lease. Use on the event loop:

    ``await elector.acquire()`` (returns once leading), then ``await elector.hold()`` (returns when the
    Lease is lost), and ``await elector.release()`` on a clean shutdown.
    """

    def __init__(
        self,
        http: ApiHttp,
        options: LeaderElectionOptions,
        *,
        on_change: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        options.validate()
        self.http = http
        self.options = options
        self.identity = options.identity or default_identity()
        self.on_change = on_change
        self.clock = clock
        self.monotonic = monotonic
        self.is_leader = False
        self.observed: LeaseRecord | None = None
        self.observed_time = 0.0
        self.last_renewed = 0.0
        self._lease: dict[str, Any] | None = None

    @property
    def _duration_seconds(self) -> int:
        """``leaseDurationSeconds`` is an integer: at least one second."""
        return max(1, round(self.options.lease_duration))

    @property
    def path(self) -> str:
        """The Leases collection of the lease's namespace."""
        return resource_path("coordination.k8s.io", "v1", "leases", namespace=self.options.namespace)

    @property
    def lease_path(self) -> str:
        return resource_path(
            "coordination.k8s.io", "v1", "leases", namespace=self.options.namespace, name=self.options.name
        )

    async def acquire(self) -> None:
        """Try every ``retryPeriod`` (jittered) until this process holds the Lease."""
        log.info(
            "attempting to acquire leader lease %s/%s as %s", self.options.namespace, self.options.name, self.identity
        )
        while not await self.try_acquire_or_renew():
            await asyncio.sleep(self.next_attempt_delay(random.random()))
        log.info("successfully acquired lease %s/%s", self.options.namespace, self.options.name)

    def next_attempt_delay(self, jitter: float) -> float:
        """Seconds until a candidate tries again: ``retryPeriod`` jittered (``jitter`` in [0, 1)); a quarter
        of that while another replica holds the Lease, and less when that Lease runs out sooner by this
        process's observation (the attempt then comes just after it runs out). A standby so takes over a
        dead leader's Lease about when its duration is up, where client-go's candidate may wait up to two
        retry periods more; the price is a GET of one Lease every half second or so per standby. The rule
        for taking the Lease is unchanged."""
        period = self.options.retry_period * (1.0 + jitter * (JITTER_FACTOR - 1.0))
        observed = self.observed
        if observed is None or not observed.holder or observed.holder == self.identity:
            return period
        # While another replica holds it, read it OBSERVE_FRACTION as often: the Lease runs out a lease
        # duration after this process *saw* the last renewal, so seeing renewals sooner shortens the wait
        # after a leader dies (from up to a whole retry period to a fraction of one).
        period *= OBSERVE_FRACTION
        runs_out_in = self.observed_time + observed.lease_duration - self.monotonic()
        if 0.0 <= runs_out_in < period:
            return runs_out_in + EXPIRY_MARGIN
        return period

    async def hold(self) -> None:
        """Renew every ``retryPeriod``; return when no renewal succeeded for ``renewDeadline``."""
        while True:
            await asyncio.sleep(self.options.retry_period)
            deadline = self.monotonic() + self.options.renew_deadline
            while True:
                remaining = deadline - self.monotonic()
                renewed = False
                if remaining > 0:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that
                    # arrives as the renewal completes, and this loop would then never end.
                    try:
                        async with asyncio.timeout(remaining):
                            renewed = await self.try_acquire_or_renew()
                    except TimeoutError:
                        renewed = False
                if renewed:
                    break
                if self.monotonic() >= deadline:
                    log.error(
                        "failed to renew lease %s/%s within %.1fs: leadership lost",
                        self.options.namespace,
                        self.options.name,
                        self.options.renew_deadline,
                    )
                    self._set_leader(False)
                    return
                await asyncio.sleep(min(self.options.retry_period, max(0.0, deadline - self.monotonic())))

    async def release(self) -> None:
        """Give the Lease up if held (best effort; a failure only delays the successor)."""
        if not self.is_leader or self._lease is None or not self.options.release_on_cancel:
            return
        now = micro_time(self.clock())
        record = LeaseRecord("", 1, now, now, self.observed.transitions if self.observed else 0)
        lease = {**self._lease, "spec": {**(self._lease.get("spec") or {}), **record.spec()}}
        try:
            await self.http.request_json("PUT", self.lease_path, body=lease)
        except ClusterError as err:
            log.warning("releasing lease %s/%s failed: %s", self.options.namespace, self.options.name, err)
        else:
            log.info("released lease %s/%s", self.options.namespace, self.options.name)
        self._set_leader(False)

    def healthy(self, *, grace: float = 20.0) -> bool:
        """False when leading but no renewal has succeeded for ``leaseDuration + grace`` (client-go's
        ``HealthzAdaptor``): the renew loop is stuck."""
        if not self.is_leader:
            return True
        return self.monotonic() - self.last_renewed <= self.options.lease_duration + grace

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the Lease afterwards. Never raises ClusterError."""
        try:
            return await self._try_acquire_or_renew()
        except ClusterError as err:
            log.info("lease %s/%s: %s", self.options.namespace, self.options.name, err)
            return False

    async def _try_acquire_or_renew(self) -> bool:
        now_mono = self.monotonic()
        now = micro_time(self.clock())
        name = self.options.name
        try:
            lease: dict[str, Any] = await self.http.request_json("GET", self.lease_path)
        except ApiError as err:
            if not err.not_found:
                raise
            record = LeaseRecord(self.identity, self._duration_seconds, now, now, 0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": self.options.namespace},
                "spec": record.spec(),
            }
            try:
                self._lease = await self.http.request_json("POST", self.path, body=body)
            except ApiError as create_err:
                if create_err.conflict:
                    return False  # someone else created it first
                raise
            self._observe(record, now_mono)
            self._renewed(now_mono)
            return True

        old = LeaseRecord.from_lease(lease)
        if self.observed != old:
            self._observe(old, now_mono)
        held_by_other = old.holder and old.holder != self.identity
        if held_by_other and self.observed_time + old.lease_duration > now_mono:
            if self.is_leader:
                self._set_leader(False)
            return False
        if old.holder == self.identity and self.is_leader:
            record = LeaseRecord(self.identity, self._duration_seconds, old.acquire_time, now, old.transitions)
        else:
            transitions = old.transitions + 1 if old.holder else old.transitions
            record = LeaseRecord(self.identity, self._duration_seconds, now, now, transitions)
        lease["spec"] = {**(lease.get("spec") or {}), **record.spec()}
        try:
            self._lease = await self.http.request_json("PUT", self.lease_path, body=lease)
        except ApiError as err:
            if err.conflict:
                return False
            raise
        self._observe(record, now_mono)
        self._renewed(now_mono)
        return True

    def _observe(self, record: LeaseRecord, now_mono: float) -> None:
        self.observed = record
        self.observed_time = now_mono

    def _renewed(self, now_mono: float) -> None:
        self.last_renewed = now_mono
        if not self.is_leader:
            self._set_leader(True)

    def _set_leader(self, leader: bool) -> None:
        if leader == self.is_leader:
            return
        self.is_leader = leader
        if leader:
            log.info("became leader (%s)", self.identity)
        if self.on_change is not None:
            self.on_change(leader)
