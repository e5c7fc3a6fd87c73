"""scheduler_perf's SchedulingPodAntiAffinity, in-process, with the default profile.

``--init-pods`` pods in namespace sched-0 and then ``--measure-pods`` timed pods in sched-1, all from
pod-with-pod-anti-affinity.yaml: label ``color: green`` and a required hostname anti-affinity to
``color: green`` in namespaces sched-0 and sched-1 (so at most one per node). Defaults:
``SHAPES["SchedulingPodAntiAffinity"]`` in topology_common.py.

    python bench/pod_anti_affinity.py                     # 1000 nodes, 200 + 800 pods
    python bench/pod_anti_affinity.py --nodes 5000 --init-pods 1000 --measure-pods 1000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from topology_common import SHAPES, run

SHAPE = SHAPES["SchedulingPodAntiAffinity"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=SHAPE.nodes)
    parser.add_argument("--init-pods", type=int, default=SHAPE.init_pods)
    parser.add_argument("--measure-pods", type=int, default=SHAPE.measure_pods)
    parser.add_argument("--percentage", type=int, default=0, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shape = replace(SHAPE, nodes=args.nodes, init_pods=args.init_pods, measure_pods=args.measure_pods)
    result = asyncio.run(run(shape.node_objs(), shape.init_objs(), shape.measure_objs(), pct=args.percentage))
    result["workload"] = shape.name
    print(json.dumps(result, indent=2 if args.json else None))


if __name__ == "__main__":
    main()
