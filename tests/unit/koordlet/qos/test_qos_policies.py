"""Hand-computed tables for every strategy formula. Case ids name the Koordinator rule they check."""

from __future__ import annotations

import pytest
from qos_helpers import pod

from apis.slo.nodeslo import MemoryQOSCfg, ResourceThresholdStrategy
from koordlet.qosmanager.plugins.cgreconcile.policy import MemoryQOSValues, memory_qos_values
from koordlet.qosmanager.plugins.cpuburst.policy import (
    Operation,
    PoolState,
    TokenBucket,
    container_cfs_burst_us,
    container_operation,
    policy_switches,
    quota_write_plan,
    scaled_quota,
    share_pool_state,
)
from koordlet.qosmanager.plugins.cpuevict.policy import (
    BECPUEvictConfig,
    BEUsage,
    CPUEvictConfig,
    CPUSnapshot,
    be_cpu_evict_config,
    be_cpu_evict_plan,
    be_cpu_release,
    cpu_evict_plan,
)
from koordlet.qosmanager.plugins.cpusuppress.policy import (
    CPUInfo,
    PodCPU,
    SuppressInput,
    be_cfs_quota,
    be_cpuset_size,
    choose_be_cpus,
    cpuset_write_plan,
    suppress_be_milli,
)
from koordlet.qosmanager.plugins.eviction import plan_victims, release_from_threshold
from koordlet.qosmanager.plugins.memoryevict.policy import (
    MemoryEvictConfig,
    MemorySnapshot,
    be_memory_evict_plan,
    memory_evict_config,
    memory_evict_plan,
)
from koordlet.statesinformer import PodMeta, parse_pod
from koordlet.system import CgroupDriver, CgroupLayout

LAYOUT = CgroupLayout.for_driver(CgroupDriver.CGROUPFS)
GiB = 1 << 30


def meta(raw: dict[str, object]) -> PodMeta:
    return parse_pod(raw, LAYOUT)


# -- CPUSuppress ---------------------------------------------------------------------------------

LS, BE = PodCPU(False, 0), PodCPU(True, 0)


@pytest.mark.parametrize(
    ("inp", "want"),
    [
        pytest.param(
            SuppressInput(8000, 8000, 3000, (PodCPU(False, 2000), PodCPU(True, 1000))),
            8000 * 0.65 - 2000 - 0,
            id="capacity-x-65-minus-ls",
        ),
        pytest.param(
            SuppressInput(8000, 8000, 4000, (PodCPU(False, 2000), PodCPU(True, 1000))),
            5200 - 2000 - 1000,
            id="system-usage-subtracted",
        ),
        pytest.param(
            SuppressInput(8000, 7000, 3000, (PodCPU(False, 2000), PodCPU(True, 1000))),
            5200 - 2000 - 1000,
            id="system-at-least-kubelet-reserved",
        ),
        pytest.param(
            SuppressInput(8000, 8000, 3000, (PodCPU(False, 2000),), reservation_milli=1500),
            5200 - 2000 - 1500,
            id="system-at-least-annotation-reservation",
        ),
        pytest.param(
            SuppressInput(8000, 8000, 7000, (PodCPU(False, 7000),)), 5200 - 7000, id="negative-when-ls-over-threshold"
        ),
        pytest.param(
            SuppressInput(8000, 8000, 7000, (PodCPU(False, 7000),), min_percent=10), 800, id="min-percent-floor"
        ),
        pytest.param(
            SuppressInput(8000, 8000, 2000, (PodCPU(False, None), PodCPU(False, 2000))),
            5200 - 2000,
            id="pod-without-metric-counts-zero",
        ),
        pytest.param(
            SuppressInput(4000, 4000, 1000, (PodCPU(False, 1000),), threshold_percent=50), 1000, id="threshold-percent"
        ),
        pytest.param(
            SuppressInput(8000, 8000, 2500, (PodCPU(False, 2000),), host_apps=(PodCPU(False, 500),)),
            5200 - 2000 - 500,
            id="non-be-host-app",
        ),
    ],
)
def test_suppress_be_milli(inp: SuppressInput, want: float) -> None:
    assert suppress_be_milli(inp) == pytest.approx(want)


@pytest.mark.parametrize(
    ("suppress", "current", "want"),
    [
        pytest.param(500, -1, 50000, id="from-unlimited-at-once"),
        pytest.param(-300, -1, 2000, id="floor-2000us"),
        pytest.param(3000, 300000, None, id="unchanged"),
        pytest.param(3015, 300000, None, id="dead-band-under-1pct-of-node"),
        pytest.param(3100, 300000, 310000, id="outside-dead-band"),
        pytest.param(10, 2500, 2000, id="floor-written-inside-dead-band"),
        pytest.param(8000, 100000, 180000, id="increase-capped-10pct-of-node"),
        pytest.param(500, 600000, 50000, id="decrease-immediate"),
    ],
)
def test_be_cfs_quota(suppress: float, current: int, want: int | None) -> None:
    assert be_cfs_quota(suppress, current, 8000, 100000) == want


@pytest.mark.parametrize(
    ("suppress", "current", "cpus", "want"),
    [
        pytest.param(500, 8, 8, 2, id="at-least-2-cpus"),
        pytest.param(4100, 8, 8, 5, id="ceil-cores"),
        pytest.param(8000, 2, 8, 3, id="grow-by-ceil-10pct-of-cpus"),
        pytest.param(32000, 4, 32, 8, id="grow-10pct-of-32-is-4"),
        pytest.param(1000, 30, 32, 2, id="shrink-immediate"),
        pytest.param(64000, 0, 32, 32, id="no-current-set-no-step"),
    ],
)
def test_be_cpuset_size(suppress: float, current: int, cpus: int, want: int) -> None:
    assert be_cpuset_size(suppress, current, cpus) == want


# 2 sockets x 2 cores x 2 threads: cpu i and i+4 are siblings (core i%4 // ... )
TOPO = [CPUInfo(cpu, core=cpu % 4, socket=(cpu % 4) // 2, numa=(cpu % 4) // 2) for cpu in range(8)]


@pytest.mark.parametrize(
    ("count", "excluded", "want"),
    [
        pytest.param(2, (), {0, 4}, id="ht-pair-first"),
        pytest.param(4, (), {0, 4, 2, 6}, id="pairs-round-robin-over-numa"),
        pytest.param(3, (), {0, 4, 2}, id="then-singles"),
        pytest.param(2, (0,), {2, 6}, id="reserved-cpu-largest-bucket-first"),
        pytest.param(8, (), set(range(8)), id="all"),
    ],
)
def test_choose_be_cpus(count: int, excluded: tuple[int, ...], want: set[int]) -> None:
    assert choose_be_cpus(count, TOPO, excluded) == frozenset(want)


def test_cpuset_write_order_widen_top_down_then_narrow_bottom_up() -> None:
    levels = [["be"], ["be/p1"], ["be/p1/c1"]]
    got = [(u.rel_dir, u.value) for u in cpuset_write_plan(levels, frozenset({0, 1}), frozenset({1, 2}), "t")]
    want = [("be", "0-2"), ("be/p1", "0-2"), ("be/p1/c1", "0-2"), ("be/p1/c1", "1-2"), ("be/p1", "1-2"), ("be", "1-2")]
    assert got == want


def test_cpuset_write_order_pure_narrow_skips_union() -> None:
    got = [u.rel_dir for u in cpuset_write_plan([["be"], ["be/p"]], frozenset({0, 1, 2}), frozenset({0}), "t")]
    assert got == ["be/p", "be"]


# -- CPUBurst ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "want"),
    [
        pytest.param("none", (False, False), id="none"),
        pytest.param("cpuBurstOnly", (True, False), id="cpuBurstOnly"),
        pytest.param("cfsQuotaBurstOnly", (False, True), id="cfsQuotaBurstOnly"),
        pytest.param("auto", (True, True), id="auto"),
        pytest.param("bogus", (False, False), id="unknown-is-none"),
    ],
)
def test_policy_switches(policy: str, want: tuple[bool, bool]) -> None:
    assert policy_switches(policy) == want


def test_static_burst_limit_x_percent_x_period() -> None:
    assert container_cfs_burst_us(2000, 1000, 100000) == 2_000_000
    assert container_cfs_burst_us(500, 200, 100000) == 100_000


@pytest.mark.parametrize(
    ("used", "excl_used", "excl_req", "want"),
    [
        pytest.param(None, 0, 0, PoolState.UNKNOWN, id="no-data-unknown"),
        pytest.param(5000, 1000, 0, PoolState.OVERLOAD, id="ge-threshold-overload"),
        pytest.param(4600, 1000, 0, PoolState.COOLING, id="ge-90pct-threshold-cooling"),
        pytest.param(3000, 0, 0, PoolState.IDLE, id="idle"),
        pytest.param(2500, 0, 4000, PoolState.OVERLOAD, id="lsr-requests-shrink-pool"),
    ],
)
def test_share_pool_state(used: float | None, excl_used: float, excl_req: float, want: PoolState) -> None:
    assert share_pool_state(used, excl_used, 8000, excl_req, 50) == want


@pytest.mark.parametrize(
    ("throttled", "allows", "pool", "enabled", "want"),
    [
        pytest.param(0.3, True, PoolState.IDLE, True, Operation.UP, id="throttled-scale-up"),
        pytest.param(0.0, True, PoolState.IDLE, True, Operation.REMAIN, id="not-throttled-remain"),
        pytest.param(0.3, False, PoolState.IDLE, True, Operation.DOWN, id="limiter-denies-down"),
        pytest.param(0.3, True, PoolState.OVERLOAD, True, Operation.DOWN, id="overload-up-to-down"),
        pytest.param(0.0, True, PoolState.OVERLOAD, True, Operation.DOWN, id="overload-remain-to-down"),
        pytest.param(0.3, True, PoolState.COOLING, True, Operation.REMAIN, id="cooling-up-to-remain"),
        pytest.param(0.3, True, PoolState.UNKNOWN, True, Operation.REMAIN, id="unknown-up-to-remain"),
        pytest.param(0.3, True, PoolState.IDLE, False, Operation.RESET, id="disabled-reset"),
    ],
)
def test_container_operation(throttled: float, allows: bool, pool: PoolState, enabled: bool, want: Operation) -> None:
    assert container_operation(throttled, allows, pool, enabled) == want


@pytest.mark.parametrize(
    ("current", "op", "want"),
    [
        pytest.param(100000, Operation.UP, 120000, id="up-x1.2"),
        pytest.param(200000, Operation.DOWN, 160000, id="down-x0.8"),
        pytest.param(280000, Operation.UP, 300000, id="clamped-to-base-x-300pct"),
        pytest.param(110000, Operation.DOWN, 100000, id="clamped-to-base"),
        pytest.param(250000, Operation.REMAIN, 250000, id="remain"),
        pytest.param(250000, Operation.RESET, 100000, id="reset-to-base"),
    ],
)
def test_scaled_quota(current: int, op: Operation, want: int) -> None:
    assert scaled_quota(current, 100000, 300, op) == want


def test_token_bucket_spends_above_limit_refills_below_60pct() -> None:
    bucket = TokenBucket(capacity=100.0, tokens=50.0, last_time=0.0)
    bucket, allowed = bucket.step(150, 1.0)  # 50 %-seconds spent
    assert (bucket.tokens, allowed) == (0.0, False)
    bucket, allowed = bucket.step(80, 2.0)  # between 60 and 100: unchanged
    assert (bucket.tokens, allowed) == (0.0, False)
    bucket, allowed = bucket.step(20, 4.0)  # refill 80 x 2 s, capped at capacity
    assert (bucket.tokens, allowed) == (100.0, True)


@pytest.mark.parametrize(
    ("old", "new", "want_first"),
    [
        pytest.param(200000, 240000, "pod", id="growing-parent-first"),
        pytest.param(240000, 200000, "c", id="shrinking-child-first"),
        pytest.param(200000, -1, "pod", id="to-unlimited-parent-first"),
    ],
)
def test_quota_write_order(old: int, new: int, want_first: str) -> None:
    plan = quota_write_plan("pod", old, new, [("c", new)], "t")
    assert plan[0].rel_dir == want_first


# -- eviction: release amounts and victim order --------------------------------------------------


@pytest.mark.parametrize(
    ("used", "want"),
    [
        pytest.param(0.69 * 100 * GiB, 0.0, id="under-threshold"),
        pytest.param(0.70 * 100 * GiB, 0.02 * 100 * GiB, id="at-threshold-release-to-lower"),
        pytest.param(0.755 * 100 * GiB, 0.07 * 100 * GiB, id="usage-percent-floored"),
    ],
)
def test_release_from_threshold(used: float, want: float) -> None:
    assert release_from_threshold(used, 100 * GiB, 70, 68) == pytest.approx(want)


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        pytest.param({"enable": False}, None, id="nodeslo-off"),
        pytest.param(
            {"enable": True, "memoryEvictThresholdPercent": 70},
            MemoryEvictConfig(70, 68, None),
            id="lower-defaults-threshold-minus-2",
        ),
        pytest.param(
            {"enable": True, "memoryEvictThresholdPercent": 80, "memoryEvictLowerPercent": 60},
            MemoryEvictConfig(80, 60, None),
            id="explicit-lower",
        ),
        pytest.param(
            {"enable": True, "memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 75},
            None,
            id="lower-not-below-threshold-invalid",
        ),
    ],
)
def test_memory_evict_config(fields: dict[str, object], want: MemoryEvictConfig | None) -> None:
    assert memory_evict_config(ResourceThresholdStrategy.model_validate(fields)) == want


def _mem_pods() -> tuple[tuple[PodMeta, float | None], ...]:
    return (
        (meta(pod("be-big-5500").be().priority(5500).build()), 8 * GiB),
        (meta(pod("be-small-5000").be().priority(5000).build()), 1 * GiB),
        (meta(pod("be-big-5000").be().priority(5000).build()), 4 * GiB),
        (meta(pod("be-nometric-5000").be().priority(5000).build()), None),
        (meta(pod("ls-9000").qos("Burstable", "LS").priority(9000).build()), 20 * GiB),
        (
            meta(
                pod("be-optout")
                .be()
                .priority(3000)
                .annotation("koordinator.sh/eviction-policy", '["CPUEvict"]')
                .build()
            ),
            9 * GiB,
        ),
    )


def test_be_memory_victim_order_priority_then_memory() -> None:
    snap = MemorySnapshot(100 * GiB, 75 * GiB, _mem_pods())
    plan = be_memory_evict_plan(snap, MemoryEvictConfig(70, 68))
    assert plan is not None
    assert plan.need == pytest.approx(7 * GiB)
    assert [c.name for c in plan.ordered] == [
        "default/be-big-5000",
        "default/be-small-5000",
        "default/be-nometric-5000",
        "default/be-big-5500",
    ]
    assert [c.name for c in plan_victims(plan.ordered, plan.need).victims] == [
        "default/be-big-5000",
        "default/be-small-5000",
        "default/be-nometric-5000",
        "default/be-big-5500",
    ]
    assert [c.name for c in plan_victims(plan.ordered, 5 * GiB).victims] == [
        "default/be-big-5000",
        "default/be-small-5000",
    ]


def test_victims_pending_eviction_count_without_reevicting() -> None:
    plan = be_memory_evict_plan(MemorySnapshot(100 * GiB, 75 * GiB, _mem_pods()), MemoryEvictConfig(70, 68))
    assert plan is not None
    first = plan.ordered[0].uid
    got = plan_victims(plan.ordered, 5 * GiB, pending={first})
    assert [c.name for c in got.victims] == ["default/be-small-5000"]
    assert [c.uid for c in got.pending] == [first] and got.outstanding == {}


def test_priority_memory_evict_opt_in_order_and_bytes_not_x1000() -> None:
    pods = (
        (meta(pod("a").priority(5000).label("koordinator.sh/eviction-enabled", "true").build()), 3 * GiB),
        (
            meta(
                pod("b")
                .priority(5000)
                .label("koordinator.sh/eviction-enabled", "true")
                .annotation("koordinator.sh/eviction-priority", "1")
                .build()
            ),
            1 * GiB,
        ),
        (meta(pod("c").priority(4000).label("koordinator.sh/eviction-enabled", "true").build()), 2 * GiB),
        (meta(pod("d-not-opted-in").priority(1000).build()), 9 * GiB),
        (
            meta(pod("e-over-threshold").priority(9000).label("koordinator.sh/eviction-enabled", "true").build()),
            9 * GiB,
        ),
        (
            meta(
                pod("f")
                .priority(4000)
                .label("koordinator.sh/eviction-enabled", "true")
                .label("koordinator.sh/priority", "-1")
                .build()
            ),
            1 * GiB,
        ),
    )
    cfg = MemoryEvictConfig(70, 68, priority_threshold=5999)
    plan = memory_evict_plan(MemorySnapshot(100 * GiB, 73 * GiB, pods), cfg)
    assert plan is not None and plan.need == pytest.approx(5 * GiB)
    assert [c.name.split("/")[1] for c in plan.ordered] == ["b", "f", "c", "a"]
    # 1 + 1 + 2 GiB < 5 GiB: Koordinator's x1000 would stop after "b"; bytes need all four
    assert [c.name.split("/")[1] for c in plan_victims(plan.ordered, plan.need).victims] == ["b", "f", "c", "a"]
    assert memory_evict_plan(MemorySnapshot(100 * GiB, 73 * GiB, pods), MemoryEvictConfig(70, 68)) is None


CFG_BE_CPU = BECPUEvictConfig(lower_percent=60, upper_percent=80, usage_threshold_percent=90, window_seconds=3)


@pytest.mark.parametrize(
    ("window", "newest", "want"),
    [
        pytest.param(
            BEUsage(950, 2000, 1000, 3), None, 2000 * (0.8 - 0.5), id="saturated-low-satisfaction-release-to-upper"
        ),
        pytest.param(BEUsage(500, 2000, 1000, 3), None, 0.0, id="usage-under-90pct-no-evict"),
        pytest.param(
            BEUsage(100, 2000, 900, 3), None, 2000 * (0.8 - 0.45), id="limit-under-1-core-counts-as-saturated"
        ),
        pytest.param(BEUsage(1300, 2000, 1400, 3), None, 0.0, id="satisfaction-over-lower"),
        pytest.param(BEUsage(950, 2000, 1000, 0), None, 0.0, id="window-invalid-too-few-samples"),
        pytest.param(
            BEUsage(950, 2000, 1000, 3), BEUsage(1000, 2000, 1100), 2000 * (0.8 - 0.55), id="min-of-window-and-newest"
        ),
        pytest.param(BEUsage(950, 0, 1000, 3), None, 0.0, id="no-request-nothing"),
    ],
)
def test_be_cpu_release(window: BEUsage, newest: BEUsage | None, want: float) -> None:
    assert be_cpu_release(window, newest, CFG_BE_CPU, 1.0) == pytest.approx(want)


@pytest.mark.parametrize(
    ("fields", "valid"),
    [
        pytest.param(
            {"cpuEvictBESatisfactionLowerPercent": 60, "cpuEvictBESatisfactionUpperPercent": 80}, True, id="valid"
        ),
        pytest.param({"cpuEvictBESatisfactionLowerPercent": 60}, False, id="upper-missing"),
        pytest.param(
            {"cpuEvictBESatisfactionLowerPercent": 70, "cpuEvictBESatisfactionUpperPercent": 80},
            False,
            id="lower-over-60",
        ),
        pytest.param(
            {"cpuEvictBESatisfactionLowerPercent": 50, "cpuEvictBESatisfactionUpperPercent": 40},
            False,
            id="upper-below-lower",
        ),
    ],
)
def test_be_cpu_evict_config(fields: dict[str, object], valid: bool) -> None:
    slo = ResourceThresholdStrategy.model_validate({"enable": True, **fields})
    assert (be_cpu_evict_config(slo, 1.0) is not None) == valid


def test_be_cpu_victims_priority_then_usage_per_request_released_by_batch_request() -> None:
    def be(name: str, prio: int, request: str) -> PodMeta:
        return meta(pod(name).be().priority(prio).container("c", requests={"kubernetes.io/batch-cpu": request}).build())

    pods = (
        (be("hot", 5000, "1000"), 900.0),
        (be("cold", 5000, "1000"), 100.0),
        (be("high-prio", 5500, "4000"), 4000.0),
        (meta(pod("ls").qos("Burstable").priority(9000).build()), 3000.0),
    )
    plan = be_cpu_evict_plan(CPUSnapshot(pods), 1500, CFG_BE_CPU)
    assert plan is not None
    assert [c.name for c in plan.ordered] == ["default/hot", "default/cold", "default/high-prio"]
    assert [c.release for c in plan.ordered] == [1000, 1000, 4000]
    assert [c.name for c in plan_victims(plan.ordered, plan.need).victims] == ["default/hot", "default/cold"]


def test_cpu_evict_node_usage_release_and_opt_in() -> None:
    opted = meta(pod("opted").priority(5000).label("koordinator.sh/eviction-enabled", "true").build())
    other = meta(pod("other").priority(5000).build())
    snap = CPUSnapshot(((opted, 1500.0), (other, 3000.0)), capacity_milli=8000, node_used_milli=6800)
    plan = cpu_evict_plan(snap, CPUEvictConfig(80, 78, 5999, 1.0))
    assert plan is not None
    assert plan.need == pytest.approx(8000 * (85 - 78) / 100)
    assert [c.name for c in plan.ordered] == ["default/opted"]


# -- CgroupReconcile -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cfg", "req", "limit", "want"),
    [
        pytest.param(
            MemoryQOSCfg(min_limit_percent=100, low_limit_percent=0),
            1 * GiB,
            2 * GiB,
            MemoryQOSValues(GiB, GiB, -1),
            id="low-at-least-min",
        ),
        pytest.param(
            MemoryQOSCfg(min_limit_percent=50, low_limit_percent=80, throttling_percent=50),
            GiB,
            2 * GiB,
            MemoryQOSValues(GiB // 2, GiB * 8 // 10, GiB + GiB // 2),
            id="high-request-plus-half-headroom",
        ),
        pytest.param(
            MemoryQOSCfg(throttling_percent=50),
            1 << 20,
            (2 << 20) + 100,
            MemoryQOSValues(0, 0, 384 * 4096),
            id="high-page-aligned-down",
        ),
    ],
)
def test_memory_qos_values(cfg: MemoryQOSCfg, req: int, limit: int, want: MemoryQOSValues) -> None:
    assert memory_qos_values(req, limit, cfg) == want
