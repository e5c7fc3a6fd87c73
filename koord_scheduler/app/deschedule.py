"""``koord-scheduler deschedule``: the what-if of one descheduling round on a cluster file.

Reads Nodes, Pods, NodeMetrics and PodMigrationJobs from ``--cluster`` (the ``simulate`` file format) and a
DeschedulerConfiguration (``--config``, Koordinator's file unchanged), runs one round of the configured
Balance plugins and prints each planned migration with its reason and the cool node its usage was counted
against; nothing is created or evicted. The round's time is the newest NodeMetric ``updateTime`` (so a
saved cluster's metrics are fresh), or ``--now``. Pods that an unfinished PodMigrationJob in the file
already moves are left out. Exit status: 0, 1 when the cluster file had problems, 2 for bad usage.

Every anomaly detector starts empty, so a LowNodeLoad whose ``anomalyCondition`` asks for more than one
consecutive abnormal round plans nothing here unless ``--rounds`` repeats the round that many times.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


def deschedule_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="koord-scheduler deschedule", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cluster", required=True, help="cluster file (Nodes, Pods, NodeMetrics, PodMigrationJobs)")
    parser.add_argument("--config", required=True, help="DeschedulerConfiguration file (descheduler/v1alpha2)")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.add_argument("--now", help="the round's time, RFC 3339 (default: the newest NodeMetric updateTime)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds to run (anomaly detectors); the last is shown")
    ns = parser.parse_args(list(argv))

    from apis.config.descheduler import load_descheduler_config
    from apis.config.errors import ConfigError
    from apis.core.parse import parse_timestamp
    from apis.core.types import Pod
    from apis.scheduling.migration import parse_pod_migration_job
    from apis.slo.nodemetric_record import parse_node_metric
    from koord_scheduler.app.cluster_file import load_cluster_file
    from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
    from koord_scheduler.descheduler.round import Descheduler, describe

    try:
        config, args = load_descheduler_config(ns.config)
    except ConfigError as exc:
        print(f"koord-scheduler deschedule: {exc}", file=sys.stderr)
        return EXIT_USAGE
    cluster = load_cluster_file(
        ns.cluster, {"NodeMetric": parse_node_metric, "PodMigrationJob": parse_pod_migration_job}
    )
    for problem in cluster.problems:
        print(f"warning: {problem}", file=sys.stderr)
    metrics = {}
    for _, raw in cluster.objects.get("NodeMetric", []):
        record = parse_node_metric(raw)
        metrics[record.name] = record
    migrating = set()
    for _, raw in cluster.objects.get("PodMigrationJob", []):
        job = parse_pod_migration_job(raw)
        if not job.finished:
            migrating.add(f"{job.pod_namespace}/{job.pod_name}")
    try:
        now = parse_timestamp(ns.now) if ns.now else None
    except ValueError as exc:
        print(f"koord-scheduler deschedule: --now: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if now is None:
        now = max((m.update_time for m in metrics.values() if m.update_time is not None), default=0.0) + 1.0
    pods_by_node: dict[str, list[Pod]] = {}
    for pod in cluster.pods:
        if pod.node_name:
            pods_by_node.setdefault(pod.node_name, []).append(pod)
    descheduler = Descheduler(config, args, clock=lambda: now)
    view = ClusterView(sorted(cluster.nodes, key=lambda n: n.name), pods_by_node, metrics, now)
    plan = descheduler.plan(view, migrating=migrating)
    for _ in range(max(0, ns.rounds - 1)):
        plan = descheduler.plan(view, migrating=migrating)
    if ns.output == "json":
        print(
            json.dumps(
                {
                    "migrations": [
                        {
                            "pod": m.key,
                            "node": m.node,
                            "target": m.target,
                            "reason": m.reason,
                            "plugin": m.plugin,
                            "profile": m.profile,
                        }
                        for m in plan.migrations
                    ],
                    "notes": list(plan.notes),
                },
                indent=2,
            )
        )
    else:
        print("\n".join(describe(plan)))
    return EXIT_PROBLEMS if cluster.problems else EXIT_OK
