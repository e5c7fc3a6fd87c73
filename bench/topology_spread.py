"""scheduler_perf's TopologySpreading, in-process, with the default profile.

Nodes (node-default: 4 CPU / 32Gi / 110 pods) are labelled ``topology.kubernetes.io/zone`` with one of
moon-1..3 (round robin; upstream's labelNodePrepareStrategy), ``--init-pods`` pod-default pods are scheduled
first, then ``--measure-pods`` pod-with-topology-spreading pods (``color: blue``, DoNotSchedule zone spread
with maxSkew 5) are timed. Defaults: ``SHAPES["TopologySpreading"]`` in topology_common.py.

    python bench/topology_spread.py                       # 1000 nodes, 1000 + 1000 pods
    python bench/topology_spread.py --nodes 5000 --init-pods 5000 --measure-pods 2000 --json
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

SHAPE = SHAPES["TopologySpreading"]


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
