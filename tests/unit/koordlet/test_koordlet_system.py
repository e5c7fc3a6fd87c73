from pathlib import Path

import pytest
from koordlet_fakes import FakeCgroups, write_proc

from apis.extension import KubeQOSClass
from koordlet.system import (
    CgroupDriver,
    CgroupFS,
    CgroupLayout,
    CgroupVersion,
    ContainerID,
    ContainerRuntime,
    ProcFS,
    WriteStatus,
    detect_cgroup_driver,
    detect_cgroup_version,
    parse_container_id,
    pod_uid_from_dir,
    shares_to_weight,
    weight_to_shares,
)
from koordlet.system.cgroupfs import CPUStat
from koordlet.system.resources import format_cpuset, milli_cpu_to_shares, parse_cpu_max, parse_cpuset

UID = "3f2a6d1e-8b7c-4c1d-9e0f-123456789abc"


@pytest.mark.parametrize(
    ("driver", "qos", "want_pod"),
    [
        pytest.param(CgroupDriver.CGROUPFS, KubeQOSClass.GUARANTEED, f"kubepods/pod{UID}", id="cgroupfs-guaranteed"),
        pytest.param(
            CgroupDriver.CGROUPFS,
            KubeQOSClass.BURSTABLE,
            f"kubepods/burstable/pod{UID}",
            id="cgroupfs-burstable",
        ),
        pytest.param(
            CgroupDriver.CGROUPFS,
            KubeQOSClass.BEST_EFFORT,
            f"kubepods/besteffort/pod{UID}",
            id="cgroupfs-besteffort",
        ),
        pytest.param(
            CgroupDriver.SYSTEMD,
            KubeQOSClass.GUARANTEED,
            f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice",
            id="systemd-guaranteed",
        ),
        pytest.param(
            CgroupDriver.SYSTEMD,
            KubeQOSClass.BURSTABLE,
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice",
            id="systemd-burstable",
        ),
        pytest.param(
            CgroupDriver.SYSTEMD,
            KubeQOSClass.BEST_EFFORT,
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice",
            id="systemd-besteffort",
        ),
    ],
)
def test_pod_dir(driver: CgroupDriver, qos: KubeQOSClass, want_pod: str) -> None:
    layout = CgroupLayout.for_driver(driver)
    assert layout.pod_dir(qos, UID) == want_pod
    assert pod_uid_from_dir(want_pod.rsplit("/", 1)[1]) == UID


@pytest.mark.parametrize(
    ("driver", "raw", "want_leaf"),
    [
        pytest.param(CgroupDriver.SYSTEMD, "containerd://abc", "cri-containerd-abc.scope", id="systemd-containerd"),
        pytest.param(CgroupDriver.SYSTEMD, "docker://abc", "docker-abc.scope", id="systemd-docker"),
        pytest.param(CgroupDriver.SYSTEMD, "cri-o://abc", "crio-abc.scope", id="systemd-crio"),
        pytest.param(CgroupDriver.CGROUPFS, "containerd://abc", "abc", id="cgroupfs-containerd"),
        pytest.param(CgroupDriver.CGROUPFS, "docker://abc", "abc", id="cgroupfs-docker"),
    ],
)
def test_container_dir(driver: CgroupDriver, raw: str, want_leaf: str) -> None:
    cid = parse_container_id(raw)
    assert cid is not None
    path = CgroupLayout.for_driver(driver).container_dir(KubeQOSClass.BURSTABLE, UID, cid)
    assert path.rsplit("/", 1)[1] == want_leaf


def test_parse_container_id() -> None:
    assert parse_container_id("containerd://x") == ContainerID(ContainerRuntime.CONTAINERD, "x")
    assert parse_container_id("") is None
    assert parse_container_id("rkt://x") is None


def test_custom_kubepods_dir() -> None:
    layout = CgroupLayout.for_driver(CgroupDriver.CGROUPFS, "/test-1/kubepods/")
    assert layout.pod_dir(KubeQOSClass.BEST_EFFORT, UID) == f"test-1/kubepods/besteffort/pod{UID}"


@pytest.mark.parametrize(
    ("shares", "want_weight"),
    [
        pytest.param(2, 1, id="min"),
        pytest.param(1024, 39, id="default-1024"),
        pytest.param(262144, 10000, id="max"),
        pytest.param(1, 1, id="below-min-clamped"),
        pytest.param(10**9, 10000, id="above-max-clamped"),
    ],
)
def test_shares_to_weight(shares: int, want_weight: int) -> None:
    assert shares_to_weight(shares) == want_weight


@pytest.mark.parametrize(
    ("weight", "want_shares"),
    [
        pytest.param(1, 2, id="min"),
        pytest.param(100, 2597, id="default-100"),
        pytest.param(10000, 262144, id="max"),
    ],
)
def test_weight_to_shares(weight: int, want_shares: int) -> None:
    assert weight_to_shares(weight) == want_shares


def test_conversions_misc() -> None:
    assert parse_cpu_max("max 100000") == (-1, 100000)
    assert parse_cpu_max("50000 200000") == (50000, 200000)
    assert parse_cpuset("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert format_cpuset(frozenset({0, 1, 2, 3, 8, 10, 11})) == "0-3,8,10-11"
    assert [milli_cpu_to_shares(m) for m in (0, 1, 1000, 2500)] == [2, 2, 1024, 2560]


@pytest.fixture(params=[CgroupVersion.V1, CgroupVersion.V2], ids=["v1", "v2"])
def fake(request: pytest.FixtureRequest, tmp_path: Path) -> FakeCgroups:
    return FakeCgroups(tmp_path / "cgroup", request.param, CgroupDriver.CGROUPFS)


def test_typed_reads_same_on_v1_and_v2(fake: FakeCgroups) -> None:
    rel = f"kubepods/burstable/pod{UID}"
    fake.set_usage(rel, cpu_ns=5_000_000_000, mem_anon=200 << 20, mem_file=50 << 20, periods=10, throttled=3)
    fs = fake.fs()
    assert fs.cpu_usage_ns(rel) == 5_000_000_000
    stat = fs.cpu_stat(rel)
    assert stat == CPUStat(nr_periods=10, nr_throttled=3, throttled_ns=3000)
    mem = fs.memory_stat(rel)
    assert mem is not None and mem.usage_without_page_cache == 200 << 20
    assert mem.usage_with_page_cache == 250 << 20
    assert fs.memory_usage_bytes(rel) == 250 << 20
    assert fs.cfs_quota(rel) == (-1, 100000)


def test_missing_cgroup_is_quiet(fake: FakeCgroups) -> None:
    fs = fake.fs()
    assert fs.cpu_usage_ns("kubepods/podgone") is None
    assert fs.memory_stat("kubepods/podgone") is None
    assert fs.write("cpu.shares", "kubepods/podgone", "1024").status is WriteStatus.MISSING_CGROUP


@pytest.mark.parametrize(
    ("version", "resource", "value", "want_file", "want_text"),
    [
        pytest.param(CgroupVersion.V1, "cpu.cfs_quota_us", "-1", "cpu/x/cpu.cfs_quota_us", "-1", id="v1-quota"),
        pytest.param(CgroupVersion.V2, "cpu.cfs_quota_us", "-1", "x/cpu.max", "max", id="v2-quota-max"),
        pytest.param(CgroupVersion.V2, "cpu.cfs_quota_us", "50000", "x/cpu.max", "50000", id="v2-quota"),
        pytest.param(
            CgroupVersion.V2,
            "cpu.cfs_period_us",
            "200000",
            "x/cpu.max",
            "max 200000",
            id="v2-period-keeps-quota",
        ),
        pytest.param(CgroupVersion.V2, "cpu.shares", "1024", "x/cpu.weight", "39", id="v2-shares-to-weight"),
        pytest.param(CgroupVersion.V2, "memory.limit_in_bytes", "-1", "x/memory.max", "max", id="v2-mem-unlimited"),
        pytest.param(
            CgroupVersion.V1,
            "memory.limit_in_bytes",
            "1048576",
            "memory/x/memory.limit_in_bytes",
            "1048576",
            id="v1-mem",
        ),
    ],
)
def test_write_converts(  # noqa: PLR0917
    tmp_path: Path, version: CgroupVersion, resource: str, value: str, want_file: str, want_text: str
) -> None:
    fake = FakeCgroups(tmp_path, version, CgroupDriver.CGROUPFS)
    fake.set_usage("x")
    result = fake.fs().write(resource, "x", value)
    assert result.status is WriteStatus.WRITTEN
    assert (tmp_path / want_file).read_text() == want_text


def test_write_validation(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    fake.set_usage("x")
    fs = fake.fs()
    assert fs.write("cpu.shares", "x", "1").status is WriteStatus.INVALID
    assert fs.write("cpu.shares", "x", "abc").status is WriteStatus.INVALID
    assert fs.write("cpu.bvt_warp_ns", "x", "2").status is WriteStatus.UNSUPPORTED
    assert fs.write("no.such", "x", "2").status is WriteStatus.UNSUPPORTED


def test_cpu_shares_read_v2(tmp_path: Path) -> None:
    fake = FakeCgroups(tmp_path, CgroupVersion.V2, CgroupDriver.SYSTEMD)
    fake.set_usage("x")
    assert fake.fs().cpu_shares("x") == 2597


def test_detection(tmp_path: Path) -> None:
    assert detect_cgroup_version(tmp_path) is CgroupVersion.V1  # not a cgroup2 fs
    (tmp_path / "cpu" / "kubepods.slice").mkdir(parents=True)
    assert detect_cgroup_driver(tmp_path, CgroupVersion.V1) is CgroupDriver.SYSTEMD
    (tmp_path / "kubepods").mkdir()
    assert detect_cgroup_driver(tmp_path, CgroupVersion.V2) is CgroupDriver.CGROUPFS
    assert detect_cgroup_driver(tmp_path / "nothing", CgroupVersion.V2) is None
    assert CgroupFS.detect(tmp_path).driver is CgroupDriver.SYSTEMD


def test_detection_under_a_kubelet_cgroup_root(tmp_path: Path) -> None:
    """kubelet with ``cgroupRoot: /pykoord-1`` (cgroupfs driver) puts kubepods at <mount>/pykoord-1/kubepods,
    as the real node of tests/node does: the driver is read from that dir, not guessed as systemd."""
    (tmp_path / "cpu" / "pykoord-1" / "kubepods" / "besteffort").mkdir(parents=True)
    assert detect_cgroup_driver(tmp_path, CgroupVersion.V1, "pykoord-1/kubepods") is CgroupDriver.CGROUPFS
    assert CgroupFS.detect(tmp_path, "/pykoord-1/kubepods").driver is CgroupDriver.CGROUPFS
    (tmp_path / "cpu" / "pykoord-2" / "kubepods.slice").mkdir(parents=True)
    assert detect_cgroup_driver(tmp_path, CgroupVersion.V1, "pykoord-2/kubepods.slice") is CgroupDriver.SYSTEMD
    assert detect_cgroup_driver(tmp_path, CgroupVersion.V1, "pykoord-3/kubepods") is None


def test_procfs(tmp_path: Path) -> None:
    write_proc(tmp_path, busy_ticks=500, idle_ticks=100, cpus=3)
    proc = ProcFS(tmp_path, clock_ticks=100)
    ticks = proc.cpu_ticks()
    assert ticks is not None and ticks.busy == 500
    assert proc.num_cpus() == 3
    assert proc.memory_used_bytes() == 2 * 1024 * 1024 * 1024
    assert proc.pressure("cpu") is None
    (tmp_path / "pressure").mkdir()
    (tmp_path / "pressure" / "cpu").write_text("some avg10=1.50 avg60=0 avg300=0 total=1\n")
    assert proc.pressure("cpu") == {"some": 1.5}
