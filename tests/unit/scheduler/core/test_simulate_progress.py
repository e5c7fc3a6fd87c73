"""``simulate`` shows progress on stderr when stderr is a terminal, and writes nothing there otherwise; the
report on stdout is the same either way."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from koord_scheduler.app.progress import SimulateProgress
from koord_scheduler.scheduler.options import Outcome

SIMULATE = Path(sys.executable).parent / "koord-scheduler"


def big_cluster(path: Path, *, nodes: int = 200, pods: int = 1500) -> Path:
    items = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        }
        for i in range(nodes)
    ]
    items += [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        }
        for i in range(pods)
    ]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def run_with_terminal_stderr(args: list[str]) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (as in an interactive shell) and stdout on a pipe, reading both
    as they come (a full pipe would block the process)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"},
    )
    os.close(slave)
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    streams = {master: bytearray(), out_fd: bytearray()}
    open_fds = set(streams)
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], 0.5)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the terminal's other end closed
                data = b""
            if data:
                streams[fd] += data
            else:
                open_fds.discard(fd)
        if not ready and proc.poll() is not None and out_fd not in open_fds:
            break
    code = proc.wait(300)
    proc.stdout.close()
    os.close(master)
    return code, streams[out_fd].decode(), streams[master].decode(errors="replace")


def test_a_terminal_sees_the_progress_and_stdout_is_unchanged(tmp_path: Path) -> None:
    cluster = big_cluster(tmp_path / "big.json")
    args = [str(SIMULATE), "simulate", "--cluster", str(cluster), "-o", "json"]
    code, out, terminal = run_with_terminal_stderr(args)
    assert code == 0
    assert "scheduling pending pods" in terminal
    assert "/1500" in terminal, "the bar counts the answered pods against the pending ones"
    piped = subprocess.run(args, capture_output=True, text=True, timeout=300, check=True)
    assert piped.stderr == "", "nothing on stderr when it is not a terminal"
    assert json.loads(out)["pods"] == json.loads(piped.stdout)["pods"]


def test_not_a_terminal_writes_nothing() -> None:
    stream = io.StringIO()
    with SimulateProgress(stream) as progress:
        assert not progress.enabled
        progress.reading("x.yaml")
        progress.scheduling(3)
        progress.outcome(Outcome("default/p", "n1"))
    assert stream.getvalue() == ""


def test_each_pod_is_counted_once_however_often_it_is_tried() -> None:
    stream = io.StringIO()
    with SimulateProgress(stream, force_terminal=True) as progress:
        progress.scheduling(2)
        for outcome in (Outcome("default/a", None, "no"), Outcome("default/a", None, "no"), Outcome("default/a", "n")):
            progress.outcome(outcome)
        task = progress._progress.tasks[0]
        assert (task.completed, task.total) == (1, 2)
        progress.outcome(Outcome("default/b", "n"))
        assert progress._progress.tasks[0].completed == 2
