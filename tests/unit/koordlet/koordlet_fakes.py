"""Builders for fake cgroup and /proc trees in a temp dir (v1 and v2 file formats)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from koordlet.system import CgroupFS, CgroupVersion
from koordlet.system.layout import CgroupDriver

V1_SUBSYSTEMS = ("cpu", "cpuacct", "cpuset", "memory")


@dataclass
class FakeCgroups:
    root: Path
    version: CgroupVersion
    driver: CgroupDriver

    def fs(self) -> CgroupFS:
        return CgroupFS(self.root, self.version, self.driver)

    def make_dir(self, rel: str) -> None:
        if self.version is CgroupVersion.V2:
            (self.root / rel).mkdir(parents=True, exist_ok=True)
        else:
            for sub in V1_SUBSYSTEMS:
                (self.root / sub / rel).mkdir(parents=True, exist_ok=True)

    def set_usage(
        self,
        rel: str,
        *,
        cpu_ns: int = 0,
        mem_anon: int = 0,
        mem_file: int = 0,
        periods: int = 0,
        throttled: int = 0,
    ) -> None:
        """Write the counters a collector reads, in this version's file format."""
        self.make_dir(rel)
        if self.version is CgroupVersion.V1:
            (self.root / "cpuacct" / rel / "cpuacct.usage").write_text(f"{cpu_ns}\n")
            (self.root / "cpu" / rel / "cpu.stat").write_text(
                f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {throttled * 1000}\n"
            )
            (self.root / "memory" / rel / "memory.stat").write_text(
                f"cache {mem_file}\nrss {mem_anon}\ntotal_cache {mem_file}\ntotal_rss {mem_anon}\n"
                f"total_active_anon {mem_anon // 2}\ntotal_inactive_anon {mem_anon - mem_anon // 2}\n"
                f"total_active_file {mem_file}\ntotal_inactive_file 0\ntotal_unevictable 0\n"
            )
            (self.root / "memory" / rel / "memory.usage_in_bytes").write_text(f"{mem_anon + mem_file}\n")
            for name, value in (
                ("cpu.cfs_quota_us", "-1"),
                ("cpu.cfs_period_us", "100000"),
                ("cpu.shares", "1024"),
            ):
                path = self.root / "cpu" / rel / name
                if not path.exists():
                    path.write_text(value + "\n")
            path = self.root / "memory" / rel / "memory.limit_in_bytes"
            if not path.exists():
                path.write_text("9223372036854771712\n")
        else:
            d = self.root / rel
            (d / "cpu.stat").write_text(
                f"usage_usec {cpu_ns // 1000}\nuser_usec 0\nsystem_usec 0\nnr_periods {periods}\n"
                f"nr_throttled {throttled}\nthrottled_usec {throttled}\n"
            )
            (d / "memory.stat").write_text(
                f"anon {mem_anon}\nfile {mem_file}\nactive_anon {mem_anon // 2}\n"
                f"inactive_anon {mem_anon - mem_anon // 2}\nactive_file {mem_file}\n"
                "inactive_file 0\nunevictable 0\n"
            )
            (d / "memory.current").write_text(f"{mem_anon + mem_file}\n")
            for name, value in (("cpu.max", "max 100000"), ("cpu.weight", "100"), ("memory.max", "max")):
                if not (d / name).exists():
                    (d / name).write_text(value + "\n")


def write_proc(
    root: Path,
    *,
    busy_ticks: int,
    idle_ticks: int = 0,
    mem_total_kb: int = 8 * 1024 * 1024,
    mem_available_kb: int = 6 * 1024 * 1024,
    cpus: int = 4,
) -> None:
    """A /proc/stat with all busy ticks in ``user``, and a /proc/meminfo."""
    root.mkdir(parents=True, exist_ok=True)
    lines = [f"cpu  {busy_ticks} 0 0 {idle_ticks} 0 0 0 0 0 0"]
    lines += [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    (root / "stat").write_text("\n".join(lines) + "\nintr 0\n")
    (root / "meminfo").write_text(
        f"MemTotal:       {mem_total_kb} kB\nMemFree:        1000 kB\nMemAvailable:   {mem_available_kb} kB\n"
    )


def make_raw_pod(
    name: str,
    uid: str,
    *,
    namespace: str = "default",
    qos: str = "Burstable",
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    containers: list[tuple[str, str]] | None = None,
    requests: dict[str, str] | None = None,
) -> dict[str, object]:
    """Pod JSON as the API server returns it. ``containers`` is [(name, containerID)]."""
    containers = containers or [("main", "")]
    spec: dict[str, object] = {
        "nodeName": "node-1",
        "containers": [{"name": n, "resources": {"requests": requests or {}}} for n, _ in containers],
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels or {}},
        "spec": spec,
        "status": {
            "phase": "Running",
            "qosClass": qos,
            "containerStatuses": [{"name": n, "containerID": cid} for n, cid in containers if cid],
        },
    }
