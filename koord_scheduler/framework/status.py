"""Status codes and the Status value every extension point returns.

``Code`` members say how the scheduling queue reacts to a result; ``Status`` is immutable and the runtime
stamps the name of the plugin that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    """kube-scheduler's status codes, with the same numbers.

    - SUCCESS: go on.
    - ERROR: an internal failure; the pod goes to the error backoff queue.
    - UNSCHEDULABLE: the pod does not fit now; preemption may help; requeued on a relevant cluster event.
    - UNSCHEDULABLE_AND_UNRESOLVABLE: preemption cannot help on this node.
    - WAIT: Permit only: hold the pod until allowed, rejected or timed out.
    - SKIP: PreFilter/PreScore: this plugin's Filter/Score has nothing to do for this pod.
    - PENDING: the pod waits for something outside the scheduler (not the node's state).
    """

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of one plugin call.

    ``reasons`` are the human-readable reasons (FitError histograms count each one); ``plugin`` is set by
    the runtime, never by the plugin itself.
    """

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    @property
    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    @property
    def is_rejected(self) -> bool:
        return self.code in _REJECTED

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    def __str__(self) -> str:
        text = f"{self.code.name}"
        if self.plugin:
            text += f" from {self.plugin}"
        if self.reasons:
            text += f": {self.message}"
        return text


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def success() -> Status:
    return SUCCESS


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    """UnschedulableAndUnresolvable: preemption on this node cannot help."""
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(message: str) -> Status:
    return Status(Code.ERROR, (message,))


def skip() -> Status:
    return SKIP


def wait() -> Status:
    return Status(Code.WAIT)
