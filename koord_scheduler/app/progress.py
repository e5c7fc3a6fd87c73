"""Progress of ``koord-scheduler simulate`` on stderr, for runs long enough to wonder about: a spinner while
the cluster file is read, then a bar of the pending pods that have an answer (placed or not) as the
scheduler works through them. Drawn with ``rich`` only when stderr is a terminal, and wiped when the run
ends (``transient``), so the report on stdout reads the same with or without it; with stderr redirected
(a pipe, a file, CI) nothing at all is written. ``rich`` loads only then.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from koord_scheduler.scheduler.options import Outcome


class SimulateProgress:
    """``with SimulateProgress(stream): ...``; :meth:`reading`, then :meth:`scheduling` and :meth:`outcome`
    (the scheduler's ``on_outcome``) per answer. Does nothing when ``stream`` is not a terminal."""

    def __init__(self, stream: TextIO | None = None, *, force_terminal: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force_terminal or _is_terminal(self.stream)
        self._force = force_terminal
        self._progress: Any = None
        self._task: Any = None
        self._answered: set[str] = set()

    def __enter__(self) -> SimulateProgress:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(file=self.stream, force_terminal=self._force or None, stderr=self.stream is sys.stderr)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            refresh_per_second=8,
        )
        self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def reading(self, what: str) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(f"reading {what}", total=None)

    def scheduling(self, pending: int) -> None:
        """The file is in: ``pending`` pods to schedule."""
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._answered.clear()
        self._task = self._progress.add_task("scheduling pending pods", total=pending)

    def outcome(self, outcome: Outcome) -> None:
        if self._progress is None or self._task is None or outcome.pod_key in self._answered:
            return
        self._answered.add(outcome.pod_key)
        self._progress.update(self._task, completed=len(self._answered))


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False
