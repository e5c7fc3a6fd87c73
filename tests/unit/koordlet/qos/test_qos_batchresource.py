"""BatchResource: hand-computed hook values (Koordinator ``runtimehooks/hooks/batchresource``) and the
strategy on temp cgroup v1 and v2 trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, make_node, pod, threshold_slo

from apis.extension import KubeQOSClass
from apis.slo import merge_node_slo_spec
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qosmanager.plugins.batchresource import plugin as batchresource
from koordlet.qosmanager.plugins.batchresource.policy import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    BatchRule,
    BatchSpec,
    BatchValues,
    ExtendedResourceSpecError,
    batch_rule,
    container_values,
    milli_cpu_to_quota,
    parse_extended_resource_spec,
    pod_values,
)
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock

CPU, MEM = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
GiB = 1 << 30
UID = "11111111-2222-4333-8444-555555555555"


def spec(req_cpu: int | None = None, lim_cpu: int | None = None, lim_mem: int | None = None) -> BatchSpec:
    requests = {CPU: req_cpu} if req_cpu is not None else {}
    limits = {k: v for k, v in ((CPU, lim_cpu), (MEM, lim_mem)) if v is not None}
    return BatchSpec(requests, limits)


@pytest.mark.parametrize(
    ("milli", "want"),
    [
        pytest.param(4000, 400000, id="4-cores"),
        pytest.param(8, 1000, id="8-milli-raised-to-1000us-min"),
        pytest.param(0, -1, id="no-limit-unlimited"),
        pytest.param(-1, -1, id="negative-unlimited"),
    ],
)
def test_milli_cpu_to_quota(milli: int, want: int) -> None:
    assert milli_cpu_to_quota(milli) == want


@pytest.mark.parametrize(
    ("container", "rule", "want"),
    [
        pytest.param(
            spec(2000, 4000, 4 * GiB), BatchRule(), BatchValues(2048, 400000, 4 * GiB), id="anchor-example-2c-4c-4Gi"
        ),
        pytest.param(
            spec(2000, 4000, 4 * GiB),
            BatchRule(normalization_ratio=1.2),
            BatchValues(2048, 333334, 4 * GiB),
            id="normalization-ratio-1.2-ceil",
        ),
        pytest.param(
            spec(2000, 4000, 4 * GiB),
            BatchRule(normalization_ratio=0.8),
            BatchValues(2048, 400000, 4 * GiB),
            id="ratio-below-1-ignored",
        ),
        pytest.param(
            spec(2000, 4000, 4 * GiB),
            BatchRule(cfs_quota_enabled=False),
            BatchValues(2048, -1, 4 * GiB),
            id="cfsQuota-suppress-unsets-quota",
        ),
        pytest.param(spec(8, 8), BatchRule(), BatchValues(8, 1000, -1), id="batch-cpu-8-is-8-milli"),
        pytest.param(spec(1), BatchRule(), BatchValues(2, -1, -1), id="shares-floor-2-no-limits"),
        pytest.param(spec(300_000), BatchRule(), BatchValues(262144, -1, -1), id="shares-cap-262144"),
        pytest.param(spec(None, 500), BatchRule(), BatchValues(2, 50000, -1), id="limit-only-request-absent"),
    ],
)
def test_container_values(container: BatchSpec, rule: BatchRule, want: BatchValues) -> None:
    assert container_values(container, rule) == want


@pytest.mark.parametrize(
    ("specs", "want"),
    [
        pytest.param(
            [spec(500, 1000, GiB), spec(1500, 2000, 2 * GiB)],
            BatchValues(2048, 300000, 3 * GiB),
            id="sums-when-every-container-limited",
        ),
        pytest.param(
            [spec(500, 1000, GiB), spec(1500)],
            BatchValues(2048, -1, -1),
            id="one-unlimited-container-makes-pod-unlimited",
        ),
        pytest.param([spec(0, 1000, GiB), spec(-5, 1000, GiB)], BatchValues(2, 200000, 2 * GiB), id="nonpositive-req"),
    ],
)
def test_pod_values(specs: list[BatchSpec], want: BatchValues) -> None:
    assert pod_values(specs, BatchRule()) == want


@pytest.mark.parametrize(
    ("threshold", "annotations", "want"),
    [
        pytest.param(None, {}, BatchRule(True, -1.0), id="defaults"),
        pytest.param({"enable": True, "cpuSuppressPolicy": "cfsQuota"}, {}, BatchRule(False, -1.0), id="cfs-suppress"),
        pytest.param({"enable": False, "cpuSuppressPolicy": "cfsQuota"}, {}, BatchRule(True, -1.0), id="suppress-off"),
        pytest.param({"enable": True, "cpuSuppressPolicy": "cpuset"}, {}, BatchRule(True, -1.0), id="cpuset-suppress"),
        pytest.param(
            None, {"node.koordinator.sh/cpu-normalization-ratio": "1.5"}, BatchRule(True, 1.5), id="ratio-read"
        ),
        pytest.param(
            None, {"node.koordinator.sh/cpu-normalization-ratio": "x"}, BatchRule(True, -1.0), id="bad-ratio-ignored"
        ),
        pytest.param(
            None, {"node.koordinator.sh/cpu-normalization-ratio": "-2"}, BatchRule(True, -1.0), id="negative-ratio"
        ),
    ],
)
def test_batch_rule(threshold: dict[str, object] | None, annotations: dict[str, str], want: BatchRule) -> None:
    received = NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": threshold} if threshold else {})
    assert batch_rule(merge_node_slo_spec(received), annotations) == want


def test_extended_resource_spec_parse_and_errors() -> None:
    text = json.dumps(
        {"containers": {"main": {"limits": {CPU: "1k", MEM: "2Gi"}, "requests": {CPU: "500", MEM: "1Gi"}}}}
    )
    assert parse_extended_resource_spec(text) == {"main": BatchSpec({CPU: 500, MEM: GiB}, {CPU: 1000, MEM: 2 * GiB})}
    for bad, want in (("{", "not JSON"), ('{"containers": 3}', "containers"), ('{"containers": {"m": []}}', "'m'")):
        with pytest.raises(ExtendedResourceSpecError, match=want):
            parse_extended_resource_spec(bad)


# -- the strategy on temp trees ------------------------------------------------------------------


def _read(fake: FakeCgroups, rel: str, v1_file: str) -> str:
    v2 = {"cpu.shares": "cpu.weight", "cpu.cfs_quota_us": "cpu.max", "memory.limit_in_bytes": "memory.max"}
    if fake.version is CgroupVersion.V2:
        return (fake.root / rel / v2[v1_file]).read_text().strip()
    controller = "memory" if v1_file.startswith("memory") else "cpu"
    return (fake.root / controller / rel / v1_file).read_text().strip()


def _setup(tmp_path: Path, version: CgroupVersion, raw_pod: dict[str, object]) -> tuple[FakeCgroups, object, list[str]]:
    fake = FakeCgroups(tmp_path, version, CgroupDriver.SYSTEMD)
    fs = fake.fs()
    ctx = make_ctx(fs, clock=FakeClock())
    ctx.states_informer.set_node(make_node(cpu="8"))
    ctx.states_informer.replace_pods([raw_pod])
    meta = ctx.states_informer.get_all_pods()[0]
    dirs = [meta.cgroup_dir] + [d for c in meta.containers if (d := meta.container_dir(fs.layout, c))]
    for rel in (fs.layout.kubepods_dir, fs.layout.qos_dir(KubeQOSClass.BEST_EFFORT), *dirs):
        fake.set_usage(rel)
    return fake, ctx, dirs


def _w1_pod() -> dict[str, object]:
    """The webhook's output for a koord-batch pod: batch requests 500/1Gi, limits 1k/2Gi."""
    return (
        pod("spark", UID)
        .be()
        .priority(5000)
        .container(
            "main",
            "containerd://abc123",
            requests={CPU: "500", MEM: "1Gi"},
            limits={CPU: "1k", MEM: "2Gi"},
        )
        .build()
    )


@pytest.mark.parametrize(
    ("version", "want_pod", "want_container"),
    [
        pytest.param(
            CgroupVersion.V1,
            {"cpu.shares": "512", "cpu.cfs_quota_us": "100000", "memory.limit_in_bytes": str(2 * GiB)},
            {"cpu.shares": "512", "cpu.cfs_quota_us": "100000", "memory.limit_in_bytes": str(2 * GiB)},
            id="v1-shares-quota-limit",
        ),
        pytest.param(
            CgroupVersion.V2,
            {"cpu.shares": "20", "cpu.cfs_quota_us": "100000", "memory.limit_in_bytes": str(2 * GiB)},
            {"cpu.shares": "20", "cpu.cfs_quota_us": "100000", "memory.limit_in_bytes": str(2 * GiB)},
            id="v2-weight-cpu.max-memory.max",
        ),
    ],
)
def test_batch_resource_writes_pod_and_container(
    tmp_path: Path, version: CgroupVersion, want_pod: dict[str, str], want_container: dict[str, str]
) -> None:
    fake, ctx, (pod_dir, container_dir) = _setup(tmp_path, version, _w1_pod())
    plugin = batchresource.BatchResource()
    plugin.setup(ctx)  # type: ignore[arg-type]
    plugin.tick()
    assert {f: _read(fake, pod_dir, f) for f in want_pod} == want_pod
    assert {f: _read(fake, container_dir, f) for f in want_container} == want_container


def test_batch_resource_from_annotation_and_cfs_quota_suppress(tmp_path: Path) -> None:
    annotation = json.dumps({"containers": {"main": {"requests": {CPU: "2000"}, "limits": {CPU: "4000", MEM: "1Gi"}}}})
    raw = pod("ann", UID).be().annotation(ANNOTATION_EXTENDED_RESOURCE_SPEC, annotation)
    fake, ctx, (pod_dir, container_dir) = _setup(
        tmp_path, CgroupVersion.V1, raw.container("main", "docker://d1").build()
    )
    plugin = batchresource.BatchResource()
    plugin.setup(ctx)  # type: ignore[arg-type]
    plugin.tick()
    assert [_read(fake, container_dir, f) for f in ("cpu.shares", "cpu.cfs_quota_us")] == ["2048", "400000"]
    assert _read(fake, pod_dir, "memory.limit_in_bytes") == str(GiB)
    ctx.states_informer.set_node_slo(threshold_slo(cpuSuppressPolicy="cfsQuota"))  # type: ignore[attr-defined]
    plugin.tick()
    assert [_read(fake, d, "cpu.cfs_quota_us") for d in (pod_dir, container_dir)] == ["-1", "-1"]


@pytest.mark.parametrize(
    "builder",
    [
        pytest.param(lambda: pod("be-kube", UID).qos("BestEffort"), id="kube-besteffort-without-label-untouched"),
        pytest.param(lambda: pod("be-nobatch", UID).be(), id="be-label-without-batch-resources-untouched"),
    ],
)
def test_batch_resource_leaves_other_pods_alone(tmp_path: Path, builder: object) -> None:
    raw = builder().container("main", "containerd://c0", requests={"cpu": "1"}).build()  # type: ignore[operator]
    fake, ctx, (pod_dir, _container_dir) = _setup(tmp_path, CgroupVersion.V1, raw)
    (fake.root / "cpu" / pod_dir / "cpu.shares").write_text("2\n")
    plugin = batchresource.BatchResource()
    plugin.setup(ctx)  # type: ignore[arg-type]
    plugin.tick()
    assert plugin.last_plan == []
    assert _read(fake, pod_dir, "cpu.shares") == "2"


def test_bad_annotation_is_contained_to_its_pod(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    ctx = make_ctx(fake.fs(), clock=FakeClock())
    bad = pod("bad", "22222222-2222-4333-8444-555555555555").be().annotation(ANNOTATION_EXTENDED_RESOURCE_SPEC, "{")
    good = pod("good", UID).be().container("main", "containerd://g1", requests={CPU: "1000"}, limits={CPU: "1000"})
    ctx.states_informer.replace_pods([bad.container("main", "containerd://b1").build(), good.build()])
    for meta in ctx.states_informer.get_all_pods():
        for rel in [meta.cgroup_dir] + [d for c in meta.containers if (d := meta.container_dir(fake.fs().layout, c))]:
            fake.set_usage(rel)
    plugin = batchresource.BatchResource()
    plugin.setup(ctx)
    for _ in range(3):
        plugin.tick()
    good_meta = ctx.states_informer.get_pod(UID)
    assert good_meta is not None
    assert _read(fake, good_meta.cgroup_dir, "cpu.cfs_quota_us") == "100000"
    assert plugin.object_errors == 3 and plugin.errors == 0
    lines = [r.getMessage() for r in caplog.records if "default/bad" in r.getMessage()]
    assert len(lines) == 1 and "extended-resource-spec" in lines[0]


async def test_batch_resource_reacts_to_a_new_pod_before_its_interval(tmp_path: Path) -> None:
    """Koordinator applies the values in a runtime hook at pod creation; here a pod-list change wakes the
    strategy at once instead of after its 10 s reconcile interval."""
    import asyncio

    fake, ctx, (_pod_dir, container_dir) = _setup(tmp_path, CgroupVersion.V1, _w1_pod())
    ctx.states_informer.replace_pods([])  # type: ignore[attr-defined]
    plugin = batchresource.BatchResource()
    plugin.setup(ctx)  # type: ignore[arg-type]
    assert plugin.interval == 10.0
    plugin.interval = 3600.0  # within the wait below only a pod change can tick it again
    ticked = asyncio.Event()
    original = plugin.safe_tick

    def notifying() -> None:
        original()
        ticked.set()

    plugin.safe_tick = notifying  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(plugin.run(stop))
    async with asyncio.timeout(60):
        await ticked.wait()  # the start-up tick
    ticked.clear()
    assert plugin.ticks == 1
    ctx.states_informer.replace_pods([_w1_pod()])  # type: ignore[attr-defined]
    async with asyncio.timeout(60):
        await ticked.wait()
    stop.set()
    await task
    assert plugin.ticks >= 2
    assert _read(fake, container_dir, "cpu.cfs_quota_us") == "100000"
