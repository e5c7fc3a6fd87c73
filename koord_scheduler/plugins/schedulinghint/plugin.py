"""The SchedulingHint plugin (Koordinator ``pkg/scheduler/plugins/schedulinghint``).

A pod may carry a hint as JSON in the annotation ``internal.scheduling.koordinator.sh/scheduling-hint``
(or the deprecated ``scheduling.koordinator.sh/scheduling-hint``, read when the first is absent or empty)::

    {"nodeNames": ["n1", "n2"], "preferredNodeNames": ["n2"], "extensions": {...}}

- ``nodeNames``: PreFilter restricts the pod to these nodes.
- ``preferredNodeNames``: tried first, in order (at most ``maxHintNodes``, and only those PreFilter
  kept): the first that passes Filter is the only candidate of the cycle; when none passes, the pod is
  scheduled over every node as usual.
- ``extensions``: per-plugin data, kept in the cycle state for plugins that read it.

An annotation that is not a JSON object of that shape fails the cycle with an error naming the plugin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.config.schedulinghint_args import SchedulingHintArgs
from apis.core import boundedjson
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import PreFilterPlugin
from koord_scheduler.framework.koordinator_stages import NodePreferrer, PreFilterTransformer
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Status, error, skip, success
from koord_scheduler.framework.types import PreFilterResult
from koord_scheduler.plugins import names

NAME = names.SCHEDULING_HINT
ARGS = SchedulingHintArgs

ANNOTATION_SCHEDULING_HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
DEPRECATED_ANNOTATION_SCHEDULING_HINT = "scheduling.koordinator.sh/scheduling-hint"


@dataclass(frozen=True, slots=True)
class SchedulingHint:
    node_names: tuple[str, ...] = ()
    preferred_node_names: tuple[str, ...] = ()
    extensions: Mapping[str, Any] = field(default_factory=dict)


HINT_KEY: StateKey[SchedulingHint] = StateKey("SchedulingHint/hint")


def _names(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of node names")
    return tuple(value)


def parse_hint(annotations: Mapping[str, str]) -> SchedulingHint | None:
    """The pod's hint, or None without one. Raises ValueError naming the annotation when it is malformed."""
    key = ANNOTATION_SCHEDULING_HINT
    text = annotations.get(key)
    if not text:
        key = DEPRECATED_ANNOTATION_SCHEDULING_HINT
        text = annotations.get(key)
        if not text:
            return None
    try:
        raw = boundedjson.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"annotation {key}: invalid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"annotation {key}: must be a JSON object")
    try:
        extensions = raw.get("extensions") or {}
        if not isinstance(extensions, dict):
            raise ValueError("extensions must be an object")
        return SchedulingHint(
            node_names=_names(raw.get("nodeNames"), "nodeNames"),
            preferred_node_names=_names(raw.get("preferredNodeNames"), "preferredNodeNames"),
            extensions=extensions,
        )
    except ValueError as exc:
        raise ValueError(f"annotation {key}: {exc}") from exc


def preferred_nodes(hint: SchedulingHint, result: PreFilterResult | None, max_hint_nodes: int) -> list[str]:
    """The hint's preferred nodes to try: the first ``max_hint_nodes``, then only those in ``result``."""
    nodes = list(hint.preferred_node_names[:max_hint_nodes])
    if result is not None and result.node_names is not None:
        nodes = [n for n in nodes if n in result.node_names]
    return nodes


class SchedulingHintPlugin:
    name = NAME

    def __init__(self, args: SchedulingHintArgs) -> None:
        self.max_hint_nodes = args.max_hint_nodes

    # BeforePreFilter: read the hint once per cycle.
    def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Pod | None, Status]:
        try:
            hint = parse_hint(pod.annotations)
        except ValueError as exc:
            return None, error(str(exc))
        if hint is not None:
            state.write(HINT_KEY, hint)
        return None, success()

    def after_pre_filter(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> Status:
        return success()

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        hint = state.get(HINT_KEY)
        if hint is None or not hint.node_names:
            return None, success()
        return PreFilterResult(frozenset(hint.node_names)), success()

    def pre_filter_extensions(self) -> None:
        return None

    def prefer_nodes(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> tuple[Sequence[str], Status]:
        hint = state.get(HINT_KEY)
        if hint is None:
            return (), skip()
        nodes = preferred_nodes(hint, result, self.max_hint_nodes)
        return (nodes, success()) if nodes else ((), skip())


def new(args: SchedulingHintArgs | None, handle: Handle) -> SchedulingHintPlugin:
    return SchedulingHintPlugin(args if args is not None else SchedulingHintArgs())


def declared_capabilities(plugin: SchedulingHintPlugin) -> tuple[PreFilterPlugin, PreFilterTransformer, NodePreferrer]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin
