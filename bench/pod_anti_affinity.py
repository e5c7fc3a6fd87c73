"""scheduler_perf's SchedulingPodAntiAffinity, in-process, with the default profile.

``--init-pods`` pods in namespace sched-0 and then ``--measure-pods`` timed pods in sched-1, all from
pod-with-pod-anti-affinity.yaml: labels ``color: green, name: test`` and a required hostname
anti-affinity to ``color: green`` in namespaces sched-0 and sched-1 (so at most one per node).

    python bench/pod_anti_affinity.py                     # 1000 nodes, 200 + 800 pods
    python bench/pod_anti_affinity.py --nodes 5000 --init-pods 1000 --measure-pods 1000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from topology_common import node_obj, pod_obj, run

LABELS = {"color": "green", "name": "test"}
ANTI = {
    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": "kubernetes.io/hostname",
        "namespaces": ["sched-0", "sched-1"],
    }]}}
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--init-pods", type=int, default=200)
    parser.add_argument("--measure-pods", type=int, default=800)
    parser.add_argument("--percentage", type=int, default=0, help="percentageOfNodesToScore (0 = adaptive)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nodes = [node_obj(i) for i in range(args.nodes)]
    init = [pod_obj(f"anti-affinity-pod-{i}", "sched-0", labels=LABELS, spec_extra=ANTI)
            for i in range(args.init_pods)]
    measure = [pod_obj(f"anti-affinity-pod-{i}", "sched-1", labels=LABELS, spec_extra=ANTI)
               for i in range(args.measure_pods)]
    result = asyncio.run(run(nodes, init, measure, pct=args.percentage))
    result["workload"] = "SchedulingPodAntiAffinity"
    print(json.dumps(result, indent=2 if args.json else None))


if __name__ == "__main__":
    main()
