"""Finding what each plugin of a profile implements, once, when the profile is built.

:func:`find_capabilities` is the one place that asks: ``isinstance`` against the runtime-checkable
Protocols of the three tiers (:mod:`~koord_scheduler.framework.interfaces`, :mod:`.koordinator_stages`,
:mod:`.fast_paths`). The result holds typed lists in the
profile's order, which the runtime and its phases run without asking again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koord_scheduler.framework import fast_paths, koordinator_stages
from koord_scheduler.framework import interfaces as ep
from koord_scheduler.framework.errors import ProfileError
from koord_scheduler.framework.fast_paths import (
    AddedPodsFilter,
    CyclePreparer,
    ScoresOnlyNormalizer,
    SignedPlugin,
    WarmUpPlugin,
)
from koord_scheduler.framework.filter_phase import FilterEntry
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreBindPreFlight,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from koord_scheduler.framework.koordinator_stages import (
    FilterTransformer,
    JobNodeFinder,
    NodePreferrer,
    NUMAHintProvider,
    PodPatchApplier,
    PreemptionGate,
    PreFilterTransformer,
    ReservationFilterPlugin,
    ReservationNominator,
    ReservationPreBindPlugin,
    ScoreTransformer,
)
from koord_scheduler.framework.per_node_filter import PerNodeFilter
from koord_scheduler.framework.score_phase import PerNodeScore, ScorePluginEntry


@dataclass(frozen=True, slots=True)
class Capabilities:
    """One profile's plugins by extension point and capability, each list in the profile's order."""

    pre_enqueue: list[PreEnqueuePlugin]
    queue_sort: QueueSortPlugin | None
    pre_filter: list[PreFilterPlugin]
    filters: list[FilterEntry]
    added_pods_filters: list[AddedPodsFilter]
    post_filter: list[PostFilterPlugin]
    pre_score: list[PreScorePlugin]
    scores: list[ScorePluginEntry]
    reserve: list[ReservePlugin]
    permit: list[PermitPlugin]
    pre_bind: list[PreBindPlugin]
    bind: list[BindPlugin]
    post_bind: list[PostBindPlugin]
    pre_filter_transformers: list[PreFilterTransformer]
    filter_transformers: list[FilterTransformer]
    score_transformers: list[ScoreTransformer]
    reservation_filters: list[ReservationFilterPlugin]
    reservation_pre_binds: list[ReservationPreBindPlugin]
    reservation_nominator: ReservationNominator | None
    node_preferrer: NodePreferrer | None
    job_node_finder: JobNodeFinder | None
    pod_patch_applier: PodPatchApplier | None
    pre_bind_pre_flights: list[PreBindPreFlight]
    enqueue_extensions: dict[str, EnqueueExtensions]
    warm_ups: list[WarmUpPlugin]
    cycle_preparers: list[CyclePreparer]
    preemption_gates: list[PreemptionGate]
    numa_hint_providers: list[NUMAHintProvider]


def _plugin_protocols() -> tuple[type, ...]:
    found: list[type] = []
    for module in (ep, koordinator_stages, fast_paths):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == module.__name__
                and getattr(value, "_is_runtime_protocol", False)
                and value is not Plugin
            ):
                found.append(value)
    return tuple(found)


PLUGIN_PROTOCOLS: tuple[type, ...] = _plugin_protocols()
"""Every runtime-checkable Protocol of the three tiers a plugin object may implement (:mod:`.interfaces`,
:mod:`.koordinator_stages`, :mod:`.fast_paths`), in tier order."""


def protocols_of(plugin: object) -> tuple[type, ...]:
    """The Protocols of :data:`PLUGIN_PROTOCOLS` that ``plugin`` implements, as the runtime finds them
    (``isinstance``), in tier order. Each in-tree plugin module declares the same list for mypy."""
    return tuple(proto for proto in PLUGIN_PROTOCOLS if isinstance(plugin, proto))


def find_capabilities(
    plugins: Mapping[str, Plugin], points: Mapping[str, Sequence[str]], weights: Mapping[str, int]
) -> Capabilities:
    """``plugins``: name -> instance; ``points``: extension point -> plugin names in order; ``weights``:
    Score weights. Raises :class:`ProfileError` for a plugin configured at a point it does not implement."""

    def at(point: str) -> list[Plugin]:
        listed = [plugins[n] for n in points.get(point, ())]
        for p in listed:
            if not ep.implements(p, point):
                raise ProfileError(f"plugin {p.name!r} does not implement the {point} extension point")
        return listed

    queue_sort = [p for p in at(ep.QUEUE_SORT) if isinstance(p, QueueSortPlugin)]
    enabled = list(dict.fromkeys(n for names in points.values() for n in names))
    in_profile = [plugins[n] for n in enabled]
    everything = list(plugins.values())
    nominators = [p for p in in_profile if isinstance(p, ReservationNominator)]
    preferrers = [p for p in in_profile if isinstance(p, NodePreferrer)]
    finders = [p for p in at(ep.PRE_FILTER) if isinstance(p, JobNodeFinder)]
    pre_bind = [p for p in at(ep.PRE_BIND) if isinstance(p, PreBindPlugin)]
    return Capabilities(
        pre_enqueue=[p for p in at(ep.PRE_ENQUEUE) if isinstance(p, PreEnqueuePlugin)],
        queue_sort=queue_sort[0] if queue_sort else None,
        pre_filter=[p for p in at(ep.PRE_FILTER) if isinstance(p, PreFilterPlugin)],
        filters=[filter_entry(p) for p in at(ep.FILTER)],
        added_pods_filters=[p for p in at(ep.FILTER) if isinstance(p, AddedPodsFilter)],
        post_filter=[p for p in at(ep.POST_FILTER) if isinstance(p, PostFilterPlugin)],
        pre_score=[p for p in at(ep.PRE_SCORE) if isinstance(p, PreScorePlugin)],
        scores=[score_entry(p, max(1, weights.get(p.name, 1))) for p in at(ep.SCORE)],
        reserve=[p for p in at(ep.RESERVE) if isinstance(p, ReservePlugin)],
        permit=[p for p in at(ep.PERMIT) if isinstance(p, PermitPlugin)],
        pre_bind=pre_bind,
        bind=[p for p in at(ep.BIND) if isinstance(p, BindPlugin)],
        post_bind=[p for p in at(ep.POST_BIND) if isinstance(p, PostBindPlugin)],
        pre_filter_transformers=[p for p in at(ep.PRE_FILTER) if isinstance(p, PreFilterTransformer)],
        filter_transformers=[p for p in at(ep.FILTER) if isinstance(p, FilterTransformer)],
        score_transformers=[p for p in at(ep.SCORE) if isinstance(p, ScoreTransformer)],
        reservation_filters=[p for p in in_profile if isinstance(p, ReservationFilterPlugin)],
        reservation_pre_binds=[p for p in pre_bind if isinstance(p, ReservationPreBindPlugin)],
        reservation_nominator=nominators[0] if nominators else None,
        node_preferrer=preferrers[0] if preferrers else None,
        job_node_finder=finders[0] if finders else None,
        pod_patch_applier=next((p for p in pre_bind if isinstance(p, PodPatchApplier)), None),
        pre_bind_pre_flights=[p for p in pre_bind if isinstance(p, PreBindPreFlight)],
        enqueue_extensions={p.name: p for p in everything if isinstance(p, EnqueueExtensions)},
        warm_ups=[p for p in everything if isinstance(p, WarmUpPlugin)],
        cycle_preparers=[p for p in everything if isinstance(p, CyclePreparer)],
        preemption_gates=[p for p in in_profile if isinstance(p, PreemptionGate)],
        numa_hint_providers=[p for p in in_profile if isinstance(p, NUMAHintProvider)],
    )


def filter_entry(p: Plugin) -> FilterEntry:
    per_node = PerNodeFilter(p) if isinstance(p, FilterPlugin) else None
    if isinstance(p, BatchFilterPlugin):
        sign = p.sign_pod if isinstance(p, SignedPlugin) else None
        return FilterEntry(p.name, p, per_node, sign)
    assert per_node is not None  # checked by at()
    return FilterEntry(p.name, per_node, None, None)


def score_entry(p: Plugin, weight: int) -> ScorePluginEntry:
    sign = p.sign_pod if isinstance(p, SignedPlugin) else None
    if isinstance(p, BatchScorePlugin):
        few = PerNodeScore(p) if isinstance(p, ScorePlugin) else None
        extensions = p.score_extensions()
        runner: BatchScorePlugin = p
    else:
        assert isinstance(p, ScorePlugin)  # checked by at()
        few = None
        extensions = p.score_extensions()
        runner = PerNodeScore(p)
    reads_only_scores = isinstance(extensions, ScoresOnlyNormalizer) and bool(extensions.normalize_reads_only_scores)
    return ScorePluginEntry(p.name, runner, weight, extensions, sign, few, reads_only_scores)
