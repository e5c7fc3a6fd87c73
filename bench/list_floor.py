#!/usr/bin/env python3
"""The floor under any scheduler's start-up: how long kube-apiserver takes to serve the first lists.

A scheduler may not bind before it has listed every Node and every bound Pod (its cache would be
incomplete and it could overcommit a node). This bench times those lists alone, on the same cluster as
``bench/startup.py`` (``--nodes`` kwok nodes and ``--pods`` bound pods; started here unless
``--kubeconfig`` names a running one), in the encodings a client may ask for:

- ``json``: ``Accept: application/json`` (koord-scheduler's client), the bytes read and thrown away;
- ``protobuf``: ``Accept: application/vnd.kubernetes.protobuf`` (kube-scheduler's client for core kinds),
  the bytes read and thrown away (the envelope is walked only for the ``continue`` token);
- ``json+parse``: koord-scheduler's own list path (``Reflector.list_all`` with each page decoded and
  parsed into the scheduler's types while the next one is on its way), i.e. what its start-up pays with
  ``clientConnection.contentType: application/json``;
- ``protobuf+parse``: the same as protobuf (the default): upb decodes each page and
  ``kubeapi.protoparse`` builds the scheduler's types from the messages.

Pages of ``--page-size`` (500, client-go's and koord-scheduler's default), Nodes then Pods, one request
at a time. Reported per encoding: wall seconds, and kube-apiserver's CPU-seconds over the same time
(from ``/proc/<pid>/stat`` of the ``kube-apiserver`` process serving that cluster). ``--repeat`` rounds,
interleaved.

    .venv/bin/python bench/list_floor.py [--nodes 5000] [--pods 50000] [--repeat 3] [--kubeconfig FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from startup import apiserver_cpu, ensure_bound_pods  # also puts the repository and tests/integration on sys.path

from kubeapi import ApiHttp, HttpOptions, TokenBucket, load_connection
from kubeapi.connection import Connection
from kubeapi.core_kinds import NODE_KIND, POD_KIND
from kubeapi.reflector import Reflector

PROTOBUF = "application/vnd.kubernetes.protobuf"
KINDS = (("nodes", "/api/v1/nodes"), ("pods", "/api/v1/pods"))
_JSON_CONTINUE = re.compile(rb'"continue":"([^"]*)"')


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def protobuf_continue(body: bytes) -> str:
    """``metadata.continue`` of a protobuf list: the ``k8s\\0`` magic, a runtime.Unknown whose field 2 is
    the list, whose field 1 is its ListMeta, whose field 3 is ``continue``."""
    if body[:4] != b"k8s\x00":
        raise ValueError("not a kubernetes protobuf body")
    unknown = body[4:]
    meta = _raw_field(_raw_field(unknown, 2), 1)
    return _raw_field(meta, 3).decode()


def _raw_field(buf: bytes, wanted: int) -> bytes:
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        number, wire = tag >> 3, tag & 7
        if wire == 2:
            size, i = _varint(buf, i)
            if number == wanted:
                return buf[i : i + size]
            i += size
        elif wire == 0:
            _, i = _varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
    return b""


def raw_list(connection: Connection, path: str, accept: str, page_size: int) -> tuple[int, int]:
    """Every page of ``path`` in ``accept``; (pages, bytes)."""
    url = urlsplit(connection.server)
    conn: http.client.HTTPConnection
    if url.scheme == "https":
        conn = http.client.HTTPSConnection(url.hostname or "", url.port or 443, context=connection.ssl_context)
    else:
        conn = http.client.HTTPConnection(url.hostname or "", url.port or 80)
    headers = {"Accept": accept}
    auth = connection.authorization()
    if auth:
        headers["Authorization"] = auth
    token, pages, size = "", 0, 0
    try:
        while True:
            query = f"limit={page_size}" + (f"&continue={quote(token)}" if token else "")
            conn.request("GET", f"{path}?{query}", headers=headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
            pages += 1
            size += len(body)
            if accept == PROTOBUF:
                token = protobuf_continue(body)
            else:
                head = _JSON_CONTINUE.search(body, 0, 4096)
                token = head.group(1).decode() if head else ""
            if not token:
                return pages, size
    finally:
        conn.close()


async def parsed_list(connection: Connection, page_size: int, *, protobuf: bool) -> int:
    """koord-scheduler's first lists: decoded and parsed page by page; how many objects."""
    from kubeapi.reflector import ReflectorOptions

    http = ApiHttp(connection, TokenBucket(0, 1), options=HttpOptions(pool_size=4, request_timeout=120))
    try:
        count = 0
        for kind in (NODE_KIND, POD_KIND):
            options = ReflectorOptions(page_size=page_size, protobuf=protobuf)
            reflector = Reflector(http, kind, _unused, options=options)
            items, _ = await reflector.list_all(prepare=True)
            count += len(items)
        return count
    finally:
        await http.close()


def _unused(*_: Any) -> None:
    raise AssertionError("nothing is delivered")


def one_round(connection: Connection, page_size: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name in ("json", "protobuf", "json+parse", "protobuf+parse"):
        cpu0, wall0, own0 = apiserver_cpu(connection.server), time.monotonic(), time.process_time()
        if name.endswith("+parse"):
            objects = asyncio.run(parsed_list(connection, page_size, protobuf=name.startswith("protobuf")))
            size = 0
        else:
            accept = PROTOBUF if name == "protobuf" else "application/json"
            size, objects = 0, 0
            for _, path in KINDS:
                _, nbytes = raw_list(connection, path, accept, page_size)
                size += nbytes
        out[name] = {
            "seconds": round(time.monotonic() - wall0, 3),
            "apiserver_cpu_seconds": round(apiserver_cpu(connection.server) - cpu0, 3),
            "client_cpu_seconds": round(time.process_time() - own0, 3),
            "megabytes": round(size / 1e6, 1),
            "objects": objects,
        }
        print(f"# {name}: {out[name]}", file=sys.stderr)
    return out


async def _prepare(kubeconfig: str, pods: int, nodes: int) -> None:
    from e2e_throughput import ensure_namespace
    from startup import NAMESPACE

    http = ApiHttp(
        load_connection(kubeconfig), TokenBucket(0, 1), options=HttpOptions(pool_size=96, request_timeout=120)
    )
    try:
        await ensure_namespace(http, NAMESPACE)
        await ensure_bound_pods(http, pods, nodes)
    finally:
        await http.close()


def run(args: argparse.Namespace, kubeconfig: str) -> dict[str, Any]:
    t = time.monotonic()
    asyncio.run(_prepare(kubeconfig, args.pods, args.nodes))
    print(f"# {args.pods} bound pods on {args.nodes} nodes ({time.monotonic() - t:.1f}s)", file=sys.stderr)
    time.sleep(args.settle)
    connection = load_connection(kubeconfig)
    rounds = [one_round(connection, args.page_size) for _ in range(args.repeat)]
    summary = {
        name: {
            key: statistics.median(r[name][key] for r in rounds)
            for key in ("seconds", "apiserver_cpu_seconds", "client_cpu_seconds")
        }
        for name in rounds[0]
    }
    return {"rounds": rounds, "median": summary}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000, help="bound pods")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--kubeconfig", help="a running cluster with --nodes kwok nodes (default: start one)")
    parser.add_argument("--json", help="write the rounds and medians here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pykoord-listfloor-") as tmp:
        if args.kubeconfig:
            result = run(args, args.kubeconfig)
        else:
            from controlplane import running_control_plane

            with running_control_plane(Path(tmp) / "cluster", kwok_nodes=args.nodes) as plane:
                result = run(args, str(plane.kubeconfig))
    head = {"machine": {"nproc": os.cpu_count(), "load": os.getloadavg()}, "nodes": args.nodes, "bound_pods": args.pods}
    print(json.dumps({**head, "median": result["median"]}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({**head, **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
