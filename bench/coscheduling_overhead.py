"""What enabling Coscheduling costs pods that are not in any gang: SchedulingBasic at 1,000 nodes with
the default profile, and with the default profile plus Coscheduling (multiPoint), in one invocation.

Each run is its own process; the profiles alternate (A B A B ...) so drift on a shared machine hits both,
and the best run of each is compared, by wall-clock rate and by CPU rate (pods per CPU-second of the
process, which other load on a shared machine disturbs far less). Target: the Coscheduling profile within
5% of the default one.

    python bench/coscheduling_overhead.py                     # short: 1,000 nodes, 2,000 pods, 2 rounds
    python bench/coscheduling_overhead.py --pods 10000 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from typing import Any

from scheduler_throughput import run_once  # bench/ is the script directory

CONFIGS = {
    "default": """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
""",
    "coscheduling": """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
""",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--placed", type=int, default=500)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", choices=tuple(CONFIGS), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.profile is not None:
        result = asyncio.run(run_once(args.nodes, args.placed, args.pods, CONFIGS[args.profile]))
        result["profile"] = args.profile
        print(json.dumps(result))
        return
    runs: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        for profile in CONFIGS:
            cmd = [
                sys.executable,
                __file__,
                "--profile",
                profile,
                "--nodes",
                str(args.nodes),
                "--placed",
                str(args.placed),
                "--pods",
                str(args.pods),
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    best = {p: max(r["pods_per_second"] for r in runs if r["profile"] == p) for p in CONFIGS}
    best_cpu = {p: max(r["bound"] / r["cpu_seconds"] for r in runs if r["profile"] == p) for p in CONFIGS}
    ratio = best["coscheduling"] / best["default"]
    cpu_ratio = best_cpu["coscheduling"] / best_cpu["default"]
    if args.json:
        print(
            json.dumps(
                {
                    "runs": runs,
                    "best": best,
                    "best_cpu": best_cpu,
                    "ratio": round(ratio, 3),
                    "cpu_ratio": round(cpu_ratio, 3),
                },
                indent=2,
            )
        )
        return
    print(f"{'profile':>13} {'pods/s (best)':>14} {'pods/CPU-s (best)':>18}")
    for profile, rate in best.items():
        print(f"{profile:>13} {rate:>14.1f} {best_cpu[profile]:>18.1f}")
    print(
        f"coscheduling / default: wall {ratio:.3f} ({(1 - ratio) * 100:+.1f}% slower), "
        f"CPU {cpu_ratio:.3f} ({(1 - cpu_ratio) * 100:+.1f}% slower)"
    )


if __name__ == "__main__":
    main()
