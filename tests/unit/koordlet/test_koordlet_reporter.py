import pytest
from koordlet_fakes import make_raw_pod

from apis.slo import ResolvedCollectPolicy
from koordlet.metriccache import MetricCache, MetricKind
from koordlet.metricsadvisor import CacheUsageSource
from koordlet.statesinformer import StatesInformer, build_node_metric_status
from koordlet.system import CgroupDriver, CgroupLayout
from koordlet.system.clock import FakeClock

NOW = 1_800_000_000.0


def _fill(cache: MetricCache, kind: MetricKind, key: str, seconds: int, value: float) -> None:
    for i in range(seconds):
        cache.append(kind, key, NOW - seconds + 1 + i, value)


def _informer() -> StatesInformer:
    informer = StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.CGROUPFS))
    informer.replace_pods(
        [
            make_raw_pod("web", "uid-web", namespace="b", qos="Guaranteed", priority=9500),
            make_raw_pod(
                "job",
                "uid-job",
                namespace="a",
                qos="BestEffort",
                labels={"koordinator.sh/qosClass": "BE"},
                priority=5500,
            ),
            make_raw_pod("new", "uid-new", namespace="c"),  # no metrics yet: left out
        ]
    )
    return informer


def test_status_shape_and_cold_start() -> None:
    cache = MetricCache(clock=FakeClock(NOW))
    _fill(cache, MetricKind.NODE_CPU_USAGE, "", 250, 1.5)  # 250 s: warm for 5m only
    _fill(cache, MetricKind.NODE_MEMORY_USAGE, "", 250, float(2 << 30))
    _fill(cache, MetricKind.SYS_CPU_USAGE, "", 250, 0.25)
    _fill(cache, MetricKind.SYS_MEMORY_USAGE, "", 250, float(100 << 20))
    for uid, cpu in (("uid-web", 0.5), ("uid-job", 0.75)):
        _fill(cache, MetricKind.POD_CPU_USAGE, uid, 250, cpu)
        _fill(cache, MetricKind.POD_MEMORY_USAGE, uid, 250, float(200 << 20))
    status = build_node_metric_status(
        CacheUsageSource(cache), _informer().get_all_pods(), ResolvedCollectPolicy(), NOW
    ).to_wire()
    want_usage = {"resources": {"cpu": "1500m", "memory": "2Gi"}}
    assert status["updateTime"] == "2027-01-15T08:00:00Z"
    assert status["nodeMetric"]["nodeUsage"] == want_usage
    assert status["nodeMetric"]["systemUsage"] == {"resources": {"cpu": "250m", "memory": "100Mi"}}
    assert status["nodeMetric"]["aggregatedNodeUsages"] == [
        {"duration": "5m0s", "usage": {agg: want_usage for agg in ("avg", "p50", "p90", "p95", "p99")}}
    ]
    assert status["podsMetric"] == [
        {
            "namespace": "a",
            "name": "job",
            "priority": "koord-batch",
            "qos": "BE",
            "podUsage": {"resources": {"cpu": "750m", "memory": "200Mi"}},
        },
        {
            "namespace": "b",
            "name": "web",
            "priority": "koord-prod",
            "qos": "LSR",
            "podUsage": {"resources": {"cpu": "500m", "memory": "200Mi"}},
        },
    ]


@pytest.mark.parametrize(
    ("seconds", "want_durations"),
    [
        pytest.param(100, [], id="all-cold"),
        pytest.param(150, ["5m0s"], id="exactly-half-of-5m"),
        pytest.param(900, ["5m0s", "10m0s", "30m0s"], id="half-of-30m"),
        pytest.param(2000, ["5m0s", "10m0s", "30m0s"], id="all-warm"),
    ],
)
def test_window_exclusion(seconds: int, want_durations: list[str]) -> None:
    cache = MetricCache(clock=FakeClock(NOW))
    # 1 sample per second, first at NOW - seconds + 1 ... span = seconds - 1; add one to reach the edge
    for i in range(seconds + 1):
        cache.append(MetricKind.NODE_CPU_USAGE, "", NOW - seconds + i, float(i))
    status = build_node_metric_status(CacheUsageSource(cache), [], ResolvedCollectPolicy(), NOW)
    got = [a.duration for a in (status.node_metric.aggregated_node_usages or [])]  # type: ignore[union-attr]
    assert got == want_durations


def test_percentiles_in_status() -> None:
    cache = MetricCache(clock=FakeClock(NOW))
    for i in range(301):
        cache.append(MetricKind.NODE_CPU_USAGE, "", NOW - 300 + i, float(i % 100) / 10)  # 0.0 .. 9.9 cores
    status = build_node_metric_status(CacheUsageSource(cache), [], ResolvedCollectPolicy(), NOW)
    five = status.aggregated_node_usage("5m", "p90")
    assert five is not None and five.cpu_milli == 8900
    p99 = status.aggregated_node_usage("5m", "p99")
    assert p99 is not None and p99.cpu_milli == 9800


def test_prediction_is_reported_for_the_pods_with_metrics() -> None:
    cache = MetricCache(clock=FakeClock(NOW))
    for uid in ("uid-web", "uid-job"):
        _fill(cache, MetricKind.POD_CPU_USAGE, uid, 60, 0.5)
        _fill(cache, MetricKind.POD_MEMORY_USAGE, uid, 60, float(200 << 20))
    seen: list[list[str]] = []

    def predicted(pods, now):  # type: ignore[no-untyped-def]
        seen.append(sorted(p.uid for p in pods))
        return {"cpu": 1500, "memory": 1 << 30}, {"cpu": 2500, "memory": 3 << 30}

    pods = _informer().get_all_pods()
    status = build_node_metric_status(
        CacheUsageSource(cache), pods, ResolvedCollectPolicy(), NOW, prediction=predicted
    ).to_wire()
    assert seen == [["uid-job", "uid-web"]]  # "new" has no metrics: not handed to the predictor
    assert status["prodReclaimableMetric"] == {"resource": {"resources": {"cpu": "1500m", "memory": "1Gi"}}}
    assert status["prodPeakMetric"] == {"resource": {"resources": {"cpu": "2500m", "memory": "3Gi"}}}
    cannot = build_node_metric_status(
        CacheUsageSource(cache), pods, ResolvedCollectPolicy(), NOW, prediction=lambda pods, now: None
    ).to_wire()
    assert cannot["prodReclaimableMetric"] == {} and "prodPeakMetric" not in cannot
    without = build_node_metric_status(CacheUsageSource(cache), pods, ResolvedCollectPolicy(), NOW).to_wire()
    assert "prodReclaimableMetric" not in without
