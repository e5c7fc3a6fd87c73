"""Cost of the koordlet's peak predictor at N pods: CPU per training step and per report, model memory,
checkpoint size and time.

In process, simulated time: N koord-prod pods (and the node) report a p90 usage every training interval
(60 s), wandering around their means; the server trains every minute for ``--minutes`` simulated minutes,
writes its due checkpoints each minute to a temp directory, and the reporter's prediction
(``ProdPeakReport``) runs once a minute. CPU is ``time.process_time`` of those calls alone; memory is what
``tracemalloc`` sees allocated by the models. For scale, the same run times the NodeMetric status the
reporter builds each minute from a metric cache holding 30 min of 1 s samples per pod.

    .venv/bin/python bench/peak_predictor.py [--pods 100] [--minutes 120]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from apis.extension import KubeQOSClass, PriorityClass, QoSClass
from apis.slo import ResolvedCollectPolicy
from koordlet.metriccache import MetricCache, MetricCacheOptions, MetricKind
from koordlet.metricsadvisor import CacheUsageSource
from koordlet.prediction import PeakPredictServer, PredictionConfig, ProdPeakReport
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.statesinformer.pods import ContainerMeta, PodMeta
from koordlet.system import CgroupDriver, CgroupLayout
from koordlet.system.clock import FakeClock

GI = 1 << 30
START = 1_700_000_000.0


class Source:
    def __init__(self, pods: int, rng: random.Random) -> None:
        self.means = {f"uid-{i}": (0.1 + 0.01 * (i % 50), (256 + 8 * i) * (1 << 20)) for i in range(pods)}
        self.rng = rng

    def _wander(self, value: float) -> float:
        return value * (1 + self.rng.uniform(-0.3, 0.3))

    def pod_p90(self, pod_uid: str, resource: str, start: float, end: float) -> float | None:
        mean = self.means[pod_uid]
        return self._wander(mean[0] if resource == "cpu" else mean[1])

    def node_p90(self, resource: str, start: float, end: float) -> float | None:
        total = sum(m[0 if resource == "cpu" else 1] for m in self.means.values())
        return self._wander(total * 1.1)


def pods_of(count: int) -> list[PodMeta]:
    return [
        PodMeta(
            uid=f"uid-{i}",
            namespace="default",
            name=f"pod-{i}",
            kube_qos=KubeQOSClass.BURSTABLE,
            qos=QoSClass.LS,
            priority_class=PriorityClass.PROD,
            priority=9500,
            cgroup_dir="",
            phase="Running",
            created=START - 2 * 86400,
            containers=(ContainerMeta("c", None, {"cpu": 1000, "memory": 2 * GI}, {}),),
        )
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=120)
    args = parser.parse_args()
    rng = random.Random(3)
    pods = pods_of(args.pods)
    source = Source(args.pods, rng)
    clock = FakeClock(START)
    informer = StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.CGROUPFS))
    informer.set_node({"metadata": {"name": "node-1"}, "status": {"allocatable": {"cpu": "128", "memory": "512Gi"}}})
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        baseline = tracemalloc.take_snapshot()
        server = PeakPredictServer(PredictionConfig(checkpoint_dir=Path(tmp)), clock=clock)
        report = ProdPeakReport(server, informer)
        train_cpu = predict_cpu = checkpoint_cpu = 0.0
        written = 0
        for minute in range(args.minutes):
            now = START + 60 * minute
            clock.now = now
            t0 = time.process_time()
            server.train(pods, source, now)
            t1 = time.process_time()
            result = report(pods, now)
            t2 = time.process_time()
            server.gc(now)
            written += server.checkpoint(now)
            t3 = time.process_time()
            train_cpu += t1 - t0
            predict_cpu += t2 - t1
            checkpoint_cpu += t3 - t2
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        model_bytes = sum(s.size_diff for s in snapshot.compare_to(baseline, "filename") if s.size_diff > 0)
        files = list(Path(tmp).iterdir())
        disk = sum(f.stat().st_size for f in files)
    assert result is not None
    # the reporter's own work each minute, for scale: a 30-minute cache of 1 s samples for every pod
    cache = MetricCache(MetricCacheOptions(), clock=FakeClock(START + 1800))
    for t in range(1800):
        stamp = START + t
        cache.append(MetricKind.NODE_CPU_USAGE, "", stamp, 30.0)
        cache.append(MetricKind.NODE_MEMORY_USAGE, "", stamp, 100.0 * GI)
        for pod in pods:
            cache.append(MetricKind.POD_CPU_USAGE, pod.uid, stamp, 0.3)
            cache.append(MetricKind.POD_MEMORY_USAGE, pod.uid, stamp, float(GI))
    t0 = time.process_time()
    for _ in range(5):
        build_node_metric_status(CacheUsageSource(cache), pods, ResolvedCollectPolicy(), START + 1800)
    status_cpu = (time.process_time() - t0) / 5
    minutes = args.minutes
    print(f"{args.pods} prod pods, {minutes} simulated minutes, {len(server.models)} models")
    print(f"training:    {1000 * train_cpu / minutes:.2f} ms CPU per step (once a minute)")
    print(f"prediction:  {1000 * predict_cpu / minutes:.2f} ms CPU per report")
    print(f"gc+checkpoint: {1000 * checkpoint_cpu / minutes:.2f} ms CPU per minute ({written} files written)")
    total = (train_cpu + predict_cpu + checkpoint_cpu) / minutes
    print(f"predictor total: {1000 * total:.2f} ms CPU per minute = {100 * total / 60:.4f} % of a core")
    print(
        f"NodeMetric status build (same run, for scale): {1000 * status_cpu:.2f} ms CPU per report; "
        f"predictor / status = {total / status_cpu:.2f}"
    )
    print(f"model memory: {model_bytes / 1024:.0f} KiB ({model_bytes / len(server.models) / 1024:.1f} KiB per model)")
    print(f"checkpoints on disk: {len(files)} files, {disk / 1024:.0f} KiB")
    print(f"last prediction: reclaimable {result[0]}, peak {result[1]}")


if __name__ == "__main__":
    main()
