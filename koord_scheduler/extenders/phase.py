"""Extenders in the scheduling and binding cycles (kube-scheduler ``schedule_one.go``:
``findNodesThatPassExtenders``, the extender part of ``prioritizeNodes``, ``extendersBinding``).

- Filter: after the framework's Filter, each interested filter extender in turn narrows the feasible
  nodes; its failed nodes enter the FitError diagnosis under the plugin name ``Extender``. A failing
  ignorable extender is skipped; a failing other one fails the cycle with its error.
- Prioritize: after the framework's Score, every interested prioritizer adds
  ``score * weight * (MaxNodeScore / MaxExtenderPriority)`` to each node it scored. A failing
  prioritizer gives no scores (kube-scheduler ignores prioritize errors, ignorable or not).
- Bind: the first interested binder binds instead of the Bind plugins; an ignorable binder that fails
  hands the pod on to the next binder, and then to the plugins.

Every unusable reply is logged once per call with the extender's URL.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from apis.core.types import Node, Pod
from koord_scheduler.extenders.client import ExtenderError, HTTPExtender
from koord_scheduler.extenders.wire import MAX_EXTENDER_PRIORITY
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Code, Status

log = logging.getLogger(__name__)

EXTENDER_NAME = "Extender"
"""kube-scheduler's ``framework.ExtenderName``: the plugin name of nodes an extender rejected."""
MAX_NODE_SCORE = 100


def extender_score(score: int, weight: int) -> int:
    """kube-scheduler's scaling of one extender score into the framework's range (integer maths)."""
    return score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)


@dataclass(slots=True)
class ExtenderVerdicts:
    """What the extenders said in the last cycle, for ``--debug-scores`` and ``simulate``."""

    pod_key: str = ""
    rejected: dict[str, dict[str, str]] = field(default_factory=dict)
    """extender URL -> node -> reason."""
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    """extender URL -> node -> scaled score added to the node's total."""
    errors: dict[str, str] = field(default_factory=dict)
    """extender URL -> why its answer was not used."""


class Extenders:
    """The configured extenders in kube-scheduler's order: ignorable ones after the others."""

    def __init__(self, extenders: Sequence[HTTPExtender]) -> None:
        self.all = tuple(e for e in extenders if not e.ignorable) + tuple(e for e in extenders if e.ignorable)
        self.has_filters = any(e.is_filter for e in self.all)
        self.has_prioritizers = any(e.is_prioritizer for e in self.all)
        self.last = ExtenderVerdicts()
        self.history: list[ExtenderVerdicts] | None = None
        """Set to a list to keep every cycle's verdicts (``simulate --debug-scores``)."""

    def __bool__(self) -> bool:
        return bool(self.all)

    def begin(self, pod: Pod) -> None:
        self.last = ExtenderVerdicts(pod_key=pod.key)
        if self.history is not None:
            self.history.append(self.last)

    def verdict_rows(self) -> list[dict[str, object]]:
        """The kept verdicts as table rows: pod, extender, node, verdict (rejection reason, scaled score
        or error)."""
        rows: list[dict[str, object]] = []
        for v in self.history or ():
            for url, rejected in v.rejected.items():
                rows += [
                    {"pod": v.pod_key, "extender": url, "node": n, "verdict": f"rejected: {r}"}
                    for n, r in sorted(rejected.items())
                ]
            for url, scores in v.scores.items():
                rows += [
                    {"pod": v.pod_key, "extender": url, "node": n, "verdict": f"score +{s}"}
                    for n, s in sorted(scores.items())
                ]
            for url, message in v.errors.items():
                rows.append({"pod": v.pod_key, "extender": url, "node": "", "verdict": f"error: {message}"})
        return rows

    def close(self) -> None:
        for extender in self.all:
            extender.close()

    # ----- Filter -----

    def filter(self, pod: Pod, snapshot: ClusterSnapshot, feasible: Positions, diagnosis: Diagnosis) -> Positions:
        """The feasible positions every interested filter extender accepts; raises :class:`ExtenderError`
        when a non-ignorable extender fails."""
        for extender in self.all:
            if len(feasible) == 0:
                break
            if not extender.is_filter or not extender.is_interested(pod):
                continue
            sent = _NodeSet(snapshot, feasible)
            try:
                reply = extender.filter(pod, sent.nodes, names=sent.names)
                kept = _positions(extender, sent, reply.node_names)
            except ExtenderError as exc:
                self._report(extender, "filter", exc)
                if extender.ignorable:
                    continue
                raise
            self._record_failures(extender, snapshot, diagnosis, reply.failed, reply.failed_and_unresolvable)
            if len(kept) != len(feasible):
                diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
            feasible = kept
        return feasible

    def _record_failures(
        self,
        extender: HTTPExtender,
        snapshot: ClusterSnapshot,
        diagnosis: Diagnosis,
        failed: dict[str, str],
        unresolvable: dict[str, str],
    ) -> None:
        verdicts = self.last.rejected.setdefault(extender.name, {})
        statuses: list[Status] = []
        positions: list[int] = []
        unknown: list[str] = []
        merged = [(n, m, Code.UNSCHEDULABLE_AND_UNRESOLVABLE) for n, m in unresolvable.items()]
        merged += [(n, m, Code.UNSCHEDULABLE) for n, m in failed.items() if n not in unresolvable]
        for node, message, code in merged:
            pos = snapshot.positions.get(node)
            if pos is None:
                unknown.append(node)
                continue
            verdicts[node] = message
            positions.append(pos)
            statuses.append(Status(code, (message,), EXTENDER_NAME))
        if unknown:
            log.warning("extender %s reported failures for unknown node(s) %s; ignored", extender.name, unknown)
        if positions:
            ids = np.arange(len(statuses), dtype=np.intp)
            diagnosis.add_chunk(FailureChunk(np.array(positions, dtype=np.intp), ids, tuple(statuses)))

    # ----- Prioritize -----

    def prioritize(self, pod: Pod, snapshot: ClusterSnapshot, scored: Positions) -> np.ndarray | None:
        """Extender scores to add to ``scored``'s totals (int64, aligned with ``scored``), or None when no
        prioritizer is interested."""
        extra: np.ndarray | None = None
        sent: _NodeSet | None = None
        for extender in self.all:
            if not extender.is_prioritizer or not extender.is_interested(pod):
                continue
            if sent is None:
                sent = _NodeSet(snapshot, scored)
            try:
                priorities = extender.prioritize(pod, sent.nodes, names=sent.names)
            except ExtenderError as exc:
                self._report(extender, "prioritize", exc)
                continue
            if extra is None:
                extra = np.zeros(len(scored), dtype=np.int64)
            self._add_scores(extender, priorities, sent.index(), extra)
        return extra

    def _add_scores(
        self, extender: HTTPExtender, priorities: list[tuple[str, int]], index: dict[str, int], extra: np.ndarray
    ) -> None:
        unknown: list[str] = []
        out_of_range: list[str] = []
        rows: list[int] = []
        scores: list[int] = []
        for host, score in priorities:
            i = index.get(host)
            if i is None:
                unknown.append(host)
                continue
            if not 0 <= score <= MAX_EXTENDER_PRIORITY:
                out_of_range.append(f"{host}={score}")
            rows.append(i)
            scores.append(score)
        scaled = np.asarray(scores, dtype=np.int64) * (extender.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY))
        np.add.at(extra, np.asarray(rows, dtype=np.intp), scaled)
        if self.history is not None:  # kept for simulate's report only: it costs a dict entry per node
            verdicts = self.last.scores.setdefault(extender.name, {})
            names = {i: host for host, i in index.items()}
            for i, value in zip(rows, scaled.tolist(), strict=True):
                verdicts[names[i]] = verdicts.get(names[i], 0) + value
        if unknown or out_of_range:
            # kube-scheduler adds out-of-range scores as they are and drops hosts it did not send.
            log.warning(
                "extender %s prioritize reply: %s%s",
                extender.name,
                f"unknown node(s) {unknown} ignored; " if unknown else "",
                f"score(s) outside 0..{MAX_EXTENDER_PRIORITY} used as given: {out_of_range}" if out_of_range else "",
            )
            self.last.errors[extender.name] = "unknown nodes or out-of-range scores in prioritize reply"

    # ----- Bind -----

    def binder_for(self, pod: Pod) -> list[HTTPExtender]:
        return [e for e in self.all if e.is_binder and e.is_interested(pod)]

    def _report(self, extender: HTTPExtender, verb: str, exc: ExtenderError) -> None:
        if verb == "prioritize":
            action = "no scores from it this cycle"
        else:
            action = "skipped (ignorable)" if extender.ignorable else "fails the cycle"
        log.warning("extender %s %s failed, %s: %s", extender.name, verb, action, exc)
        self.last.errors[extender.name] = str(exc)


class _NodeSet:
    """The nodes sent in one call: positions, node objects and names, built once."""

    __slots__ = ("names", "nodes", "positions")

    def __init__(self, snapshot: ClusterSnapshot, positions: Positions) -> None:
        self.positions: list[int] = positions.tolist()
        infos = snapshot.infos
        nodes: list[Node] = []
        for p in self.positions:
            info = infos[p]
            node = info.node if info is not None else None
            assert node is not None, f"feasible position {p} has no node"
            nodes.append(node)
        self.nodes = nodes
        self.names = [n.meta.name for n in nodes]

    def index(self) -> dict[str, int]:
        """Node name -> row in this set."""
        return {name: i for i, name in enumerate(self.names)}


def _positions(extender: HTTPExtender, sent: _NodeSet, names: tuple[str, ...] | None) -> Positions:
    if names is None:
        return np.empty(0, dtype=np.intp)
    by_name = dict(zip(sent.names, sent.positions, strict=True))
    kept: list[int] = []
    for name in names:
        pos = by_name.get(name)
        if pos is None:
            raise ExtenderError(
                extender.name,
                f"extender {extender.name!r} claims a filtered node {name!r} which is not found in the input node list",
            )
        kept.append(pos)
    return np.array(kept, dtype=np.intp)


def bind_with_extenders(binders: Sequence[HTTPExtender], pod: Pod, node: str) -> tuple[bool, str]:
    """``extendersBinding``: (bound by an extender, error text). Blocking; run it in a thread."""
    for extender in binders:
        try:
            extender.bind(pod, node)
        except ExtenderError as exc:
            if extender.ignorable:
                log.warning("extender %s bind failed, skipped (ignorable): %s", extender.name, exc)
                continue
            log.warning("extender %s bind failed: %s", extender.name, exc)
            return True, str(exc)
        return True, ""
    return False, ""
