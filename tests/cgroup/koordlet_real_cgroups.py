"""A kubepods-like hierarchy in the machine's real cgroup v1 controllers, with real processes in it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from koordlet.system import CgroupFS, CgroupVersion, detect_cgroup_version
from koordlet.system.layout import CgroupDriver

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpu", "cpuacct", "memory")

BURN = "while True: pass"
ALLOC = (
    "import sys\n"
    "sys.stdin.readline()\n"
    "x = bytearray(200 << 20)\n"
    "for i in range(0, len(x), 4096): x[i] = 1\n"
    "print('ok', flush=True)\n"
    "sys.stdin.readline()\n"
)


def writable_cgroup_v1() -> str | None:
    """``None`` if usable, else why not (the only reason these tests may skip)."""
    if not ROOT.is_dir() or detect_cgroup_version(ROOT) is not CgroupVersion.V1:
        return "no cgroup v1 hierarchy at /sys/fs/cgroup"
    for controller in CONTROLLERS:
        probe = ROOT / controller / f"pykoord-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError as err:
            return f"cannot create cgroups under {ROOT / controller}: {err}"
    return None


@dataclass
class RealPods:
    """Pod cgroups under ``<controller>/<base>/kubepods`` for every controller; procs started inside."""

    base: str = field(default_factory=lambda: f"pykoord-test-{uuid.uuid4().hex[:8]}")
    dirs: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def kubepods_dir(self) -> str:
        return f"{self.base}/kubepods"

    def cgroupfs(self) -> CgroupFS:
        return CgroupFS(ROOT, CgroupVersion.V1, CgroupDriver.CGROUPFS, self.kubepods_dir)

    def make(self, rel: str) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in self.dirs:
                for controller in CONTROLLERS:
                    (ROOT / controller / sub).mkdir(exist_ok=True)
                self.dirs.append(sub)

    def attach(self, pid: int, rel: str) -> None:
        for controller in CONTROLLERS:
            (ROOT / controller / rel / "cgroup.procs").write_text(str(pid))

    def spawn(self, rel: str, code: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        self.attach(proc.pid, rel)
        return proc

    def cleanup(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=10)
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        for rel in reversed(self.dirs):
            for controller in CONTROLLERS:
                path = ROOT / controller / rel
                for _ in range(50):
                    try:
                        path.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)  # the kernel frees a cgroup a moment after its last task exits


@contextlib.contextmanager
def real_pods() -> Iterator[RealPods]:
    pods = RealPods()
    try:
        yield pods
    finally:
        pods.cleanup()


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc/<pid>/stat (the ground truth we compare against)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
