"""What the descheduler proofs observe on the real API server, from threads: every watch event of a
resource in order (so invariants hold "at every moment", not only at the samples a poll would see), and a
koordlet stand-in that writes each node's NodeMetric from the pods bound to it (usage follows the pods).

Resource versions from one etcd are the store's revision: events of different resources can be ordered by
them (``int(resourceVersion)``), which is how "the Reservation was Available before the pod was evicted"
is checked.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controlplane import ControlPlane

NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
JOBS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"


@dataclass(frozen=True)
class Event:
    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    at: float  # time.monotonic() when received
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


class Watch:
    """Records every event of ``path`` (a list path) from a thread, resuming after errors; ``on_event``
    (optional) sees each event with the lock held, after the state is updated."""

    def __init__(
        self, plane: ControlPlane, path: str, *, on_event: Callable[[Watch, Event], None] | None = None
    ) -> None:
        self.plane = plane
        self.path = path
        self.events: list[Event] = []
        self.state: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self._on_event = on_event
        self.error = ""
        self._halt = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        assert self._ready.wait(45), f"watch on {self.path} did not start: {self.error}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._thread.join(15)

    def _run(self) -> None:
        deadline = time.monotonic() + 30
        while (result := self.plane.request("GET", self.path)).status != 200:
            # 429 "storage is (re)initializing" while a new CRD's watch cache fills: try again.
            self.error = f"GET {self.path}: {result.status} {result.body[:300]!r}"
            if time.monotonic() > deadline or self._halt.is_set():
                return
            time.sleep(0.5)
        listing = result.json()
        with self.lock:
            for item in listing["items"]:
                self.state[item["metadata"]["name"]] = item
        rv = listing["metadata"]["resourceVersion"]
        self._ready.set()  # every change after the listing's resourceVersion is seen
        sep = "&" if "?" in self.path else "?"
        while not self._halt.is_set():
            url = f"{self.plane.server}{self.path}{sep}watch=1&resourceVersion={rv}&timeoutSeconds=5"
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.plane.token}"})
            try:
                context = ssl.create_default_context(cafile=str(self.plane.ca_file))
                with urllib.request.urlopen(request, context=context, timeout=15) as resp:
                    for line in resp:
                        raw = json.loads(line)
                        if raw["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                            break
                        obj = raw["object"]
                        rv = obj["metadata"]["resourceVersion"]
                        event = Event(raw["type"], int(rv), time.monotonic(), obj)
                        with self.lock:
                            self.events.append(event)
                            if event.type == "DELETED":
                                self.state.pop(event.name, None)
                            else:
                                self.state[event.name] = obj
                            if self._on_event is not None:
                                self._on_event(self, event)
            except (OSError, ValueError):
                time.sleep(0.5)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return dict(self.state)

    def history(self) -> list[Event]:
        with self.lock:
            return list(self.events)


def ready(pod: dict[str, Any]) -> bool:
    """Ready and not terminating: what a PodDisruptionBudget counts as healthy."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def bound_live(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and not pod["metadata"].get("deletionTimestamp")


def evictions(pods: Watch) -> dict[str, int]:
    """Pod name -> the resourceVersion at which it was first seen terminating or deleted."""
    first: dict[str, int] = {}
    for event in pods.history():
        if event.type == "DELETED" or event.obj["metadata"].get("deletionTimestamp"):
            first.setdefault(event.name, event.rv)
    return first


def first_available(reservations: Watch) -> dict[str, int]:
    """Reservation name -> the resourceVersion at which it was first seen ``Available``."""
    first: dict[str, int] = {}
    for event in reservations.history():
        if (event.obj.get("status") or {}).get("phase") == "Available":
            first.setdefault(event.name, event.rv)
    return first


class Koordlets(threading.Thread):
    """Every ``period`` seconds, each node's NodeMetric status: ``per_pod`` CPU for every pod bound to it
    and not terminating (``pods`` is the namespace's pod watch), node usage their sum."""

    def __init__(
        self, plane: ControlPlane, pods: Watch, nodes: list[str], *, per_pod_milli: int, period: float = 1.0
    ) -> None:
        super().__init__(daemon=True)
        self.plane = plane
        self.pods = pods
        self.nodes = nodes
        self.per_pod_milli = per_pod_milli
        self.period = period
        self.failures: list[str] = []
        self._halt = threading.Event()
        for node in nodes:
            body = {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": {},
            }
            result = plane.request("POST", NODEMETRICS, body)
            assert result.status in (201, 409), result.body[:300]

    def usage_milli(self) -> dict[str, int]:
        """Node -> CPU usage (millicores) as the koordlets report it now."""
        usage = dict.fromkeys(self.nodes, 0)
        for pod in self.pods.snapshot().values():
            node = pod["spec"].get("nodeName")
            if node in usage and bound_live(pod):
                usage[node] += self.per_pod_milli
        return usage

    def report_once(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        by_node: dict[str, list[dict[str, Any]]] = {node: [] for node in self.nodes}
        for pod in self.pods.snapshot().values():
            node = pod["spec"].get("nodeName")
            if node in by_node and bound_live(pod):
                usage = {"cpu": f"{self.per_pod_milli}m", "memory": "100Mi"}
                meta = pod["metadata"]
                by_node[node].append(
                    {"namespace": meta["namespace"], "name": meta["name"], "podUsage": {"resources": usage}}
                )
        for node, pods in by_node.items():
            total = {"cpu": f"{self.per_pod_milli * len(pods)}m", "memory": f"{100 * len(pods)}Mi"}
            status = {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": total}}, "podsMetric": pods}
            result = self.plane.request(
                "PATCH", f"{NODEMETRICS}/{node}/status", {"status": status}, content_type="application/merge-patch+json"
            )
            if result.status != 200:
                self.failures.append(f"{node}: {result.status} {result.body[:200]!r}")

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.report_once()
            except OSError as exc:  # the API server is busy; the next report catches up
                self.failures.append(str(exc))
            self._halt.wait(self.period)

    def stop(self) -> None:
        self._halt.set()
        if self.ident is not None:  # started
            self.join(15)
