#!/usr/bin/env python3
"""koord-scheduler's memory across kube-apiserver restarts, for several process variants side by side.

A control plane with ``--nodes`` kwok nodes is started; ``--pods`` pods (spread over the variants'
namespaces) are created. One koord-scheduler process per ``--variant`` runs against it, each leading its
own lease with its own profile name (so each binds its own pods and runs the Reservation controller).
kube-apiserver is then restarted ``--restarts`` times, ``--every`` seconds apart (``--idle``: not
restarted, the control); ``--settle`` seconds after each restart every process's RSS, thread count and
open file descriptors are sampled. With ``--objects`` each process also writes, on SIGUSR1, its Python
object counts by type after a ``gc.collect()`` (objects the scheduler froze with ``gc.freeze`` after
start-up are not counted, so the counts are of what was created since) and the RSS before and after that
collection; the counts of a few telling types (coroutines, SSL objects, aiohttp responses, sockets) are
printed per restart.

A variant is ``NAME`` or ``NAME:VAR=VALUE,VAR=VALUE`` (extra environment). Besides glibc's own
(``MALLOC_ARENA_MAX=2``), the processes read: ``RSS_PROBE_NO_TRIM=1`` turns off the trim after lists
(``kubeapi.heap``), ``RSS_PROBE_TRIM_DELAY=S`` sets its delay,
``RSS_PROBE_TRIM=1`` adds a ``malloc_trim(0)`` to each SIGUSR1 sample (and reports the RSS after it),
``RSS_PROBE_TYPE=module.Type`` prints what refers to a few objects of that type.

    .venv/bin/python bench/rss_restarts.py --variant trim --variant no-trim:RSS_PROBE_NO_TRIM=1
        [--nodes 20] [--pods 150] [--restarts 8] [--every 15] [--settle 8] [--objects] [--idle] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import gc
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for extra in (REPO, REPO / "tests" / "integration", REPO / "tests" / "integration" / "scheduler", REPO / "bench"):
    sys.path.insert(0, str(extra))


def _child(dump: str, argv: list[str]) -> None:
    """Run koord-scheduler in this process; SIGUSR1 writes Python object counts to ``dump``."""

    def rss() -> float:
        return proc_sample(os.getpid())["rss"]  # type: ignore[no-any-return]

    def on_usr1(signum: int, frame: Any) -> None:
        before = rss()
        collected = gc.collect()
        after_gc = rss()
        trimmed = after_gc
        if os.environ.get("RSS_PROBE_TRIM"):
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
            trimmed = rss()
        counts = collections.Counter(type(o).__module__ + "." + type(o).__qualname__ for o in gc.get_objects())
        doc = {
            "threads": [t.name for t in threading.enumerate()],
            "counts": dict(counts.most_common(400)),
            "holders": _holders(os.environ.get("RSS_PROBE_TYPE", "")),
            "rss": [before, after_gc, trimmed],
            "collected": collected,
        }
        Path(dump).write_text(json.dumps(doc))

    signal.signal(signal.SIGUSR1, on_usr1)
    if os.environ.get("RSS_PROBE_NO_TRIM"):  # the product's trim after lists, turned off to compare
        from kubeapi import heap

        heap.DEFAULT_TRIMMER = heap.HeapTrimmer(None)
    elif os.environ.get("RSS_PROBE_TRIM_DELAY"):
        from kubeapi import heap

        delay = float(os.environ["RSS_PROBE_TRIM_DELAY"])
        heap.DEFAULT_TRIMMER = heap.HeapTrimmer(heap.glibc_malloc_trim(), delay=delay)
    sys.argv = ["koord-scheduler", *argv]
    from koord_scheduler.app.cli import main

    main()


def _holders(type_name: str, samples: int = 3, depth: int = 10) -> list[list[str]]:
    """For a few objects of ``type_name`` (module.qualname), a chain of what refers to them."""
    if not type_name:
        return []
    targets = [id(o) for o in gc.get_objects() if type(o).__module__ + "." + type(o).__qualname__ == type_name]
    by_id = {id(o): o for o in gc.get_objects() if id(o) in set(targets[-samples:])}
    chains = []
    frame_type = type(sys._getframe())
    for target_id in targets[-samples:]:
        chain: list[str] = []
        current = by_id.get(target_id)
        seen: set[int] = set()
        for _ in range(depth):
            if current is None:
                break
            seen.add(id(current))
            mine = {id(chain), id(by_id), id(targets), id(seen)}
            refs = gc.get_referrers(current)
            mine.add(id(refs))
            nxt = next(
                (
                    r
                    for r in refs
                    if id(r) not in mine and id(r) not in seen and not isinstance(r, frame_type) and r is not by_id
                ),
                None,
            )
            del refs
            current = nxt
            if current is None:
                break
            desc = type(current).__module__ + "." + type(current).__qualname__
            if isinstance(current, dict):
                desc += f" keys={list(current)[:5]}"
            elif isinstance(current, (list, tuple)):
                desc += f" len={len(current)}"
            elif hasattr(current, "cr_code"):
                desc += f" {current.cr_code.co_qualname}"
            chain.append(desc)
        chains.append(chain)
    return chains


SERIES = (
    "builtins.dict",
    "builtins.coroutine",
    "builtins.async_generator",
    "_ssl.MemoryBIO",
    "uvloop.loop.SSLProtocol",
    "aiohttp.client_reqrep.ClientResponse",
    "socket.socket",
    "builtins.traceback",
    "_asyncio.Task",
)


@dataclass
class Variant:
    name: str
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    port: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)


def parse_variant(text: str) -> Variant:
    name, _, rest = text.partition(":")
    env = dict(pair.split("=", 1) for pair in rest.split(",") if pair)
    return Variant(name, env)


def proc_sample(pid: int) -> dict[str, Any]:
    status = Path(f"/proc/{pid}/status").read_text()

    def field_kb(key: str) -> float:
        match = re.search(rf"{key}:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else 0.0

    threads = re.search(r"Threads:\s+(\d+)", status)
    return {
        "rss": round(field_kb("VmRSS"), 1),
        "anon": round(field_kb("RssAnon"), 1),
        "threads": int(threads.group(1)) if threads else 0,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def request_objects(variant: Variant, dump: Path) -> dict[str, Any]:
    assert variant.process is not None
    dump.unlink(missing_ok=True)
    variant.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if dump.exists() and dump.stat().st_size:
            time.sleep(0.2)
            result: dict[str, Any] = json.loads(dump.read_text())
            return result
        time.sleep(0.2)
    return {}


def object_growth(first: dict[str, Any], last: dict[str, Any], top: int = 40) -> list[tuple[str, int]]:
    a, b = first.get("counts", {}), last.get("counts", {})
    diff = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    return sorted(((k, v) for k, v in diff.items() if v), key=lambda kv: -abs(kv[1]))[:top]


def run(ns: argparse.Namespace) -> dict[str, Any]:
    import yaml
    from controlplane import free_port, running_control_plane
    from kubesched import scheduler_config
    from soak_cluster import PLUGINS, PodLedger, install_crds

    variants = [parse_variant(v) for v in ns.variant]
    work = Path(tempfile.mkdtemp(prefix="rss-restarts-"))
    report: dict[str, Any] = {"options": vars(ns) | {"json": str(ns.json)}, "variants": {}}
    with running_control_plane(work / "cluster", kwok_nodes=ns.nodes) as plane:
        install_crds(plane)
        ledgers = [PodLedger.new(plane, prefix=f"rss-{v.name}") for v in variants]
        for index, variant in enumerate(variants):
            ledger = ledgers[index]
            config = scheduler_config(ledger, leader_elect=True, lease=("30s", "20s", "2s"))  # type: ignore[arg-type]
            config["profiles"][0]["plugins"] = PLUGINS
            config_path = work / f"{variant.name}.yaml"
            config_path.write_text(yaml.safe_dump(config))
            variant.port = free_port()
            args = [
                "--config",
                str(config_path),
                "--kubeconfig",
                str(plane.kubeconfig),
                "--metrics-port",
                str(variant.port),
                "--bind-address",
                "127.0.0.1",
                "-v",
                "0",
                "--controllers=reservation",
            ]
            log = (work / f"{variant.name}.log").open("ab")
            variant.process = subprocess.Popen(
                [sys.executable, __file__, "--child", str(work / f"{variant.name}.objects.json"), "--", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **variant.env},
            )
        for i in range(ns.pods):
            ledger = ledgers[i % len(ledgers)]
            ledger.create(f"p-{i}", "10m")
        time.sleep(ns.settle * 2)
        for variant in variants:
            assert variant.process is not None and variant.process.poll() is None, f"{variant.name} exited"
            variant.samples.append({"restart": 0, **proc_sample(variant.process.pid)})
            if ns.objects:
                variant.objects.append(request_objects(variant, work / f"{variant.name}.objects.json"))
        print("restart " + " ".join(f"{v.name:>22}" for v in variants), flush=True)
        _print_row(0, variants)
        for restart in range(1, ns.restarts + 1):
            t0 = time.monotonic()
            if not ns.idle:
                plane.restart_apiserver()
            time.sleep(ns.settle)
            for variant in variants:
                assert variant.process is not None and variant.process.poll() is None, f"{variant.name} exited"
                variant.samples.append({"restart": restart, **proc_sample(variant.process.pid)})
                if ns.objects:
                    variant.objects.append(request_objects(variant, work / f"{variant.name}.objects.json"))
            _print_row(restart, variants)
            time.sleep(max(0.0, t0 + ns.every - time.monotonic()))
        for variant in variants:
            if ns.objects:
                variant.objects.append(request_objects(variant, work / f"{variant.name}.objects.json"))
                growth = object_growth(variant.objects[0], variant.objects[-1])
                print(f"{variant.name}: object count change first->last sample: {growth}")
                print(f"{variant.name}: threads {variant.objects[-1].get('threads')}")
                for sample in variant.objects:
                    print(
                        f"{variant.name}: rss before gc, after gc, after trim {sample.get('rss')} "
                        f"collected {sample.get('collected')}"
                    )
                for type_name in SERIES:
                    series = [o.get("counts", {}).get(type_name, 0) for o in variant.objects]
                    print(f"{variant.name}: {type_name} per restart {series}")
                for chain in variant.objects[-1].get("holders", []):
                    print(f"{variant.name}: held by " + " <- ".join(chain))
            assert variant.process is not None
            variant.process.send_signal(signal.SIGTERM)
            variant.process.wait(30)
            report["variants"][variant.name] = {"env": variant.env, "samples": variant.samples}
    return report


def _print_row(restart: int, variants: list[Variant]) -> None:
    cells = []
    for v in variants:
        s = v.samples[-1]
        cells.append(f"{s['rss']:7.1f}MiB t{s['threads']:<3d}fd{s['fds']:<4d}")
    print(f"{restart:7d} " + " ".join(f"{c:>22}" for c in cells), flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", action="append", required=True)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--pods", type=int, default=150)
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--every", type=float, default=15.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--objects", action="store_true")
    parser.add_argument("--idle", action="store_true", help="the control: no restarts, the same samples")
    parser.add_argument("--json", type=Path)
    ns = parser.parse_args()
    report = run(ns)
    for name, data in report["variants"].items():
        rss = [s["rss"] for s in data["samples"]]
        steps = [round(b - a, 1) for a, b in itertools.pairwise(rss)]
        print(f"{name}: {rss[0]} -> {rss[-1]} MiB, steps {steps}")
    if ns.json:
        ns.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
