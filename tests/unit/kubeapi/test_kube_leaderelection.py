"""LeaderElector against the in-process fake API server (real HTTP; lease durations on a fake monotonic
clock where the test waits for one, short real durations where ``hold`` runs)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
from fakeapi import FakeApi

from kubeapi import ApiHttp, TokenBucket
from kubeapi.leaderelection import LeaderElectionOptions, LeaderElector

FAST = LeaderElectionOptions(lease_duration=1.0, renew_deadline=0.5, retry_period=0.1)
"""The Lease records whole seconds, so one second is the shortest real lease."""
LEASE_KEY = "kube-system/kube-scheduler"


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def http(api: FakeApi) -> AsyncIterator[ApiHttp]:
    client = ApiHttp(api.connection, TokenBucket(0, 1))
    yield client
    await client.close()


def elector(
    http: ApiHttp, identity: str, changes: list[bool] | None = None, *, monotonic: Callable[[], float] = time.monotonic
) -> LeaderElector:
    options = LeaderElectionOptions(
        lease_duration=FAST.lease_duration,
        renew_deadline=FAST.renew_deadline,
        retry_period=FAST.retry_period,
        identity=identity,
    )
    return LeaderElector(http, options, on_change=None if changes is None else changes.append, monotonic=monotonic)


async def test_the_first_candidate_creates_the_lease(api: FakeApi, http: ApiHttp) -> None:
    changes: list[bool] = []
    a = elector(http, "a", changes)
    await asyncio.wait_for(a.acquire(), 2)
    spec = api.objects["leases"][LEASE_KEY]["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 1, 0)
    assert a.is_leader and changes == [True]


async def test_a_held_lease_is_not_taken_and_renewal_keeps_it(api: FakeApi, http: ApiHttp) -> None:
    now = [0.0]
    a, b = elector(http, "a", monotonic=lambda: now[0]), elector(http, "b", monotonic=lambda: now[0])
    await a.acquire()
    for _ in range(10):  # well past the lease duration, renewed every retry period
        now[0] += FAST.retry_period * 3
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    assert a.is_leader and not b.is_leader


async def test_a_stale_lease_is_taken_over_after_its_duration(api: FakeApi, http: ApiHttp) -> None:
    now = [0.0]
    a, b = elector(http, "a"), elector(http, "b", monotonic=lambda: now[0])
    await a.acquire()  # and then a dies without renewing
    assert not await b.try_acquire_or_renew()  # b sees the lease for the first time: it runs from now
    now[0] = FAST.lease_duration * 0.9
    assert not await b.try_acquire_or_renew()
    now[0] = FAST.lease_duration
    assert await b.try_acquire_or_renew()
    spec = api.objects["leases"][LEASE_KEY]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


async def test_release_hands_over_at_once(api: FakeApi, http: ApiHttp) -> None:
    a, b = elector(http, "a"), elector(http, "b")
    await a.acquire()
    await a.release()
    assert not a.is_leader
    assert api.objects["leases"][LEASE_KEY]["spec"].get("holderIdentity") is None
    assert await b.try_acquire_or_renew()


async def test_hold_returns_when_renewals_fail_for_the_renew_deadline(api: FakeApi, http: ApiHttp) -> None:
    changes: list[bool] = []
    a = elector(http, "a", changes)
    await a.acquire()
    await api.stop()  # the API server goes away
    await asyncio.wait_for(a.hold(), 3)
    assert not a.is_leader and changes == [True, False]


async def test_a_conflicting_write_loses_the_race(api: FakeApi, http: ApiHttp) -> None:
    a, b = elector(http, "a"), elector(http, "b")
    await a.acquire()
    await a.release()
    results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
    assert sorted(results) == [False, True]


@pytest.mark.parametrize(
    ("options", "want"),
    [
        pytest.param(LeaderElectionOptions(lease_duration=10, renew_deadline=10), "leaseDuration", id="lease-le-renew"),
        pytest.param(LeaderElectionOptions(renew_deadline=2, retry_period=2), "retryPeriod*1.2", id="renew-le-retry"),
        pytest.param(
            LeaderElectionOptions(namespace="kube-system/leases/x HTTP/1.1\r\n"),
            "resourceNamespace '",
            id="namespace-not-a-label",
        ),
        pytest.param(LeaderElectionOptions(name="Koord Scheduler"), "resourceName 'Koord Scheduler'", id="bad-name"),
    ],
)
def test_bad_options_are_refused(options: LeaderElectionOptions, want: str) -> None:
    with pytest.raises(ValueError, match=want.replace("*", r"\*")):
        options.validate()


@pytest.mark.parametrize(
    ("holder", "observed_at", "now", "jitter", "want"),
    [
        pytest.param(None, 0.0, 0.0, 0.0, 2.0, id="nothing-observed-retry-period"),
        pytest.param(None, 0.0, 0.0, 1.0, 2.4, id="nothing-observed-full-jitter"),
        pytest.param("other", 100.0, 101.0, 0.5, 0.55, id="held-by-another-read-four-times-as-often"),
        pytest.param("other", 100.0, 114.6, 0.5, 0.45, id="lease-runs-out-sooner-try-just-after"),
        pytest.param("other", 100.0, 115.0, 0.5, 0.05, id="lease-runs-out-now"),
        pytest.param("other", 100.0, 120.0, 0.5, 0.55, id="already-out-read-again-soon"),
        pytest.param("", 100.0, 113.5, 0.0, 2.0, id="released-lease-retry-period"),
        pytest.param("me", 100.0, 113.5, 0.0, 2.0, id="own-lease-retry-period"),
    ],
)
def test_next_attempt_delay(holder: str | None, observed_at: float, now: float, jitter: float, want: float) -> None:
    from kubeapi.leaderelection import LeaseRecord

    options = LeaderElectionOptions(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0, identity="me")
    candidate = LeaderElector(None, options, monotonic=lambda: now)  # type: ignore[arg-type]
    if holder is not None:
        candidate.observed = LeaseRecord(holder, 15, "t", "t", 0)
        candidate.observed_time = observed_at
    assert candidate.next_attempt_delay(jitter) == pytest.approx(want)


async def test_cancelling_hold_as_a_renewal_completes_stops_it(api: FakeApi, http: ApiHttp) -> None:
    """The cancellation must not be lost when it arrives as a renewal finishes (Python 3.11's
    ``asyncio.wait_for`` drops it, and the renew loop would run on forever)."""
    a = elector(http, "a")
    await a.acquire()
    hold = asyncio.ensure_future(a.hold())
    renewals = 0

    async def renew_and_get_cancelled() -> bool:
        nonlocal renewals
        renewals += 1
        hold.cancel()
        return True

    a.try_acquire_or_renew = renew_and_get_cancelled  # type: ignore[method-assign]
    done, _ = await asyncio.wait({hold}, timeout=3)
    assert hold in done and hold.cancelled()
    assert renewals == 1
