"""The score phase of one profile: PreScore, Score, NormalizeScore and the weighted sum.

Signed Score plugins without NormalizeScore (``sign_pod`` set, ``score_extensions()`` None) are folded
into one cached weighted sum per combination of their signatures
(:meth:`~koord_scheduler.framework.node_cache.NodeResultCache.weighted_sums`): a pod then costs one
gather over the scored nodes instead of a gather, a range check and a multiply-add per plugin, and
the plugins only rescore the nodes that changed. The fold is a fast path, never a different answer:
when a folded plugin raises or returned a score out of range for any node the entry holds, the phase
reruns plugin by plugin, which reports the failure exactly as it always did. Plugins with
NormalizeScore depend on the whole scored set and take the per-plugin path.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework import interfaces as ep
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import PluginCycleError, log_failure
from koord_scheduler.framework.interfaces import BatchScorePlugin, PreScorePlugin, ScoreExtensions, ScorePlugin
from koord_scheduler.framework.node_cache import FEW_NODES, NodeResultCache, cacheable_signature
from koord_scheduler.framework.restored import RESTORED_CAPACITY
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Code, error
from koord_scheduler.framework.types import MAX_NODE_SCORE, MIN_NODE_SCORE, PointObserver

log = logging.getLogger(__name__)


class PerNodeScore:
    """A per-node Score plugin run over many nodes (the batch signature)."""

    __slots__ = ("_plugin", "name")

    def __init__(self, plugin: ScorePlugin) -> None:
        self.name = plugin.name
        self._plugin = plugin

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        return np.array(self.score_list(state, pod, snapshot, positions), dtype=np.int64)

    def score_list(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> list[int]:
        """The scores as plain ints (what the few-nodes fold sums, without a round trip through numpy)."""
        score = self._plugin.score  # looked up per call: the plugin's attribute may be replaced
        info = snapshot.info
        return [int(score(state, pod, info(p))) for p in positions.tolist()]

    def score_extensions(self) -> ScoreExtensions | None:
        return self._plugin.score_extensions()


MAX_NORMALIZED = 64
"""Normalised Score passes kept by :class:`ScorePhase` (per plugin and read-only node set)."""


def _out_of_range(raw: IntArray) -> bool:
    """Whether some int64 score lies outside [MIN_NODE_SCORE, MAX_NODE_SCORE] (``MIN_NODE_SCORE`` is 0:
    one unsigned maximum covers both ends)."""
    return len(raw) > 0 and int(raw.view(np.uint64).max()) > MAX_NODE_SCORE


assert MIN_NODE_SCORE == 0


def _few_scores(
    entry: ScorePluginEntry, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
) -> list[int]:
    """``entry``'s raw scores for at most ``FEW_NODES`` nodes, as plain ints: straight from the per-node
    form when the plugin has one, else the batch answer converted."""
    scorer = entry.scorer(len(positions))
    if isinstance(scorer, PerNodeScore):
        return scorer.score_list(state, pod, snapshot, positions)
    values: list[int] = np.asarray(scorer.score_nodes(state, pod, snapshot, positions), dtype=np.int64).tolist()
    return values


@dataclass(frozen=True, slots=True)
class ScorePluginEntry:
    name: str
    plugin: BatchScorePlugin
    """The batch scorer: the plugin itself, or :class:`PerNodeScore` over its per-node form."""
    weight: int
    extensions: ScoreExtensions | None
    sign: Callable[[Pod], Hashable | None] | None = None
    few: BatchScorePlugin | None = None
    """The per-node form (adapted to the batch signature) when the plugin has both; used to score at
    most ``FEW_NODES`` nodes (the few that changed since a cached answer, or a small node set)."""
    reads_only_scores: bool = False
    """The extensions declare ``normalize_reads_only_scores`` (:class:`~.interfaces.ScoresOnlyNormalizer`)."""

    def scorer(self, n: int) -> BatchScorePlugin:
        """What to call to score ``n`` nodes: the runtime's one decision between the two forms."""
        return self.few if self.few is not None and n <= FEW_NODES else self.plugin

    @property
    def foldable(self) -> bool:
        """Signed and without NormalizeScore: its weighted scores can be cached summed with others."""
        return self.sign is not None and self.extensions is None


class ScorePhase:
    """Runs PreScore and Score for one profile; see the module docstring for the folded fast path."""

    __slots__ = ("_foldable", "_node_cache", "_normalized", "_observer", "entries", "pre_score_plugins")

    def __init__(
        self,
        pre_score_plugins: Sequence[PreScorePlugin],
        entries: Sequence[ScorePluginEntry],
        node_cache: NodeResultCache | None,
        observer: PointObserver | None,
    ) -> None:
        self.pre_score_plugins = list(pre_score_plugins)
        self.entries = list(entries)
        self._node_cache = node_cache
        self._observer = observer
        self._foldable = [e for e in self.entries if e.foldable] if node_cache is not None else []
        self._normalized: OrderedDict[tuple[str, int], tuple[tuple[int, int], Positions, IntArray]] = OrderedDict()
        """Per (plugin whose NormalizeScore reads only the scores, id of read-only positions): (raw-score
        stamp, the positions, normalised scores) of a cached pass, reused while neither changed. Several
        node sets per plugin (the pods of a few spread patterns alternate); at most
        ``MAX_NORMALIZED``, least recently used dropped."""

    def run(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        """Weighted score totals aligned with ``positions``; raises :class:`PluginCycleError`."""
        observer = self._observer
        started = time.perf_counter()
        self._pre_score(state, pod, snapshot, positions)
        if observer is not None:
            now = time.perf_counter()
            observer(ep.PRE_SCORE, Code.SUCCESS, now - started)
            started = now
        total = self._score(state, pod, snapshot, positions)
        if observer is not None:
            observer(ep.SCORE, Code.SUCCESS, time.perf_counter() - started)
        return total

    def _pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> None:
        for p in self.pre_score_plugins:
            try:
                status = p.pre_score(state, pod, snapshot, positions)
            except Exception as exc:
                log_failure(log, f"PreScore plugin {p.name} raised", exc)
                raise PluginCycleError(error(f"running PreScore plugin {p.name!r}: {exc}").with_plugin(p.name)) from exc
            code = status.code
            if code == Code.SUCCESS:
                continue
            if code == Code.SKIP:
                state.skip_score.add(p.name)
            else:
                raise PluginCycleError(status.with_plugin(p.name))

    def _score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        cached = self._node_cache is not None and state.get(RESTORED_CAPACITY) is None
        skip = state.skip_score
        folded: list[ScorePluginEntry] = []
        folded_names: set[str] = set()
        total: IntArray | None = None
        if cached and self._foldable:
            parts: list[tuple[str, Hashable]] = []
            for entry in self._foldable:
                if entry.name in skip:
                    continue
                assert entry.sign is not None
                value = entry.sign(pod)
                if value is not None:
                    folded.append(entry)
                    parts.append((entry.name, value))
            if folded:
                total = self._folded_sums(
                    tuple(parts), folded, state=state, pod=pod, snapshot=snapshot, positions=positions
                )
                if total is not None:
                    folded_names = {e.name for e in folded}
        if total is None:
            total = np.zeros(len(positions), dtype=np.int64)
        for entry in self.entries:
            if entry.name in skip or entry.name in folded_names:
                continue
            scores = self._plugin_scores(entry, state, pod, snapshot, positions, cached=cached)
            if entry.weight == 1:
                total += scores
            else:
                total += scores * entry.weight
        return total

    def _folded_sums(
        self,
        key: tuple[tuple[str, Hashable], ...],
        folded: list[ScorePluginEntry],
        *,
        state: CycleState,
        pod: Pod,
        snapshot: ClusterSnapshot,
        positions: Positions,
    ) -> IntArray | None:
        """The folded plugins' weighted sum, or None to score them one by one instead."""
        try:
            hash(key)
        except TypeError:  # signatures of plugin-replaced pods may hold plain dicts: not cached
            return None

        def compute(dirty: Positions) -> tuple[IntArray, np.ndarray | None]:
            n = len(dirty)
            if n > FEW_NODES:
                sums: IntArray | None = None
                invalid: np.ndarray | None = None
                for e in folded:
                    raw = np.asarray(e.scorer(n).score_nodes(state, pod, snapshot, dirty), dtype=np.int64)
                    # One reduction (scores below 0 read as huge unsigned values); the per-node mask
                    # only when some score is out of range (rare).
                    if _out_of_range(raw):
                        bad = (raw < MIN_NODE_SCORE) | (raw > MAX_NODE_SCORE)
                        invalid = bad if invalid is None else invalid | bad
                    if sums is None:
                        sums = raw * e.weight  # a new array: ``raw`` may be the plugin's own
                    elif e.weight == 1:
                        sums += raw
                    else:
                        sums += raw * e.weight
                assert sums is not None  # ``folded`` is never empty
                return sums, invalid
            # The node or two a cycle usually changes: plain ints beat a dozen numpy calls.
            total = [0] * n
            bad_at: list[int] = []
            for e in folded:
                weight = e.weight
                for i, value in enumerate(_few_scores(e, state, pod, snapshot, dirty)):
                    total[i] += value * weight
                    if value < MIN_NODE_SCORE or value > MAX_NODE_SCORE:
                        bad_at.append(i)
            flags = None
            if bad_at:
                flags = np.zeros(n, dtype=np.bool_)
                flags[bad_at] = True
            return np.array(total, dtype=np.int64), flags

        assert self._node_cache is not None
        try:
            return self._node_cache.weighted_sums(key, snapshot, positions, compute)
        except Exception:
            # The per-plugin path reruns the plugin and reports its failure as an Error status.
            return None

    def _plugin_scores(
        self,
        entry: ScorePluginEntry,
        state: CycleState,
        pod: Pod,
        snapshot: ClusterSnapshot,
        positions: Positions,
        *,
        cached: bool,
    ) -> IntArray:
        """One plugin's normalised, range-checked (unweighted) scores for ``positions``."""
        if cached and entry.reads_only_scores:
            reused = self._reuse_normalized(entry, state, pod, snapshot, positions)
            if reused is not None:
                return reused
        try:
            scores = self._raw_scores(entry, state, pod, snapshot, positions, cached=cached)
            if entry.extensions is not None:
                status = entry.extensions.normalize_score(state, pod, scores)
                if status is not None and not status.is_success:
                    raise PluginCycleError(status.with_plugin(entry.name))
        except PluginCycleError:
            raise
        except Exception as exc:
            log_failure(log, f"Score plugin {entry.name} raised", exc)
            raise PluginCycleError(
                error(f"running Score plugin {entry.name!r}: {exc}").with_plugin(entry.name)
            ) from exc
        if len(scores) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
            bad = int(scores[(scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)][0])
            raise PluginCycleError(
                error(
                    f"plugin {entry.name!r} returns an invalid score {bad}, it should in the range of "
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                ).with_plugin(entry.name)
            )
        return scores

    def _reuse_normalized(
        self, entry: ScorePluginEntry, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> IntArray | None:
        """For a plugin that declares ``normalize_reads_only_scores`` on its ScoreExtensions: the same
        raw scores over the same positions normalise the same, so the last result is reused (a cluster
        of alike nodes otherwise pays a gather, a normalisation and a range check over every node each
        cycle, e.g. for TaintToleration). None when the pod is not signed or the pass is new (the caller
        then computes it, and the result is kept here)."""
        sign = entry.sign
        value = sign(pod) if sign is not None else None
        if value is None or positions.flags.writeable or not cacheable_signature(value):
            return None
        assert self._node_cache is not None
        try:
            full, stamp = self._node_cache.raw_scores_stamped(
                (entry.name, value),
                snapshot,
                lambda need: entry.scorer(len(need)).score_nodes(state, pod, snapshot, need),
            )
        except Exception:
            return None  # the uncached path reruns the plugin and reports the failure
        key = (entry.name, id(positions))
        last = self._normalized.get(key)
        if last is not None and last[0] == stamp and last[1] is positions:
            self._normalized.move_to_end(key)
            return last[2]
        scores = full[positions]
        assert entry.extensions is not None  # reads_only_scores is set only with extensions
        status = entry.extensions.normalize_score(state, pod, scores)
        if status is not None and not status.is_success:
            return None
        if len(scores) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
            return None
        scores.flags.writeable = False
        self._normalized[key] = (stamp, positions, scores)
        self._normalized.move_to_end(key)
        if len(self._normalized) > MAX_NORMALIZED:
            self._normalized.popitem(last=False)
        return scores

    def _raw_scores(
        self,
        entry: ScorePluginEntry,
        state: CycleState,
        pod: Pod,
        snapshot: ClusterSnapshot,
        positions: Positions,
        *,
        cached: bool,
    ) -> IntArray:
        sign = entry.sign
        value = sign(pod) if cached and sign is not None else None
        if value is None or not cacheable_signature(value):
            return np.asarray(entry.scorer(len(positions)).score_nodes(state, pod, snapshot, positions), dtype=np.int64)
        assert self._node_cache is not None
        return self._node_cache.raw_scores(
            (entry.name, value),
            snapshot,
            positions,
            lambda need: entry.scorer(len(need)).score_nodes(state, pod, snapshot, need),
        )

    def plugin_scores(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> dict[str, IntArray]:
        """Per-plugin weighted scores (for ``--debug-scores``); re-runs Score, not on the hot path."""
        out: dict[str, IntArray] = {}
        for entry in self.entries:
            if entry.name in state.skip_score:
                continue
            scorer = entry.scorer(len(positions))
            scores = np.asarray(scorer.score_nodes(state, pod, snapshot, positions), dtype=np.int64)
            if entry.extensions is not None:
                entry.extensions.normalize_score(state, pod, scores)
            out[entry.name] = scores * entry.weight
        return out

    def log_table(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: ClusterSnapshot,
        positions: Positions,
        *,
        totals: IntArray,
        top: int,
    ) -> None:
        """``--debug-scores N``: the top-``top`` nodes with each plugin's weighted score."""
        best = np.argsort(-totals, kind="stable")[:top]
        per_plugin = self.plugin_scores(state, pod, snapshot, positions[best])
        names = list(per_plugin)
        header = "| # | Node | " + " | ".join(names) + " | Total |"
        lines = [f"scores for pod {pod.key}:", header, "|" + "---|" * (len(names) + 3)]
        for rank, i in enumerate(best.tolist()):
            cells = " | ".join(str(int(per_plugin[n][rank])) for n in names)
            lines.append(f"| {rank} | {snapshot.info(int(positions[i])).name} | {cells} | {int(totals[i])} |")
        log.warning("\n".join(lines))
