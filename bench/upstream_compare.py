#!/usr/bin/env python3
"""pykoord next to upstream kube-scheduler on scheduler_perf shapes at 1,000 nodes, in one run.

For each shape in ``--shapes`` (``SHAPES`` in bench/topology_common.py; the same counts and templates as
bench/upstream/performance-config.yaml):

1. **koord**: our in-process bench for that shape, in its own process (MemoryCluster, default profile,
   adaptive percentageOfNodesToScore): scheduler_throughput.py (SchedulingBasic), topology_spread.py,
   pod_anti_affinity.py, preemption_basic.py (PreemptionBasic, called as is). pods/s = measured pods bound
   / seconds from the first scheduling attempt to the last binding.
2. **upstream**: kube-scheduler v1.35.8's own harness (``test/integration/scheduler_perf``,
   ``RunBenchmarkPerfScheduling``) on bench/upstream/performance-config.yaml, one test binary run per
   shape; pods/s = its ``SchedulingThroughput`` Average (the mean of 1-second samples of scheduled pods).

Not the same work: upstream runs a real kube-apiserver (in-process) + etcd and pays for every API
write (pod creation, Binding, Events, preemption's deletions) on the same cores; our in-process bench
writes nothing. The ratio koord/upstream therefore flatters koord; bench/e2e_throughput.py --shape gives
the end-to-end comparison on one real control plane.

    .venv/bin/python bench/upstream_compare.py                  # all four shapes; builds the Go test
                                                                # binary first if it is missing
    .venv/bin/python bench/upstream_compare.py --shapes TopologySpreading --json out.json
    .venv/bin/python bench/upstream_compare.py --skip-upstream   # our numbers only (no Go toolchain)

Building bench/upstream/upstream.test (``go test -c``) takes many minutes on 2 cores; it is not
committed. The harness needs ``etcd`` on PATH: ``--etcd`` (default: the one scripts/control-plane.sh
caches in ~/.cache/pykoord/bin) is linked into a temp bin dir put first on PATH.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
UPSTREAM = BENCH / "upstream"
TEST_BINARY = UPSTREAM / "upstream.test"
DEFAULT_ETCD = Path.home() / ".cache" / "pykoord" / "bin" / "etcd-v3.5.35" / "etcd"
WORKLOAD = "1000Nodes"
"""The workload name every test case in bench/upstream/performance-config.yaml uses."""

sys.path.insert(0, str(BENCH))

from topology_common import SHAPES, Shape  # noqa: E402

IN_PROCESS_NOTE = (
    "upstream = scheduler_perf (in-process kube-apiserver + etcd: pays for pod creation, Binding, Events "
    "and deletions on the same cores); koord = in-process MemoryCluster (no API writes). Ratio = koord / "
    "upstream; see bench/e2e_throughput.py --shape for the end-to-end comparison."
)


class UpstreamResultError(ValueError):
    """The upstream DataItems document is not what scheduler_perf writes."""


@dataclass(frozen=True, slots=True)
class UpstreamThroughput:
    """scheduler_perf's SchedulingThroughput DataItem for one test case / workload, in pods/s."""

    test_case: str
    workload: str
    average: float
    perc50: float
    perc90: float
    perc99: float


@dataclass(frozen=True, slots=True)
class Row:
    shape: str
    koord_pods_per_s: float
    upstream_pods_per_s: float | None
    koord_cpu_s: float
    upstream_cpu_s: float | None
    koord_detail: dict[str, Any]

    @property
    def ratio(self) -> float | None:
        if self.upstream_pods_per_s is None or self.upstream_pods_per_s <= 0:
            return None
        return self.koord_pods_per_s / self.upstream_pods_per_s


# ----- upstream DataItems -----


def _name_parts(name: str, field: str) -> tuple[str, str]:
    """``BenchmarkPerfScheduling/TopologySpreading/1000Nodes`` (or without the benchmark prefix) ->
    (``TopologySpreading``, ``1000Nodes``)."""
    parts = [p for p in name.split("/") if p]
    if parts and parts[0].startswith("Benchmark"):
        parts = parts[1:]
    if len(parts) < 2:
        raise UpstreamResultError(f"{field}: want <test case>/<workload>, got {name!r}")
    return parts[0], "/".join(parts[1:])


def parse_data_items(doc: Any) -> dict[str, UpstreamThroughput]:
    """The SchedulingThroughput items of a scheduler_perf DataItems document (``{"version": "v1",
    "dataItems": [{"data": {...}, "unit": ..., "labels": {"Name": ..., "Metric": ...}}]}``), keyed by
    test case name. Other metrics are ignored; a malformed document raises UpstreamResultError naming
    the field."""
    if not isinstance(doc, dict) or not isinstance(doc.get("dataItems"), list):
        raise UpstreamResultError("dataItems: want a list in a DataItems object")
    out: dict[str, UpstreamThroughput] = {}
    for i, item in enumerate(doc["dataItems"]):
        if not isinstance(item, dict):
            raise UpstreamResultError(f"dataItems[{i}]: want an object, got {type(item).__name__}")
        labels = item.get("labels") or {}
        if not isinstance(labels, dict):
            raise UpstreamResultError(f"dataItems[{i}].labels: want an object")
        if labels.get("Metric") != "SchedulingThroughput":
            continue
        if "Name" not in labels:
            raise UpstreamResultError(f"dataItems[{i}].labels.Name: missing")
        test_case, workload = _name_parts(str(labels["Name"]), f"dataItems[{i}].labels.Name")
        data = item.get("data")
        if not isinstance(data, dict):
            raise UpstreamResultError(f"dataItems[{i}].data: want an object of numbers")
        values: dict[str, float] = {}
        for key in ("Average", "Perc50", "Perc90", "Perc99"):
            value = data.get(key)
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise UpstreamResultError(f"dataItems[{i}].data.{key}: want a number, got {value!r}")
            values[key] = float(value)
        if item.get("unit") != "pods/s":
            raise UpstreamResultError(f"dataItems[{i}].unit: want 'pods/s', got {item.get('unit')!r}")
        out[test_case] = UpstreamThroughput(
            test_case, workload, values["Average"], values["Perc50"], values["Perc90"], values["Perc99"]
        )
    return out


def read_data_items_dir(directory: Path) -> dict[str, UpstreamThroughput]:
    """Merge every ``BenchmarkPerfScheduling*_benchmark_*.json`` the harness wrote into ``directory``."""
    out: dict[str, UpstreamThroughput] = {}
    for path in sorted(directory.glob("BenchmarkPerfScheduling*.json")):
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise UpstreamResultError(f"{path.name}: not JSON ({err})") from err
        out.update(parse_data_items(doc))
    return out


# ----- running -----


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_json(cmd: list[str], *, cwd: Path = REPO) -> tuple[dict[str, Any], float]:
    """Run a bench child that prints one JSON object as its last stdout line; also return the CPU-seconds
    it (and its waited-for children) used."""
    before = children_cpu()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    cpu = children_cpu() - before
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    lines = [line for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd)} printed no JSON:\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1]), cpu


def koord_command(shape: Shape) -> list[str]:
    """Our in-process bench for ``shape``, with upstream's counts and the adaptive percentageOfNodesToScore.
    PreemptionBasic is bench/preemption_basic.py as is (its shape is ``nodes`` nodes, 4 x nodes low- and
    nodes high-priority pods, which is SHAPES['PreemptionBasic'] at 1,000 nodes)."""
    py = sys.executable
    if shape.name == "SchedulingBasic":
        return [
            py,
            str(BENCH / "scheduler_throughput.py"),
            "--profile",
            "full",
            "--nodes",
            str(shape.nodes),
            "--placed",
            str(shape.init_pods),
            "--pods",
            str(shape.measure_pods),
            "--percentage",
            "0",
        ]
    if shape.name == "PreemptionBasic":
        if shape.init_pods != 4 * shape.nodes or shape.measure_pods != shape.nodes:
            raise ValueError(
                f"PreemptionBasic: preemption_basic.py runs nodes / 4 x nodes / nodes, not "
                f"{shape.nodes} / {shape.init_pods} / {shape.measure_pods}"
            )
        return [py, str(BENCH / "preemption_basic.py"), "--child", "--nodes", str(shape.nodes)]
    script = {"TopologySpreading": "topology_spread.py", "SchedulingPodAntiAffinity": "pod_anti_affinity.py"}
    return [
        py,
        str(BENCH / script[shape.name]),
        "--nodes",
        str(shape.nodes),
        "--init-pods",
        str(shape.init_pods),
        "--measure-pods",
        str(shape.measure_pods),
        "--percentage",
        "0",
    ]


def build_upstream(binary: Path) -> None:
    """``go test -c`` the harness in bench/upstream (minutes on 2 cores; niced; cached by Go afterwards)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    print(f"# building {binary} (go test -c; slow on a cold cache)", file=sys.stderr, flush=True)
    subprocess.run(
        ["nice", "-n", "10", "go", "test", "-c", "-vet=off", "-o", str(binary), "."], cwd=UPSTREAM, env=env, check=True
    )


def upstream_command(binary: Path, test_case: str, data_dir: Path) -> list[str]:
    return [
        str(binary),
        "-test.run=^$",
        f"-test.bench=^BenchmarkPerfScheduling$/^{test_case}$/^{WORKLOAD}$",
        "-test.benchtime=1ns",
        "-test.timeout=30m",
        f"-data-items-dir={data_dir}",
        "-perf-scheduling-label-filter=performance",
    ]


def run_upstream(binary: Path, etcd: Path, test_case: str, work: Path) -> tuple[UpstreamThroughput, float]:
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "etcd"
    if not link.exists():
        link.symlink_to(etcd)
    data_dir = work / f"data-{test_case}"
    data_dir.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBE_CACHE_MUTATION_DETECTOR": "false",
        "ETCD_LOGLEVEL": "warn",
        "GOMAXPROCS": str(os.cpu_count()),
    }
    log = work / f"upstream-{test_case}.log"
    before = children_cpu()
    with log.open("w") as out:
        proc = subprocess.run(
            upstream_command(binary, test_case, data_dir),
            cwd=UPSTREAM,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    cpu = children_cpu() - before
    results = read_data_items_dir(data_dir)
    if proc.returncode != 0 or test_case not in results:
        tail = log.read_text()[-3000:]
        raise RuntimeError(
            f"upstream {test_case}: exit {proc.returncode}, results {sorted(results)} (log {log}):\n{tail}"
        )
    return results[test_case], cpu


def format_table(rows: list[Row]) -> str:
    lines = [
        f"{'shape':<27} {'koord pods/s':>12} {'upstream pods/s':>15} {'ratio':>6} {'koord CPU-s':>11} "
        f"{'upstream CPU-s':>14}"
    ]
    for r in rows:
        up = f"{r.upstream_pods_per_s:.1f}" if r.upstream_pods_per_s is not None else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        up_cpu = f"{r.upstream_cpu_s:.1f}" if r.upstream_cpu_s is not None else "-"
        lines.append(
            f"{r.shape:<27} {r.koord_pods_per_s:>12.1f} {up:>15} {ratio:>6} {r.koord_cpu_s:>11.1f} {up_cpu:>14}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES), type=lambda s: [x for x in s.split(",") if x])
    parser.add_argument("--skip-upstream", action="store_true", help="our in-process numbers only")
    parser.add_argument("--binary", type=Path, default=TEST_BINARY, help="upstream test binary (go test -c)")
    parser.add_argument("--etcd", type=Path, default=DEFAULT_ETCD)
    parser.add_argument("--json", type=Path, help="write the rows and run conditions here")
    parser.add_argument("--work-dir", type=Path, help="keep upstream logs and DataItems here (default: temp)")
    args = parser.parse_args()
    unknown = [s for s in args.shapes if s not in SHAPES]
    if unknown:
        parser.error(f"--shapes: unknown {unknown}; choose from {sorted(SHAPES)}")
    if not args.skip_upstream:
        if not args.etcd.exists():
            parser.error(f"--etcd: {args.etcd} does not exist (scripts/control-plane.sh build caches one)")
        if not args.binary.exists():
            build_upstream(args.binary)
    load_before = os.getloadavg()
    started = time.time()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="pykoord-upstream-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.shapes:
            shape = SHAPES[name]
            ours, our_cpu = _run_json(koord_command(shape))
            up: UpstreamThroughput | None = None
            up_cpu: float | None = None
            if not args.skip_upstream:
                up, up_cpu = run_upstream(args.binary, args.etcd, name, work)
            row = Row(
                name,
                float(ours["pods_per_second"]),
                up.average if up else None,
                round(our_cpu, 2),
                round(up_cpu, 2) if up_cpu is not None else None,
                ours,
            )
            print(
                f"# {name}: koord {row.koord_pods_per_s:.1f} pods/s, upstream "
                f"{row.upstream_pods_per_s if up else '-'} pods/s",
                file=sys.stderr,
                flush=True,
            )
            rows.append(row)
    conditions = {
        "nproc": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.time() - started),
        "python": sys.version.split()[0],
    }
    print(format_table(rows))
    print(f"# {IN_PROCESS_NOTE}")
    print(
        "# CPU-s: the whole child process (koord: node/pod setup + init + measured; upstream: apiserver + etcd"
        " + scheduler + pod creation, for the whole workload)."
    )
    print(f"# conditions: {json.dumps(conditions)}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "conditions": conditions,
                    "note": IN_PROCESS_NOTE,
                    "rows": [{**asdict(r), "ratio": r.ratio} for r in rows],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
