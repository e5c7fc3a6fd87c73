"""What binding a plain pod costs the API server, counted by kube-apiserver itself, and how far its
``Scheduled`` Event trails the bind.

One koord-scheduler run per profile (the default profile, and the default plus the Reservation plugin, as
the chart's profile has it, so its lifecycle controller runs too; the test default
``--controllers=reservation``) binds :data:`PODS` plain pending pods created before it starts.
kube-apiserver's request counters are read before it starts and once every Event is written
(tests/integration/apiserver_requests.py), with this test's own requests taken out (a watch of the pods,
open at both readings, its restarts, and the lists counting the Events), so the difference is the
scheduler's, plus whatever kwok and kube-apiserver's own loopback clients do meanwhile (a lease renewal
now and then).

How far the Events trail the binds: from the moment this test's watch sees the last pod bound to the
moment a list (read from etcd) first shows every ``Scheduled`` Event, polled every 50 ms.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from apiserver_requests import RequestCounts, RequestKey, client_request_key, parse_request_counts, per_pod
from controlplane import ControlPlane
from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

PODS = 1000
NODES = 25
BIND = RequestKey("POST", "pods/binding")
EVENT = RequestKey("POST", "events.events.k8s.io")
EVENT_LIST = RequestKey("LIST", "events.events.k8s.io")
OTHER_REQUESTS_PER_POD = 0.15
"""Everything but the bind and the Event, per pod: the start-up lists (a couple of dozen kinds), kwok's and
kube-apiserver's own background. One more request per pod would be 1.0."""
RESERVATION_PLUGINS = {
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}
MAX_EVENT_LAG_SECONDS = 1.0
"""kube-scheduler's Events trail its binds by well under 0.3 s; seconds would mean Events held back."""


class Follow:
    """Watches one collection from a thread and records when each object first passes ``seen``
    (monotonic seconds), keyed by ``key``. A watch the server ends is resumed from the last version seen
    (after an ERROR event, the collection is listed again); those requests are counted in ``own``, so
    they can be taken out of the API server's figures."""

    def __init__(
        self,
        plane: ControlPlane,
        path: str,
        *,
        seen: Callable[[dict[str, Any]], bool],
        key: Callable[[dict[str, Any]], str],
    ) -> None:
        self.plane, self.path, self.seen, self.key = plane, path, seen, key
        self.times: dict[str, float] = {}
        self.own: Counter[RequestKey] = Counter()
        self._resource = client_request_key("GET", path).resource
        self._connection: http.client.HTTPSConnection | None = None
        self._closed = False
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Follow:
        self._thread.start()
        assert self._ready.wait(20), f"watch of {self.path} did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        connection = self._connection
        if connection is not None and connection.sock is not None:
            # Ends the watch on the server too. Closing the response instead would wait for the reading
            # thread, which waits for the next line.
            connection.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)

    def _list(self) -> str:
        listing = self.plane.request("GET", self.path).json()
        now = time.monotonic()
        for obj in listing["items"]:
            if self.seen(obj):
                self.times.setdefault(self.key(obj), now)
        return str(listing["metadata"]["resourceVersion"])

    def _run(self) -> None:
        rv = self._list()
        server = urllib.parse.urlsplit(self.plane.server)
        while not self._closed:
            relist = False
            connection = http.client.HTTPSConnection(
                server.hostname or "", server.port, context=self.plane.ssl_context(), timeout=600
            )
            self._connection = connection
            try:
                connection.request(
                    "GET",
                    f"{self.path}?watch=1&resourceVersion={rv}&timeoutSeconds=600",
                    headers={"Authorization": f"Bearer {self.plane.token}"},
                )
                with connection.getresponse() as resp:
                    self._ready.set()
                    for line in resp:
                        now = time.monotonic()
                        event = json.loads(line)
                        obj = event["object"]
                        if event["type"] == "ERROR":
                            relist = True
                            break
                        rv = obj["metadata"].get("resourceVersion") or rv
                        if event["type"] != "BOOKMARK" and self.seen(obj):
                            self.times.setdefault(self.key(obj), now)
            except (OSError, ValueError, http.client.HTTPException):
                if self._closed:
                    return  # shut down by __exit__
            finally:
                connection.close()
            if self._closed:
                return
            self.own[RequestKey("WATCH", self._resource)] += 1
            if relist:
                self.own[RequestKey("LIST", self._resource)] += 1
                rv = self._list()


@dataclass(frozen=True)
class Run:
    requests: RequestCounts
    watches: Counter[RequestKey]
    """The long-running requests (watches) that ended with koord-scheduler's process, by verb and resource."""
    events: list[dict[str, Any]]
    """The Scheduled Events, as listed at the end."""
    last_bind: float
    """When this test's watch saw the last pod bound (monotonic seconds)."""
    events_written: float
    """When a list first showed every Scheduled Event (monotonic seconds)."""
    bound: int


def read_counts(plane: ControlPlane, *, readings: int = 3, gap: float = 0.3) -> RequestCounts:
    """kube-apiserver's counters, read ``readings`` times ``gap`` seconds apart: the completed requests
    from the last reading, the open long-running ones as the median of each row. Other clients on the
    shared cluster (kwok, kube-controller-manager) restart their watches now and then; a reading taken
    while one of those is being replaced counts it twice or not at all, and the median leaves that out."""
    taken: list[RequestCounts] = []
    for i in range(readings):
        if i:
            time.sleep(gap)
        result = plane.request("GET", "/metrics")
        assert result.status == 200, result.body[:300]
        taken.append(parse_request_counts(result.body.decode()))
    rows = {k for t in taken for k in t.open}
    median = Counter({k: sorted(t.open.get(k, 0) for t in taken)[len(taken) // 2] for k in rows})
    return RequestCounts(taken[-1].completed, median)


def scheduler_watches(plane: ControlPlane, *, running: RequestCounts, timeout: float = 10) -> Counter[RequestKey]:
    """The open long-running requests that went away when koord-scheduler exited: ``running`` (read while
    it ran) less a reading after it exited. kube-apiserver's gauge counts every client on the shared
    cluster, and kwok or kube-controller-manager may open a watch of their own during the run; one they
    open stays open after koord-scheduler's end, so it cancels out here. The server notices a closed
    connection within moments: the reading is repeated until two in a row agree."""
    deadline = time.monotonic() + timeout
    last = read_counts(plane)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = read_counts(plane)
        if now.open == last.open:
            break
        last = now
    gone = Counter({k: running.open.get(k, 0) - last.open.get(k, 0) for k in {*running.open, *last.open}})
    return Counter({k: v for k, v in gone.items() if v and k.resource})


def count_events(scope: Scope, own: Counter[RequestKey]) -> int:
    """The Events in the scope's namespace, from a one-item list (read from etcd, not a cache)."""
    own[EVENT_LIST] += 1
    doc = scope.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{scope.namespace}/events?limit=1")
    return len(doc["items"]) + int(doc["metadata"].get("remainingItemCount") or 0)


@pytest.fixture(scope="module", params=["default", "reservation"])
def run(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Run]:
    scope = Scope.create(control_plane, f"per-pod-{request.param[:4]}")
    proc: SchedulerProcess | None = None
    try:
        for i in range(NODES):
            scope.add_node(f"n{i}", cpu="8", memory="16Gi")
        scope.add_pods(scope.pod_body(f"p{i}") for i in range(PODS))
        pods = f"/api/v1/namespaces/{scope.namespace}/pods"
        own: Counter[RequestKey] = Counter()
        with Follow(
            control_plane, pods, seen=lambda o: bool(o["spec"].get("nodeName")), key=lambda o: o["metadata"]["name"]
        ) as binds:
            before = read_counts(control_plane)
            config = scheduler_config(scope)
            if request.param == "reservation":
                config["profiles"][0]["plugins"] = RESERVATION_PLUGINS
            proc = SchedulerProcess.start(control_plane, config, tmp_path_factory.mktemp("koord"))
            try:
                wait_until(lambda: len(binds.times) >= PODS, timeout=120, what=f"{PODS} pods bound")
                wait_until(
                    lambda: count_events(scope, own) >= PODS, timeout=60, interval=0.05, what=f"{PODS} Scheduled Events"
                )
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}: {len(binds.times)} bound; koord-scheduler's log:\n{proc.log_tail()}"
                ) from None
            events_written = time.monotonic()
            time.sleep(0.5)  # nothing more should come; anything that does is counted
            after = read_counts(control_plane)
            requests = after.since(before, own=own + binds.own)
            last_bind = max(binds.times.values())
            proc.terminate()
            watches = scheduler_watches(control_plane, running=after)
        yield Run(requests, watches, scope.events(reason="Scheduled"), last_bind, events_written, scope.bound_count())
    finally:
        if proc is not None:
            proc.terminate()
        scope.cleanup()


def test_a_plain_pod_costs_one_bind_and_one_event(run: Run) -> None:
    assert run.bound == PODS
    completed = run.requests.completed
    assert completed[BIND] == PODS
    assert completed[EVENT] == PODS
    others = {k: v for k, v in completed.items() if k not in (BIND, EVENT)}
    assert sum(others.values()) / PODS <= OTHER_REQUESTS_PER_POD, per_pod(others, PODS)


def test_one_watch_per_kind(run: Run) -> None:
    watches = run.watches
    assert watches[RequestKey("WATCH", "pods")] == 1, watches
    assert watches[RequestKey("WATCH", "nodes")] == 1, watches
    assert {str(k): v for k, v in watches.items() if v > 1} == {}


def test_scheduled_events_follow_their_binds_closely(run: Run) -> None:
    assert len(run.events) == PODS
    assert len({e["regarding"]["name"] for e in run.events}) == PODS  # one per pod, none dropped
    lag = run.events_written - run.last_bind
    assert lag <= MAX_EVENT_LAG_SECONDS, f"the last Event was written {lag:.2f}s after the last bind"
