"""Preemption extenders (kube-scheduler ``pkg/scheduler/framework/preemption``: ``callExtenders``).

Each interested extender with a ``preemptVerb``, in turn, receives the candidates' victims and returns
the candidates it keeps, with their victims as UIDs; the UIDs are resolved against the pods on each
node. A failing ignorable extender is skipped; a node the extender kept with no victim is dropped for
an ignorable extender and is an error otherwise; an empty result ends the chain (nothing can be
preempted, whatever the later extenders say).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from apis.core.types import Pod
from koord_scheduler.extenders.client import ExtenderError, HTTPExtender
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Status, error

log = logging.getLogger(__name__)

Victims = tuple[list[Pod], int]
"""The pods to evict on one node and how many PodDisruptionBudgets that violates."""


def process_preemption(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    snapshot: ClusterSnapshot,
    candidates: Mapping[str, Victims],
) -> dict[str, Victims]:
    """The candidates (node -> victims) every interested preemption extender keeps. Raises
    :class:`ExtenderError` when a non-ignorable extender fails or answers inconsistently."""
    current = dict(candidates)
    if not current:
        return current
    for extender in extenders:
        if not extender.supports_preemption or not extender.is_interested(pod):
            continue
        try:
            reply = extender.process_preemption(
                pod, {n: v[0] for n, v in current.items()}, {n: v[1] for n, v in current.items()}
            )
            kept = _resolve(extender, snapshot, reply)
        except ExtenderError as exc:
            if extender.ignorable:
                log.warning("extender %s preempt failed, skipped (ignorable): %s", extender.name, exc)
                continue
            raise
        for node in [n for n, (pods, _) in kept.items() if not pods]:
            if not extender.ignorable:
                raise ExtenderError(extender.name, f"expected at least one victim pod on node {node!r}")
            log.warning("extender %s kept node %s without victims; ignored", extender.name, node)
            del kept[node]
        current = kept
        if not current:
            break
    return current


def _resolve(
    extender: HTTPExtender, snapshot: ClusterSnapshot, reply: dict[str, tuple[tuple[str, ...], int]]
) -> dict[str, Victims]:
    """``convertToVictims``: UIDs to the pods on each node of the snapshot."""
    out: dict[str, Victims] = {}
    for node, (uids, violations) in reply.items():
        position = snapshot.positions.get(node)
        if position is None:
            raise ExtenderError(extender.name, f"extender {extender.name}: node {node!r} not found")
        by_uid = {p.uid: p for p in snapshot.info(position).pods.values()}
        pods = []
        for uid in uids:
            victim = by_uid.get(uid)
            if victim is None:
                raise ExtenderError(
                    extender.name,
                    f"extender: {extender.name} claims to preempt pod (UID: {uid}) on node: {node}, "
                    "but the pod is not found on that node",
                )
            pods.append(victim)
        out[node] = (pods, violations)
    return out


class PreemptionCaller:
    """:class:`~koord_scheduler.framework.interfaces.PreemptionExtenders` over the configured extenders:
    what DefaultPreemption calls between its dry run and its node choice."""

    def __init__(self, extenders: Sequence[HTTPExtender], snapshot: Callable[[], ClusterSnapshot]) -> None:
        self._extenders = [e for e in extenders if e.supports_preemption]
        self._snapshot = snapshot

    def __bool__(self) -> bool:
        return bool(self._extenders)

    def process_preemption(
        self, pod: Pod, candidates: Mapping[str, tuple[Sequence[Pod], int]]
    ) -> tuple[dict[str, Victims], Status]:
        given = {node: (list(pods), violations) for node, (pods, violations) in candidates.items()}
        try:
            return process_preemption(self._extenders, pod, self._snapshot(), given), Status()
        except ExtenderError as exc:
            log.warning("preemption extender failed: %s", exc)
            return {}, error(str(exc))
