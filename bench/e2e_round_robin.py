#!/usr/bin/env python3
"""The round-robin ceiling of ``bench/e2e_throughput.py``, run by it as its own process.

A trivial binder: list + watch pending pods, bind round-robin over the nodes, no checks, 64 binds in
flight, no Events, on koord-scheduler's own stack (HTTP client, orjson decoding, event loop).

With ``--events`` it also writes each bound pod's ``Scheduled`` Event (events.k8s.io/v1, the body
koord-scheduler's recorder sends) as soon as its bind succeeds, 64 in flight: the ceiling of a scheduler
that writes its Events as kube-scheduler does, while it binds.

    .venv/bin/python bench/e2e_round_robin.py --kubeconfig FILE [--events] [--namespace NS]

``--namespace`` binds the pending pods of that namespace only (default: every namespace).
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from koord_scheduler.framework.errors import ClusterError
from kubeapi import ApiHttp, HttpOptions, TokenBucket, jsoncodec, load_connection
from kubeapi.events import micro_time
from kubeapi.http import iter_lines


def contender_loop_factory() -> Any:
    """koord-scheduler's event loop choice (``PYKOORD_EVENT_LOOP``: uvloop when installed unless it says
    ``asyncio``; see ``koord_scheduler.app.serve.event_loop_factory``), so the ceiling runs on the same
    loop as the scheduler it bounds. Not imported from there: serve's imports cost a second of CPU,
    which would count against the ceiling's CPU-seconds."""
    if os.environ.get("PYKOORD_EVENT_LOOP", "") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def scheduled_event(ns: str, name: str, uid: str, node: str, host: str) -> dict[str, Any]:
    now = time.time()
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{int(now * 1e9):x}", "namespace": ns},
        "eventTime": micro_time(now),
        "reportingController": "round-robin",
        "reportingInstance": f"round-robin-{host}",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned {ns}/{name} to {node}",
        "regarding": {"kind": "Pod", "apiVersion": "v1", "name": name, "namespace": ns, "uid": uid},
    }


async def round_robin(kubeconfig: str, *, events: bool = False, namespace: str = "") -> None:
    connection = load_connection(kubeconfig)
    http = ApiHttp(connection, TokenBucket(0, 1), options=HttpOptions(pool_size=96))
    events_http = ApiHttp(connection, TokenBucket(0, 1), options=HttpOptions(pool_size=66)) if events else None
    events_sem = asyncio.Semaphore(64)
    host = socket.gethostname()
    nodes = await http.request_json("GET", "/api/v1/nodes")
    names = [item["metadata"]["name"] for item in nodes["items"]]
    sem = asyncio.Semaphore(64)
    seen: set[str] = set()
    counter = 0
    tasks: set[asyncio.Task[None]] = set()
    failures: collections.Counter[str] = collections.Counter()

    async def write_event(ns: str, name: str, uid: str, node: str) -> None:
        assert events_http is not None
        async with events_sem:
            try:
                await events_http.request(
                    "POST",
                    f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
                    body=scheduled_event(ns, name, uid, node, host),
                )
            except ClusterError as err:
                failures[f"event {type(err).__name__}"] += 1
                if sum(failures.values()) <= 5:
                    print(f"event for {ns}/{name} failed: {err}", file=sys.stderr, flush=True)

    async def bind(ns: str, name: str, uid: str, node: str) -> None:
        async with sem:
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            try:
                await http.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body=body)
            except ClusterError as err:  # counted and logged; the pod stays pending
                failures[type(err).__name__] += 1
                if sum(failures.values()) <= 5:
                    print(f"bind {ns}/{name} failed: {err}", file=sys.stderr, flush=True)
                return
        if events_http is not None:
            await write_event(ns, name, uid, node)

    def offer(obj: dict[str, Any]) -> None:
        nonlocal counter
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if (obj.get("spec") or {}).get("nodeName") or key in seen:
            return
        seen.add(key)
        node = names[counter % len(names)]
        counter += 1
        task = asyncio.ensure_future(bind(meta["namespace"], meta["name"], meta.get("uid", ""), node))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    params = {"fieldSelector": "spec.nodeName="}
    pods = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    while True:  # a watch that ends (or reports an ERROR, e.g. 410 Gone) is re-listed; ``seen`` dedups
        listing = await http.request_json("GET", pods, params=params)
        for obj in listing["items"]:
            offer(obj)
        watch_params = {**params, "watch": "1", "resourceVersion": listing["metadata"]["resourceVersion"]}
        async with http.stream(pods, watch_params) as content:
            async for lines in iter_lines(content):
                # Not ``event``/``events``: the closures above read ``write_event`` and ``events`` from this
                # scope, and a loop variable of the same name would rebind them (an Event write would then
                # call the watch event, a dict).
                changes = [jsoncodec.loads(line) for line in lines]
                for change in changes:
                    if change["type"] == "ADDED":
                        offer(change["object"])
                if any(change["type"] == "ERROR" for change in changes):
                    print(f"watch error, re-listing: {changes[-1]['object']}", file=sys.stderr, flush=True)
                    break


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=contender_loop_factory()) as runner:
        argv = sys.argv
        runner.run(
            round_robin(
                argv[argv.index("--kubeconfig") + 1],
                events="--events" in argv,
                namespace=argv[argv.index("--namespace") + 1] if "--namespace" in argv else "",
            )
        )
