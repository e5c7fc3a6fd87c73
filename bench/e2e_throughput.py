#!/usr/bin/env python3
"""End-to-end scheduling throughput against a real kube-apiserver + etcd.

SchedulingBasic shape: ``--nodes`` (default 1,000) Nodes created directly with status (4 CPU, 32Gi,
110 pods, Ready; no kubelet, no kwok), then for each contender ``--pods`` (default 5,000) pending pods
(100m / 500Mi, one container) are created while no scheduler runs, the contender is started, and a
separate watch in this process records when each pod gets its ``spec.nodeName`` (in the encoding the
contender reads pods in, so that it adds no encoding in kube-apiserver: :class:`BindWatcher`). Contenders,
one at a time, in the same run on the same control plane:

1. ``round-robin``: a trivial binder (bench/e2e_round_robin.py: list + watch pending pods, bind
   round-robin, no checks, 64 binds in flight, no Events), on koord-scheduler's own stack: the same
   HTTP client, orjson decoding and event loop (uvloop unless ``PYKOORD_EVENT_LOOP=asyncio``). The ceiling.
2. ``koord-scheduler``: ``.venv/bin/koord-scheduler`` with the default profile, leader election off.
3. ``kube-scheduler``: the upstream v1.35 binary from ``scripts/control-plane.sh build``, default
   profile, leader election off.
4. ``koord-scheduler-json`` (only when named in ``--only``): koord-scheduler with
   ``clientConnection.contentType: application/json``: its Pods and Nodes read, its Bindings and
   ``Scheduled`` Events sent as JSON rather than protobuf.
5. ``round-robin+events`` (only when named in ``--only``): the ceiling that also writes each pod's
   ``Scheduled`` Event as soon as its bind succeeds, as both schedulers do: the bound for a scheduler
   whose Events keep up with its binds (``koord_pct_of_events_ceiling``).
6. ``koord-scheduler-chart`` (only when named in ``--only``): koord-scheduler with the deployed profile
   (Koordinator's v1.8 chart profile, every Koordinator plugin on; deploy/koord-scheduler/configmap.yaml),
   taking the default scheduler name; reported against kube-scheduler (``chart_to_kube_scheduler``) and
   koord-scheduler's default profile (``chart_to_koord_default_profile``).
7. ``koord-scheduler-mixed`` (only when named in ``--only``): the same deployed profile on the mixed
   Koordinator workload of bench/e2e_koord_mixed.py (a twentieth of the pods in Reservations, a tenth LSR,
   a quarter in gangs of five, a quarter in ElasticQuotas; NodeMetrics and NodeResourceTopologies on every
   node); ``--pods`` a multiple of 20. Reported against the default profile on plain pods
   (``mixed_to_koord_default_profile``) and kube-scheduler (``mixed_to_kube_scheduler``), from process start
   to the last bind (``wall``): the mix's first binds come late, so its first-to-last-bind rate flatters it.

Client rate limits are lifted for every contender (``clientConnection.qps/burst`` = 100000; the
API server runs without priority-and-fairness). Both schedulers write one ``Scheduled`` Event per pod;
the ceiling writes none.

Reported per contender: ``rate`` = pods/s from the first to the last bind (scheduler_perf's view: the
backlog drain rate); ``wall`` = pods/s from process start to the last bind (includes start-up and the
initial list); CPU-seconds of the contender process (user+system, read from /proc right after the last
bind) per 1,000 pods, and the same from the first bind to the last only (``drain_cpu_seconds_per_1000``,
without start-up; ``drain_server_cpu_seconds_per_1000`` for kube-apiserver + etcd);
``server_cpu_seconds_per_1000`` = the same for kube-apiserver + etcd, from the contender's start to its
last bind (when their pid files are found: the cluster this run starts, or
``pid`` files next to ``--kubeconfig`` as ``scripts/control-plane.sh`` writes them). Then koord-scheduler
as a % of the ceiling and as a ratio to kube-scheduler.

    .venv/bin/python bench/e2e_throughput.py [--nodes 1000] [--pods 5000] [--repeat 1]
        [--kubeconfig FILE]      # use a running cluster (e.g. scripts/control-plane.sh up); else one is
                                 # started in a temp dir and stopped at the end
        [--only koord-scheduler,kube-scheduler] [--json out.json] [--baseline REF]

``--baseline REF`` adds the contender ``koord-scheduler@REF``: koord-scheduler as of that commit, built in a
temporary git worktree and virtualenv (bench/e2e_baseline.py), run right after the working tree's
koord-scheduler in every round; the summary gives each one's ratios and their ratio to each other.

Requests per bound pod: kube-apiserver's own counters (``apiserver_request_total`` and
``apiserver_longrunning_requests`` from its /metrics, tests/integration/apiserver_requests.py) are read
before each contender starts and once its Events are written, with the bench's own requests taken out;
each contender's result has the requests per bound pod by verb and resource (``requests_per_pod``), their
sum (``requests_total_per_pod``) and the watches it opened and still held (``watches_opened``). On a
cluster this run started, nothing else talks to the API server meanwhile but kube-apiserver's own
loopback clients (a lease renewal every 10 s).

``--shape`` runs another scheduler_perf shape (``SHAPES`` in bench/topology_common.py: the counts and
templates of bench/upstream/performance-config.yaml at 1,000 nodes) instead of SchedulingBasic:
TopologySpreading, SchedulingPodAntiAffinity or PreemptionBasic. For each contender the shape's init pods
are deleted and re-created already bound (``spec.nodeName`` set round-robin at creation, so no scheduler
is involved), then its measured pods (``measure-<i>``) are created pending and the contender drains them;
a measured pod counts when it is bound (a PreemptionBasic preemptor binds after its victims are deleted).
PreemptionBasic uses two PriorityClasses (bench-low 0, bench-high 10; the API server's Priority admission
is on) and omits the round-robin ceiling, which would bind 3-CPU pods onto full nodes.

    .venv/bin/python bench/e2e_throughput.py --shape TopologySpreading

``--controllers LIST`` (repeatable) runs koord-scheduler once per value with ``--controllers=LIST``, as
contenders ``koord-scheduler[LIST]`` (without ``--only``, the only ones). When a value turns on a colocation
controller, the cluster gets the NodeMetric / NodeSLO CRDs, the chart's ``slo-controller-config`` and a
fresh NodeMetric per node, and every contender starts from "the controllers never ran" (see
bench/e2e_colocation.py). Repeats alternate the order (A B, B A, ...); the summary gives each value's
rate and CPU against the first value's, and the ratio round by round. A value with ``descheduler`` gets the
same NodeMetrics and ``--descheduler-config`` from config/descheduler/descheduler-config.yaml with a round
every 2s (every node is cool: each round builds its view and plans nothing, the steady cost):

    .venv/bin/python bench/e2e_throughput.py --repeat 4 --controllers reservation \
        --controllers nodeslo,noderesource,nodemetric,reservation

Caveats: everything (etcd, kube-apiserver, contender, this watcher) shares the machine's cores, so the
API server's CPU is part of every figure; run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))

import e2e_baseline  # noqa: E402
import e2e_colocation  # noqa: E402
import e2e_koord_mixed  # noqa: E402
from apiserver_requests import per_pod  # noqa: E402
from e2e_requests import CountingHttp, read_request_counts  # noqa: E402
from topology_common import SHAPES, Shape, node_obj  # noqa: E402

from kubeapi import (  # noqa: E402
    ApiError,
    ApiHttp,
    HttpOptions,
    TokenBucket,
    jsoncodec,
    load_connection,
    protowire,
)
from kubeapi.http import JSON, iter_lines  # noqa: E402

NAMESPACE = "bench"
LIFTED_QPS = 100000
CONTENDERS = (
    "round-robin",
    "koord-scheduler",
    "kube-scheduler",
    "round-robin+events",
    "koord-scheduler-json",
    "koord-scheduler-chart",
    "koord-scheduler-mixed",
)
JSON_WIRE = "koord-scheduler-json"
"""koord-scheduler with ``clientConnection.contentType: application/json`` (Pods and Nodes as JSON, not
protobuf): named in ``--only`` to compare the encodings' costs, kube-apiserver's included."""
CHART = "koord-scheduler-chart"
"""koord-scheduler with the deployed profile (deploy/koord-scheduler/configmap.yaml, Koordinator's v1.8 chart
profile: every Koordinator plugin on), its ``schedulerName`` set to ``default-scheduler`` so that it takes the
bench's pods; named in ``--only``."""
MIXED = "koord-scheduler-mixed"
"""koord-scheduler with the deployed profile, as :data:`CHART`, on the mixed Koordinator workload of
bench/e2e_koord_mixed.py (Reservations, LSR pods, gangs, ElasticQuotas, NodeMetrics) instead of plain pods;
named in ``--only``."""
CHART_CONFIGMAP = REPO / "deploy" / "koord-scheduler" / "configmap.yaml"
DEFAULT_CONTENDERS = ("round-robin", "koord-scheduler", "kube-scheduler")
EVENTS_CEILING = "round-robin+events"
BASIC = "SchedulingBasic"
PRIORITY_CLASSES = {"bench-low": 0, "bench-high": 10}


@dataclass
class Result:
    contender: str
    pods: int
    rate: float
    wall: float
    seconds_first_to_last: float
    seconds_start_to_last: float
    cpu_seconds: float
    cpu_seconds_per_1000: float
    events_written: int
    events_done_after_last_bind: float | None
    """Seconds from the last bind until every Scheduled Event was written (None: none expected, or not
    all within 60 s)."""
    cpu_seconds_with_events: float
    server_cpu_seconds_per_1000: float | None = None
    """kube-apiserver + etcd CPU-seconds per 1,000 pods from the contender's start to its last bind."""
    drain_cpu_seconds_per_1000: float | None = None
    """The contender's CPU-seconds per 1,000 pods from its first bind to its last: the work per pod while
    the backlog drains, without start-up (imports, configuration, the first lists)."""
    drain_server_cpu_seconds_per_1000: float | None = None
    """kube-apiserver + etcd CPU-seconds per 1,000 pods from the first bind to the last."""
    colocation: dict[str, int] | None = None
    """With the colocation set-up: the controllers' work visible at the last bind (bench/e2e_colocation.py
    ``observe``)."""
    colocation_end: dict[str, int] | None = None
    """The same when the contender is stopped (after its Events are written)."""
    requests_per_pod: dict[str, float] = field(default_factory=dict)
    """kube-apiserver's requests completed from the contender's start until its Events were written, per
    bound pod, by ``VERB resource`` (rows of at least 0.001), the bench's own requests taken out."""
    requests_total_per_pod: float | None = None
    watches_opened: dict[str, int] = field(default_factory=dict)
    """Long-running requests (watches) the contender opened and still held then, by ``VERB resource``."""
    mixed: dict[str, int] | None = None
    """For ``koord-scheduler-mixed``: what it did with the mix (bench/e2e_koord_mixed.py ``observe``)."""


# ----- objects -----


def node_body(i: int) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"bench-node-{i}", "labels": {"kubernetes.io/hostname": f"bench-node-{i}"}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "phase": "Running",
        },
    }


def pod_body(i: int) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": NAMESPACE},
            "spec": {
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                    }
                ]
            },
        }
    ).encode()


async def bounded(n: int, concurrency: int, make: Any) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await make(i)

    await asyncio.gather(*(one(i) for i in range(n)))


async def ensure_nodes(http: ApiHttp, n: int, shape: Shape | None = None) -> None:
    existing = await http.request_json("GET", "/api/v1/nodes", params={"labelSelector": "kubernetes.io/hostname"})
    have = {item["metadata"]["name"] for item in existing.get("items", [])}
    zones = shape.zone_values if shape else ()

    async def create(i: int) -> None:
        body = (
            node_body(i)
            if shape is None
            else node_obj(
                i, {"topology.kubernetes.io/zone": zones[i % len(zones)]} if zones else None, prefix="bench-node"
            )
        )
        if body["metadata"]["name"] in have:
            return
        await http.request("POST", "/api/v1/nodes", body=body)

    await bounded(n, 64, create)


async def ensure_namespace(http: ApiHttp, name: str = NAMESPACE) -> None:
    try:
        await http.request(
            "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    except ApiError as err:
        if not err.conflict:
            raise


async def count_events(http: ApiHttp, namespace: str = NAMESPACE, reason: str = "") -> int:
    """Events in ``namespace`` (only those with ``reason`` when given: a full list, since a selector hides
    remainingItemCount)."""
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    if reason:
        doc = await http.request_json("GET", path)
        return sum(1 for item in doc.get("items") or () if item.get("reason") == reason)
    doc = await http.request_json("GET", path, params={"limit": "1"})
    return len(doc.get("items") or ()) + int((doc.get("metadata") or {}).get("remainingItemCount") or 0)


async def delete_collection(http: ApiHttp, path: str, params: dict[str, str] | None = None) -> None:
    """DELETE a collection. On a loaded server the request can time out (504) while the deletion goes on
    server-side; the caller waits for the collection to empty either way."""
    try:
        await http.request("DELETE", path, params=params)
    except ApiError as err:
        if err.status != 504:
            raise
        print(f"# DELETE {path} timed out on the server; waiting for it to finish", file=sys.stderr)


async def delete_pods(http: ApiHttp, namespace: str = NAMESPACE) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    await delete_collection(http, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    await delete_collection(http, path, params={"gracePeriodSeconds": "0"})
    for attempt in range(600):
        doc = await http.request_json("GET", path, params={"limit": "1"})
        if not doc.get("items"):
            return
        if attempt % 120 == 119:  # a timed-out delete may have stopped short: ask again
            await delete_collection(http, path, params={"gracePeriodSeconds": "0"})
        await asyncio.sleep(0.5)
    raise RuntimeError("pods were not deleted")


async def create_pods(http: ApiHttp, n: int) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"

    async def create(i: int) -> None:
        await http.request("POST", path, body=pod_body(i))

    await bounded(n, 64, create)


# ----- scheduler_perf shapes (--shape) -----


def shape_namespace(namespace: str) -> str:
    """The shapes' ``default`` namespace is this bench's own namespace, so cleaning up stays scoped."""
    return NAMESPACE if namespace == "default" else namespace


def shape_pod_body(obj: dict[str, Any], *, node: str = "", priority_classes: bool = False) -> bytes:
    """A SHAPES template as an API create body: no uid, the bench namespace, ``spec.nodeName`` when
    ``node`` is given (bound at creation), and with ``priority_classes`` the PriorityClass whose value is
    the template's ``spec.priority`` (Priority admission rejects a bare ``spec.priority``)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "uid"}
    meta["namespace"] = shape_namespace(meta["namespace"])
    spec = {k: v for k, v in obj["spec"].items() if k != "priority"}
    if priority_classes:
        value = int(obj["spec"].get("priority") or 0)
        spec["priorityClassName"] = next(name for name, v in PRIORITY_CLASSES.items() if v == value)
    if node:
        spec["nodeName"] = node
    return json.dumps({**obj, "metadata": meta, "spec": spec}).encode()


def shape_namespaces(shape: Shape) -> list[str]:
    return sorted({shape_namespace(shape.init_namespace), shape_namespace(shape.measure_namespace)})


async def ensure_shape(http: ApiHttp, shape: Shape) -> None:
    """The shape's namespaces and, for PreemptionBasic, its PriorityClasses."""
    for namespace in shape_namespaces(shape):
        await ensure_namespace(http, namespace)
    if shape.name != "PreemptionBasic":
        return
    for name, value in PRIORITY_CLASSES.items():
        try:
            await http.request(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                body={
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
            )
        except ApiError as err:
            if not err.conflict:
                raise


async def prepare_shape(http: ApiHttp, shape: Shape) -> None:
    """Delete the shape's pods, create its init pods bound round-robin, then its measured pods pending."""
    for namespace in shape_namespaces(shape):
        await delete_pods(http, namespace)
    preemption = shape.name == "PreemptionBasic"
    init = shape.init_objs()
    measured = shape.measure_objs()

    async def create(body: bytes, namespace: str) -> None:
        await http.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)

    init_ns, measure_ns = shape_namespace(shape.init_namespace), shape_namespace(shape.measure_namespace)
    await bounded(
        len(init),
        64,
        lambda i: create(
            shape_pod_body(init[i], node=f"bench-node-{i % shape.nodes}", priority_classes=preemption), init_ns
        ),
    )
    await bounded(
        len(measured), 64, lambda i: create(shape_pod_body(measured[i], priority_classes=preemption), measure_ns)
    )


# ----- observation -----


class BindWatcher:
    """Watches the bench namespace from ``resource_version``; records when each pod is first seen bound.

    ``protobuf`` (the default): the watch (and a re-list) asks for ``application/vnd.kubernetes.protobuf``
    and decodes frames with :mod:`kubeapi.protowire`, reading only each pod's name, ``spec.nodeName`` and
    resourceVersion. kube-apiserver encodes each object once per encoding and shares it between the
    watchers that asked for it, so a watcher in the encoding the contender reads adds no encoding of
    its own: protobuf for kube-scheduler and koord-scheduler, JSON (``protobuf=False``) for
    ``koord-scheduler-json`` (:func:`watcher_protobuf`)."""

    def __init__(
        self,
        http: ApiHttp,
        resource_version: str,
        want: int,
        *,
        namespace: str = NAMESPACE,
        name_prefix: str = "",
        protobuf: bool = True,
    ) -> None:
        self.http = http
        self.resource_version = resource_version
        self.want = want
        self.namespace = namespace
        self.name_prefix = name_prefix
        self.protobuf = protobuf
        self.bound: dict[str, float] = {}
        self.double_bound: list[str] = []
        self.done = asyncio.Event()
        self.on_first_bind: Any = None
        """Called (no arguments) when the first pod is seen bound."""

    def _seen(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        if (obj.get("spec") or {}).get("nodeName") and name.startswith(self.name_prefix):
            if not self.bound and self.on_first_bind is not None:
                self.on_first_bind()
            self.bound.setdefault(name, now)

    def _event(self, kind: str, obj: dict[str, Any], now: float) -> bool:
        """One watch event; True for an ERROR (re-list)."""
        if kind == "ERROR":
            return True
        self.resource_version = obj["metadata"].get("resourceVersion") or self.resource_version
        if kind in ("ADDED", "MODIFIED"):
            self._seen(obj, now)
        return False

    async def _batches(self, content: Any) -> Any:
        """The stream's events in batches of ``(type, object)``, as the server sent them."""
        if self.protobuf:
            async for frames in protowire.iter_frames(content):
                yield [protowire.decode_event(frame) for frame in frames]
        else:
            async for lines in iter_lines(content):
                batch = []
                for line in lines:
                    event = jsoncodec.loads(line)
                    batch.append((event["type"], event["object"]))
                yield batch

    async def _list(self, path: str) -> dict[str, Any]:
        if not self.protobuf:
            listing: dict[str, Any] = await self.http.request_json("GET", path)
            return listing
        return protowire.decode_list(await self.http.request("GET", path, accept=protowire.PROTOBUF))

    async def run(self) -> None:
        """Until ``want`` pods are bound. A watch that ends resumes from the last resourceVersion seen; an
        ERROR event (e.g. 410 Gone on a loaded server) re-lists, timing the pods bound meanwhile now."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        accept = protowire.PROTOBUF if self.protobuf else JSON
        while True:
            params = {
                "watch": "1",
                "resourceVersion": self.resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "3600",
            }
            relist = False
            async with self.http.stream(path, params, accept=accept) as content:
                async for batch in self._batches(content):
                    now = time.monotonic()
                    for kind, obj in batch:
                        if self._event(kind, obj, now):
                            relist = True
                            break
                    if len(self.bound) >= self.want:
                        self.done.set()
                        return
                    if relist:
                        break
            if relist:
                listing = await self._list(path)
                now = time.monotonic()
                for obj in listing.get("items") or ():
                    self._seen(obj, now)
                self.resource_version = listing["metadata"]["resourceVersion"]
                if len(self.bound) >= self.want:
                    self.done.set()
                    return


def watcher_protobuf(contender: str) -> bool:
    """Whether the bench's bind watcher reads ``contender``'s pods as protobuf: all but the contender
    that reads them as JSON (see :class:`BindWatcher`)."""
    return not contender.endswith("-json")


# ----- contenders -----


SERVER_PROCESSES = ("kube-apiserver", "etcd")


def server_pids(kubeconfig: str) -> list[int]:
    """kube-apiserver's and etcd's pids from ``scripts/control-plane.sh``'s pid files next to the
    kubeconfig; empty when they are not there (a cluster of some other kind)."""
    pids = []
    for name in SERVER_PROCESSES:
        try:
            pid = int((Path(kubeconfig).parent / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return []
        if not Path(f"/proc/{pid}").exists():
            return []
        pids.append(pid)
    return pids


def total_cpu_seconds(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


async def process_exit(proc: subprocess.Popen[bytes]) -> None:
    while proc.poll() is None:
        await asyncio.sleep(0.5)


KOORD_VARIANT = "koord-scheduler["


def contender_names(only: list[str], controllers: list[str]) -> list[str]:
    """``only`` with ``koord-scheduler`` replaced by one ``koord-scheduler[LIST]`` per ``--controllers``
    value (none given: unchanged)."""
    names: list[str] = []
    for name in only:
        names += [f"{KOORD_VARIANT}{c}]" for c in controllers] if name == "koord-scheduler" and controllers else [name]
    return names


def variant_controllers(name: str) -> str | None:
    """The ``--controllers`` value of a ``koord-scheduler[LIST]`` contender, else None."""
    return name[len(KOORD_VARIANT) : -1] if name.startswith(KOORD_VARIANT) else None


CPU_PROFILE_RUNNER = """
import cProfile, os, runpy, sys, time
out, sys.argv = sys.argv[1], sys.argv[2:]
sys.path[0] = os.path.dirname(sys.argv[0])  # as when run as a script: not the bench's working directory
profiler = cProfile.Profile(time.process_time)
profiler.enable()
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    profiler.disable()
    profiler.dump_stats(out)
"""
"""``PYKOORD_BENCH_PROFILE``'s wrapper: runs a console script under cProfile timed by CPU time (on a shared
machine wall time mostly measures waiting for a core) and dumps the stats at exit."""


DESCHEDULING_INTERVAL = "2s"


def descheduler_config(work: Path) -> Path:
    """config/descheduler/descheduler-config.yaml (LowNodeLoad, the MigrationController) with a round every
    ``DESCHEDULING_INTERVAL`` instead of 60s, so that a run sees many rounds."""
    text = (REPO / "config" / "descheduler" / "descheduler-config.yaml").read_text()
    path = work / "descheduler.yaml"
    path.write_text(text.replace("deschedulingInterval: 60s", f"deschedulingInterval: {DESCHEDULING_INTERVAL}"))
    return path


def start_contender(
    name: str, kubeconfig: str, work: Path, kube_scheduler: str, *, baselines: Mapping[str, Path] | None = None
) -> subprocess.Popen[bytes]:
    """``baselines``: the koord-scheduler executable of each ``koord-scheduler@REF`` contender."""
    log = (work / f"{name}.log").open("ab")
    controllers = variant_controllers(name)
    baseline = (baselines or {}).get(name)
    if name in ("round-robin", EVENTS_CEILING):
        args = [
            sys.executable,
            str(Path(__file__).resolve().parent / "e2e_round_robin.py"),
            "--kubeconfig",
            kubeconfig,
            *(["--events"] if name == EVENTS_CEILING else []),
        ]
    elif name in ("koord-scheduler", JSON_WIRE, CHART, MIXED) or controllers is not None or baseline is not None:
        config = work / "koord-scheduler.yaml"
        client: dict[str, Any] = {"kubeconfig": kubeconfig, "qps": LIFTED_QPS, "burst": LIFTED_QPS}
        if name == JSON_WIRE:
            client["contentType"] = "application/json"
        document: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
        }
        if name in (CHART, MIXED):
            document = chart_profile()
        document.update(clientConnection=client, leaderElection={"leaderElect": False})
        config.write_text(yaml.safe_dump(document))
        executable = baseline or REPO / ".venv" / "bin" / "koord-scheduler"
        args = [str(executable), "--config", str(config), "--metrics-port", "0"]
        if controllers is not None:
            args.append(f"--controllers={controllers}")
            if "descheduler" in {c.strip() for c in controllers.split(",")}:
                args.append(f"--descheduler-config={descheduler_config(work)}")
        profile = os.environ.get("PYKOORD_BENCH_PROFILE")
        if profile:  # a CPU-time cProfile dump per contender (PROFILE.<name>.prof), with its own Python
            slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
            python = executable.parent / "python" if baseline is not None else Path(sys.executable)
            args = [str(python), "-c", CPU_PROFILE_RUNNER, f"{profile}.{slug}.prof", *args]
    else:
        config = work / "kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": kubeconfig, "qps": LIFTED_QPS, "burst": LIFTED_QPS},
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        args = [kube_scheduler, f"--config={config}", "--secure-port=0", "--v=1"]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def chart_profile() -> dict[str, Any]:
    """The deployed KubeSchedulerConfiguration, its profiles taking pods of the default scheduler name."""
    configmap = yaml.safe_load(CHART_CONFIGMAP.read_text())
    document: dict[str, Any] = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    for profile in document["profiles"]:
        profile["schedulerName"] = "default-scheduler"
    return document


async def measure(
    name: str,
    http: ApiHttp,
    n: int,
    *,
    kubeconfig: str,
    work: Path,
    kube_scheduler: str,
    shape: Shape | None = None,
    timeout: float | None = None,
    colocation_nodes: list[str] | None = None,
    prepare: Any = None,
    baselines: Mapping[str, Path] | None = None,
) -> Result:
    """One contender's run. ``colocation_nodes``: reset the colocation state of these nodes first
    (bench/e2e_colocation.py) and observe the controllers' work at the last bind. ``prepare``: an async
    ``(http, n)`` that replaces SchedulingBasic's delete-and-create of the ``n`` pending pods. With a
    :class:`CountingHttp`, the result has the contender's requests per bound pod."""
    namespace, prefix = NAMESPACE, ""
    if prepare is not None:
        await prepare(http, n)
    elif shape is None:
        await delete_pods(http)
        await create_pods(http, n)
    else:
        await prepare_shape(http, shape)
        namespace, prefix = shape_namespace(shape.measure_namespace), "measure-"
    if colocation_nodes:
        await e2e_colocation.reset(http, colocation_nodes)
    listing = await http.request_json("GET", f"/api/v1/namespaces/{namespace}/pods", params={"limit": "1"})
    watcher = BindWatcher(
        http,
        listing["metadata"]["resourceVersion"],
        n,
        namespace=namespace,
        name_prefix=prefix,
        protobuf=watcher_protobuf(name),
    )
    watch = asyncio.ensure_future(watcher.run())
    await asyncio.sleep(0.5)
    requests_before = await read_request_counts(http) if isinstance(http, CountingHttp) else None
    servers = server_pids(kubeconfig)
    server_cpu_start = total_cpu_seconds(servers)
    started = time.monotonic()
    proc = start_contender(name, kubeconfig, work, kube_scheduler, baselines=baselines)
    at_first_bind: list[float] = []

    def first_bind() -> None:  # the CPU both sides had spent when the drain began
        with contextlib.suppress(OSError):
            at_first_bind.extend([cpu_seconds(proc.pid), total_cpu_seconds(servers)])

    watcher.on_first_bind = first_bind
    try:
        timeout = timeout or (max(120.0, n / 20) if shape is None else max(600.0, n / 2))
        waiter = asyncio.ensure_future(watcher.done.wait())
        exited = asyncio.ensure_future(process_exit(proc))
        await asyncio.wait({waiter, watch, exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        if watch.done() and watch.exception() is not None:
            raise RuntimeError(f"watch failed: {watch.exception()}")
        if not watcher.done.is_set() and proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited ({proc.returncode}) with {len(watcher.bound)}/{n} pods bound "
                f"(log: {work / (name + '.log')})"
            )
        if not watcher.done.is_set():
            raise RuntimeError(
                f"{name}: only {len(watcher.bound)}/{n} pods bound after {timeout:.0f}s (log: {work / (name + '.log')})"
            )
        cpu = cpu_seconds(proc.pid) if proc.poll() is None else float("nan")
        server_cpu_now = total_cpu_seconds(servers)
        server_cpu = server_cpu_now - server_cpu_start if servers else None
        drain_cpu = drain_server_cpu = None
        if len(at_first_bind) == 2 and n > 1:
            drain_cpu = (cpu - at_first_bind[0]) * 1000 / (n - 1)
            drain_server_cpu = (server_cpu_now - at_first_bind[1]) * 1000 / (n - 1) if servers else None
        last_bind = max(watcher.bound.values())
        colocation = await e2e_colocation.observe(http) if colocation_nodes else None
        events, events_done, cpu_with_events = 0, float("nan"), cpu
        if name != "round-robin":
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                events = await (
                    count_events(http) if shape is None else count_events(http, namespace, reason="Scheduled")
                )
                if events >= n:
                    events_done = time.monotonic() - last_bind
                    cpu_with_events = cpu_seconds(proc.pid) if proc.poll() is None else float("nan")
                    break
                await asyncio.sleep(0.25)
        colocation_end = await e2e_colocation.observe(http) if colocation_nodes else None
        requests = None
        if isinstance(http, CountingHttp) and requests_before is not None and proc.poll() is None:
            requests = (await read_request_counts(http)).since(requests_before)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    times = sorted(watcher.bound.values())
    first_to_last = times[-1] - times[0]
    start_to_last = times[-1] - started
    return Result(
        contender=name,
        pods=n,
        rate=(n - 1) / first_to_last if first_to_last > 0 else float("inf"),
        wall=n / start_to_last,
        seconds_first_to_last=round(first_to_last, 3),
        seconds_start_to_last=round(start_to_last, 3),
        cpu_seconds=round(cpu, 3),
        cpu_seconds_per_1000=round(cpu * 1000 / n, 3),
        events_written=events,
        events_done_after_last_bind=None if math.isnan(events_done) else round(events_done, 2),
        cpu_seconds_with_events=round(cpu_with_events, 3),
        server_cpu_seconds_per_1000=None if server_cpu is None else round(server_cpu * 1000 / n, 3),
        drain_cpu_seconds_per_1000=None if drain_cpu is None or math.isnan(drain_cpu) else round(drain_cpu, 3),
        drain_server_cpu_seconds_per_1000=None if drain_server_cpu is None else round(drain_server_cpu, 3),
        colocation=colocation,
        colocation_end=colocation_end,
        requests_per_pod=per_pod(requests.completed, n, floor=0.001) if requests else {},
        requests_total_per_pod=round(requests.total / n, 3) if requests else None,
        watches_opened={str(k): v for k, v in sorted(requests.open.items())} if requests else {},
    )


# ----- main -----


async def run_bench(
    args: argparse.Namespace,
    kubeconfig: str,
    kube_scheduler: str,
    work: Path,
    baselines: Mapping[str, Path] | None = None,
) -> list[Result]:
    connection = load_connection(kubeconfig)
    http = CountingHttp(connection, TokenBucket(0, 1), options=HttpOptions(pool_size=96, request_timeout=120))
    shape: Shape | None = None if args.shape == BASIC else args.shape_plan
    try:
        await ensure_namespace(http)
        if shape is not None:
            await ensure_shape(http, shape)
        t = time.monotonic()
        await ensure_nodes(http, args.nodes, shape)
        print(f"# {args.nodes} nodes ready ({time.monotonic() - t:.1f}s)", file=sys.stderr)
        colocation_nodes = None
        if e2e_colocation.needs_colocation(args.controllers):
            colocation_nodes = [f"bench-node-{i}" for i in range(args.nodes)]
            await e2e_colocation.install(http, colocation_nodes)
        if MIXED in args.only:
            await e2e_koord_mixed.install(http, [f"bench-node-{i}" for i in range(args.nodes)], NAMESPACE)
        mixed = functools.partial(e2e_koord_mixed.prepare, namespace=NAMESPACE, delete_pods=delete_pods)
        results: list[Result] = []
        for repeat in range(args.repeat):
            # A B, then B A: a drift of the machine over the run weighs on every contender alike.
            for name in args.only if repeat % 2 == 0 else args.only[::-1]:
                result = await measure(
                    name,
                    http,
                    args.pods,
                    kubeconfig=kubeconfig,
                    work=work,
                    kube_scheduler=kube_scheduler,
                    shape=shape,
                    timeout=args.timeout,
                    colocation_nodes=colocation_nodes,
                    prepare=mixed if name == MIXED else None,
                    baselines=baselines,
                )
                if name == MIXED:
                    result = replace(result, mixed=await e2e_koord_mixed.observe(http, NAMESPACE))
                    print(f"# {name}: {result.mixed}", file=sys.stderr)
                events = (
                    f"all written {result.events_done_after_last_bind}s after the last bind"
                    if result.events_done_after_last_bind is not None
                    else "none expected"
                    if name == "round-robin"
                    else "not all within 60 s"
                )
                print(
                    f"# {result.contender}: {result.rate:.0f} pods/s (wall {result.wall:.0f}), "
                    f"{result.cpu_seconds_per_1000:.2f} CPU-s/1000 pods (apiserver+etcd "
                    f"{result.server_cpu_seconds_per_1000}; first to last bind {result.drain_cpu_seconds_per_1000}, "
                    f"apiserver+etcd {result.drain_server_cpu_seconds_per_1000}); "
                    f"{result.events_written} events, {events}"
                    + (
                        f"; colocation at the last bind {result.colocation}, at the end {result.colocation_end}"
                        if result.colocation
                        else ""
                    ),
                    file=sys.stderr,
                )
                if result.requests_total_per_pod is not None:
                    print(
                        f"#   requests per bound pod {result.requests_total_per_pod:.3f}: "
                        + ", ".join(f"{k} {v:.3f}" for k, v in result.requests_per_pod.items())
                        + "; watches opened: "
                        + (", ".join(f"{k} {v}" for k, v in result.watches_opened.items()) or "none"),
                        file=sys.stderr,
                    )
                results.append(result)
        for namespace in shape_namespaces(shape) if shape is not None else [NAMESPACE]:
            await delete_pods(http, namespace)
        return results
    finally:
        await http.close()


def _median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def _median_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    """Row by row, the median over the runs (a row missing from a run counts as 0 there)."""
    keys = dict.fromkeys(k for row in rows for k in row)
    medians = {k: round(statistics.median(row.get(k, 0.0) for row in rows), 3) for k in keys}
    return dict(sorted(((k, v) for k, v in medians.items() if v), key=lambda kv: (-kv[1], kv[0])))


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def baseline_ratios(koord: list[Result], base: list[Result]) -> dict[str, Any]:
    """The working tree's koord-scheduler against a ``--baseline`` build: medians' ratios (rate, CPU, API
    server CPU, requests per pod) and the rate ratio round by round (runs paired in order)."""

    def med(rs: list[Result], attr: str) -> float | None:
        return _median_or_none([getattr(r, attr) for r in rs])

    return {
        "rate_ratio": _ratio(med(koord, "rate"), med(base, "rate")),
        "cpu_ratio": _ratio(med(koord, "cpu_seconds_per_1000"), med(base, "cpu_seconds_per_1000")),
        "server_cpu_ratio": _ratio(med(koord, "server_cpu_seconds_per_1000"), med(base, "server_cpu_seconds_per_1000")),
        "drain_cpu_ratio": _ratio(med(koord, "drain_cpu_seconds_per_1000"), med(base, "drain_cpu_seconds_per_1000")),
        "drain_server_cpu_ratio": _ratio(
            med(koord, "drain_server_cpu_seconds_per_1000"), med(base, "drain_server_cpu_seconds_per_1000")
        ),
        "requests_per_pod_ratio": _ratio(med(koord, "requests_total_per_pod"), med(base, "requests_total_per_pod")),
        "rate_ratio_per_round": [round(a.rate / b.rate, 3) for a, b in zip(koord, base, strict=False)],
    }


def summarize(results: list[Result]) -> dict[str, Any]:
    by: dict[str, list[Result]] = {}
    for r in results:
        by.setdefault(r.contender, []).append(r)
    summary: dict[str, Any] = {
        name: {
            "rate_pods_per_s": round(statistics.median(r.rate for r in rs), 1),
            "wall_pods_per_s": round(statistics.median(r.wall for r in rs), 1),
            "cpu_seconds_per_1000_pods": round(statistics.median(r.cpu_seconds_per_1000 for r in rs), 2),
            "events_done_after_last_bind_s": _median_or_none([r.events_done_after_last_bind for r in rs]),
            "server_cpu_seconds_per_1000_pods": _median_or_none([r.server_cpu_seconds_per_1000 for r in rs]),
            "drain_cpu_seconds_per_1000_pods": _median_or_none([r.drain_cpu_seconds_per_1000 for r in rs]),
            "drain_server_cpu_seconds_per_1000_pods": _median_or_none(
                [r.drain_server_cpu_seconds_per_1000 for r in rs]
            ),
            "requests_per_pod": _median_or_none([r.requests_total_per_pod for r in rs]),
            "requests_per_pod_by_verb_resource": _median_rows([r.requests_per_pod for r in rs]),
        }
        for name, rs in by.items()
    }
    koord = summary.get("koord-scheduler")
    ceiling, kube = summary.get("round-robin"), summary.get("kube-scheduler")
    if koord and ceiling:
        summary["koord_pct_of_ceiling"] = round(100 * koord["rate_pods_per_s"] / ceiling["rate_pods_per_s"], 1)
    events_ceiling = summary.get(EVENTS_CEILING)
    if koord and events_ceiling:
        summary["koord_pct_of_events_ceiling"] = round(
            100 * koord["rate_pods_per_s"] / events_ceiling["rate_pods_per_s"], 1
        )
    if koord and kube:
        summary["koord_to_kube_scheduler"] = round(koord["rate_pods_per_s"] / kube["rate_pods_per_s"], 2)
    chart = summary.get(CHART)
    if chart and kube:
        summary["chart_to_kube_scheduler"] = round(chart["rate_pods_per_s"] / kube["rate_pods_per_s"], 2)
    if chart and koord:
        summary["chart_to_koord_default_profile"] = round(chart["rate_pods_per_s"] / koord["rate_pods_per_s"], 2)
    # The mix binds its first pods late (Reservations, gangs), so its drain rate flatters it: start to last bind.
    mixed = summary.get(MIXED)
    if mixed and koord:
        summary["mixed_to_koord_default_profile"] = round(mixed["wall_pods_per_s"] / koord["wall_pods_per_s"], 2)
    if mixed and kube:
        summary["mixed_to_kube_scheduler"] = round(mixed["wall_pods_per_s"] / kube["wall_pods_per_s"], 2)
    for name, runs in by.items():
        if e2e_baseline.baseline_ref(name) is None:
            continue
        base = summary[name]
        if ceiling:
            summary[f"{name}_pct_of_ceiling"] = round(100 * base["rate_pods_per_s"] / ceiling["rate_pods_per_s"], 1)
        if kube:
            summary[f"{name}_to_kube_scheduler"] = round(base["rate_pods_per_s"] / kube["rate_pods_per_s"], 2)
        if koord:
            summary[f"koord_vs_{name}"] = baseline_ratios(by["koord-scheduler"], runs)
    variants = [name for name in by if variant_controllers(name) is not None]
    if len(variants) > 1:  # each variant against the first --controllers value: medians, and run by run
        base = variants[0]
        summary["controllers_vs_first"] = {
            name: {
                "rate_ratio": round(summary[name]["rate_pods_per_s"] / summary[base]["rate_pods_per_s"], 3),
                "cpu_ratio": round(
                    summary[name]["cpu_seconds_per_1000_pods"] / summary[base]["cpu_seconds_per_1000_pods"], 3
                ),
                "rate_ratio_per_round": [round(a.rate / b.rate, 3) for a, b in zip(by[name], by[base], strict=False)],
            }
            for name in variants[1:]
        }
    return summary


def shape_arguments(args: argparse.Namespace) -> str:
    """Fill the shape-dependent defaults of ``args`` in place; return an error message naming the flag,
    or ``""``."""
    if args.only is None:
        args.only = (
            ["koord-scheduler"]
            if args.controllers
            else [c for c in DEFAULT_CONTENDERS if not (args.shape == "PreemptionBasic" and c == "round-robin")]
        )
    unknown = [c for c in args.only if c not in CONTENDERS]
    if unknown:
        return f"--only: unknown contenders {unknown}; choose from {list(CONTENDERS)}"
    if args.controllers and "koord-scheduler" not in args.only:
        return "--controllers: needs the koord-scheduler contender in --only"
    args.only = contender_names(args.only, args.controllers)
    if getattr(args, "baseline", None):
        args.only = e2e_baseline.with_baseline(args.only, args.baseline)
    if args.shape == BASIC:
        args.pods = 5000 if args.pods is None else args.pods
        return ""
    base = SHAPES[args.shape]
    if args.nodes <= 0:
        return f"--nodes: want a positive count, got {args.nodes}"
    # Other node counts scale the shape's pod counts in proportion (PreemptionBasic stays 4 x nodes + nodes).
    init = base.init_pods * args.nodes // base.nodes
    args.pods = base.measure_pods * args.nodes // base.nodes if args.pods is None else args.pods
    if args.pods <= 0:
        return f"--pods: want a positive count, got {args.pods}"
    if args.shape == "SchedulingPodAntiAffinity" and init + args.pods > args.nodes:
        return f"--pods: {args.shape} places at most one pod per node: {init} init + {args.pods} > {args.nodes} nodes"
    args.shape_plan = replace(base, nodes=args.nodes, init_pods=init, measure_pods=args.pods)
    if args.timeout is None and args.shape == "PreemptionBasic":
        args.timeout = 1200.0
    return ""


PACKAGES = ("apis", "kubeapi", "koord_scheduler")


def compile_working_tree() -> None:
    """Write the working tree's bytecode before any contender starts. The editable install runs from the
    sources; with ``PYTHONDONTWRITEBYTECODE`` set (or a read-only tree) every start would compile them
    again (0.3 to 1.6 CPU-seconds on a 2-core VM), which a deployed image (or the ``--baseline`` build, whose
    ``pip install`` writes its bytecode) does not pay."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=REPO, check=True, stdout=subprocess.DEVNULL
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape",
        choices=(BASIC, *(s for s in SHAPES if s != BASIC)),
        default=BASIC,
        help="scheduler_perf shape (bench/topology_common.py SHAPES); default SchedulingBasic",
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--pods",
        type=int,
        default=None,
        help="measured pods (default: 5000 for SchedulingBasic, else the shape's count)",
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds a contender may take (default: max(120, pods/20); other shapes max(600, pods/2), "
        "PreemptionBasic 1200)",
    )
    parser.add_argument("--kubeconfig", help="a running cluster (default: start one for this run)")
    parser.add_argument("--kube-scheduler", help="kube-scheduler binary (default: from control-plane.sh build)")
    parser.add_argument(
        "--only",
        default=None,
        type=lambda s: s.split(","),
        help="contenders (default: all; PreemptionBasic: no round-robin ceiling)",
    )
    parser.add_argument(
        "--controllers",
        action="append",
        default=[],
        metavar="LIST",
        help="repeatable: run koord-scheduler once per value with --controllers=LIST, interleaved "
        "(default contenders then: koord-scheduler only); a colocation controller in any "
        "value installs the colocation set-up (bench/e2e_colocation.py); ratios are "
        "against the first value",
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also run koord-scheduler as of this git commit (built in a temporary worktree and "
        "virtualenv) as the contender koord-scheduler@REF, right after koord-scheduler",
    )
    parser.add_argument("--json", help="write raw results and the summary here")
    parser.add_argument("--work-dir", help="keep contender configs and logs here (default: a temp dir)")
    args = parser.parse_args()
    error = shape_arguments(args)
    if error:
        parser.error(error)
    from controlplane import Binaries, running_control_plane

    kube_scheduler = args.kube_scheduler or str(Binaries.build().kube_scheduler)
    compile_working_tree()
    with tempfile.TemporaryDirectory(prefix="pykoord-e2e-") as tmp, contextlib.ExitStack() as stack:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        baselines: dict[str, Path] = {}
        if args.baseline:
            build = stack.enter_context(e2e_baseline.built(args.baseline, repo=REPO))
            baselines[e2e_baseline.contender_name(args.baseline)] = build.executable
        if args.kubeconfig:
            results = asyncio.run(run_bench(args, args.kubeconfig, kube_scheduler, work, baselines))
        else:
            with running_control_plane(work / "cluster") as plane:
                results = asyncio.run(run_bench(args, str(plane.kubeconfig), kube_scheduler, work, baselines))
    summary = summarize(results)
    machine = {"nproc": os.cpu_count(), "python": sys.version.split()[0]}
    head: dict[str, Any] = {"machine": machine}
    if args.shape != BASIC:
        koord, kube = summary.get("koord-scheduler"), summary.get("kube-scheduler")
        if koord and kube:  # PreemptionBasic binds in a burst at the end: start-to-last-bind is the fair view
            summary["koord_to_kube_scheduler_wall"] = round(koord["wall_pods_per_s"] / kube["wall_pods_per_s"], 2)
        plan = args.shape_plan
        head["shape"] = {
            "name": plan.name,
            "nodes": plan.nodes,
            "init_pods": plan.init_pods,
            "measure_pods": plan.measure_pods,
        }
    print(json.dumps({**head, "summary": summary}, indent=2))
    if args.json:
        Path(args.json).write_text(
            json.dumps({**head, "summary": summary, "runs": [asdict(r) for r in results]}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
