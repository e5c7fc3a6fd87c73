"""scheduler_perf's TopologySpreading, in-process, with the default profile.

Nodes (node-default: 4 CPU / 32Gi / 110 pods) are labelled ``topology.kubernetes.io/zone`` with one of
moon-1..3 (round robin; upstream's labelNodePrepareStrategy), ``--init-pods`` default pods are scheduled
first, then ``--measure-pods`` pods with a DoNotSchedule zone spread (maxSkew 5, ``foo: bar``) are timed.

    python bench/topology_spread.py                       # 1000 nodes, 1000 + 1000 pods
    python bench/topology_spread.py --nodes 5000 --init-pods 5000 --measure-pods 2000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from topology_common import node_obj, pod_obj, run

ZONES = ("moon-1", "moon-2", "moon-3")
SPREAD = {
    "topologySpreadConstraints": [{
        "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"foo": "bar"}},
    }]
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--init-pods", type=int, default=1000)
    parser.add_argument("--measure-pods", type=int, default=1000)
    parser.add_argument("--percentage", type=int, default=0, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nodes = [node_obj(i, {"topology.kubernetes.io/zone": ZONES[i % 3]}) for i in range(args.nodes)]
    init = [pod_obj(f"pod-{i}", "default") for i in range(args.init_pods)]
    measure = [pod_obj(f"spreading-pod-{i}", "default", labels={"foo": "bar"}, spec_extra=SPREAD)
               for i in range(args.measure_pods)]
    result = asyncio.run(run(nodes, init, measure, pct=args.percentage))
    result["workload"] = "TopologySpreading"
    print(json.dumps(result, indent=2 if args.json else None))


if __name__ == "__main__":
    main()
