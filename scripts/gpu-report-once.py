#!/usr/bin/env python3
"""Run koordlet's GPU reporter once against the real NVML and print the Device object it builds.

For a node with an NVIDIA GPU, to check the ``Accelerators`` path on real hardware. It needs only
``nvidia-ml-py`` and ``prometheus-client`` (the reporter module is loaded on its own, not through the
``koordlet`` package, so the rest of the agent's dependencies need not be installed)::

    python3 scripts/gpu-report-once.py --node gpu-node-1 > device.json

Exit status: 0 when a Device object was built, 1 when the reporter reported nothing (the reason is printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType

REPORTER = Path(__file__).resolve().parent.parent / "koordlet" / "metricsadvisor" / "gpu.py"


def load_reporter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("koordlet_gpu_reporter", REPORTER)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {REPORTER}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", default="gpu-node", help="node name for the Device object")
    args = parser.parse_args()
    from prometheus_client import CollectorRegistry, generate_latest

    gpu = load_reporter()
    registry = CollectorRegistry()
    reporter = gpu.GPUReporter(args.node, registry, clock=time.time)
    start = time.perf_counter()
    device = reporter.tick()
    first = time.perf_counter() - start
    start = time.perf_counter()
    reporter.tick()
    second = time.perf_counter() - start
    if device is None:
        print(f"no Device reported: {reporter.unavailable}", file=sys.stderr)
        return 1
    print(json.dumps(device, indent=2))
    print(f"first tick {first * 1000:.1f} ms (NVML init included), second tick {second * 1000:.1f} ms", file=sys.stderr)
    metrics = generate_latest(registry).decode()
    print("\n".join(line for line in metrics.splitlines() if line.startswith("koordlet_gpu")), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
