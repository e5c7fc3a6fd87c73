"""The order in which an arbitration pass looks at the waiting PodMigrationJobs: Koordinator's arbitrator
sorts (``pkg/descheduler/controllers/migration/arbitrator/sort.go``), applied one after the other, each
stable, so the last one is the first key:

1. ``SortJobsByCreationTime``: the newest job first (creation time in whole seconds);
2. ``SortJobsByPod``: Koordinator's ``PodSorter`` over the jobs' pods (Koordinator priority class,
   priority, Kubernetes QoS, Koordinator QoS, ``pod-deletion-cost``, ``eviction-cost``, the youngest pod
   first); a job whose pod is unknown goes first;
3. ``SortJobsByController``: jobs whose pods belong to the same batch ``Job`` (owner kind ``Job``) are put
   together, at the place of the first of them;
4. ``SortJobsByMigratingNum``: the batch ``Job`` with the most jobs already migrating first (others count
   0).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from apis.core.types import Pod
from apis.scheduling.migration import PodMigrationJobRecord
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.descheduler.lownodeload.plugin import pod_load
from koord_scheduler.descheduler.lownodeload.policy import pod_order

JOB_KIND = "Job"
Waiting = tuple[PodMigrationJobRecord, Pod | None]

_NO_METRIC = NodeMetricRecord(name="")
_POD_ORDER = pod_order({}, {})


def _compare_pods(a: Pod, b: Pod) -> int:
    return _POD_ORDER(pod_load(a, _NO_METRIC), pod_load(b, _NO_METRIC))


def batch_job_owner(pod: Pod | None) -> str:
    """The UID of the pod's controller when it is a batch ``Job`` (Koordinator's ``getJobControllerOfPod``)."""
    if pod is None:
        return ""
    for owner in pod.meta.owner_references:
        if owner.controller:
            return owner.uid if owner.kind == JOB_KIND else ""
    return ""


def arbitration_order(waiting: Sequence[Waiting], *, migrating_of: Callable[[str], int]) -> list[Waiting]:
    """``waiting`` in arbitration order (module docstring); ``migrating_of``: a batch Job's UID -> how many
    of its pods' jobs are migrating (passed arbitration or Running)."""
    jobs = sorted(waiting, key=lambda w: -int(w[0].creation_timestamp or 0))
    pods = sorted((w[1] for w in jobs if w[1] is not None), key=functools.cmp_to_key(_compare_pods))
    rank = {id(p): i for i, p in enumerate(pods)}
    jobs.sort(key=lambda w: rank[id(w[1])] if w[1] is not None else -1)
    first: dict[str, int] = {}
    group = []
    for i, (_, pod) in enumerate(jobs):
        owner = batch_job_owner(pod)
        group.append(first.setdefault(owner, i) if owner else i)
    jobs = [w for _, w in sorted(zip(group, jobs, strict=True), key=lambda pair: pair[0])]
    counts: dict[str, int] = {}
    for _, pod in jobs:
        owner = batch_job_owner(pod)
        if owner and owner not in counts:
            counts[owner] = migrating_of(owner)
    return sorted(jobs, key=lambda w: -counts.get(batch_job_owner(w[1]), 0))
