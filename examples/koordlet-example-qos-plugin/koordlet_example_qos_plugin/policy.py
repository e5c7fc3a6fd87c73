"""The decision, as a pure function: which cgroup writes make BE pods yield CPU to everything else."""

from __future__ import annotations

from collections.abc import Iterable

from koordlet.qosmanager import ResourceUpdate
from koordlet.statesinformer import PodMeta


def be_cpu_shares_plan(pods: Iterable[PodMeta], *, shares: int, owner: str) -> list[ResourceUpdate]:
    """One ``cpu.shares`` write per BE pod (v1 semantics; the executor converts to ``cpu.weight`` on v2).

    ``shares`` is the cgroup v1 weight, 2..262144; the kernel's minimum, 2, makes BE pods run only on CPU
    that nothing else wants.
    """
    return [ResourceUpdate("cpu.shares", pod.cgroup_dir, str(shares), owner=owner) for pod in pods if pod.is_be]
