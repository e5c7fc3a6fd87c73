"""How a pod declares its gang, and the gang's parameters: pure functions over labels and annotations.

Name lookup, first non-empty wins (Koordinator ``apis/extension/coscheduling.go``):

1. label ``pod-group.scheduling.sigs.k8s.io``: the gang is the PodGroup of that name (pod's namespace);
2. label ``pod-group.scheduling.sigs.k8s.io/name`` (lightweight): defined by the pod's labels/annotations;
3. annotation ``gang.scheduling.koordinator.sh/name``: defined by the pod's annotations.

Defaults are Koordinator's: ``total-number`` = min-available, mode Strict, match policy and waiting time
from the plugin args, ``groups`` = the gang alone. Where Koordinator silently replaces a *present but bad*
value by its default (``waiting-time: abc``, ``groups: not-json``, ``total-number`` below
``min-available``, an unknown mode; or ignores a ``network-topology-spec`` that is not JSON), pykoord
rejects the pod with a message naming the key and value: a gang that quietly runs with other parameters
than its author wrote is harder to debug than one that says why it does not run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from apis.config.duration import parse_go_duration
from apis.core import boundedjson
from apis.core.types import Pod
from apis.scheduling import podgroup as pg
from apis.scheduling.network_topology import GangTopologySpec, parse_network_topology_spec

MAX_PERMIT_WAIT_SECONDS = 900.0
"""kube-scheduler caps any Permit wait at 15 minutes (``maxTimeout``); longer waiting times are cut."""


class GangSpecError(ValueError):
    """A gang parameter that cannot be used; the message names the key and the value."""


@dataclass(frozen=True, slots=True)
class GangRef:
    """Which gang a pod belongs to. ``from_pod_group``: defined by a PodGroup object, not the pod."""

    gang_id: str
    name: str
    from_pod_group: bool


@dataclass(frozen=True, slots=True)
class GangSpec:
    min_member: int
    total: int
    mode: str
    match_policy: str
    wait_seconds: float
    groups: tuple[str, ...]
    """Gang ids of the gang group, sorted, this gang included."""
    network_topology: GangTopologySpec | None = None
    """The ``network-topology-spec`` annotation (used only with the ``awareNetworkTopology`` arg)."""

    @property
    def group_id(self) -> str:
        return group_id(self.groups)


@dataclass(frozen=True, slots=True)
class SpecDefaults:
    wait_seconds: float = 600.0
    match_policy: str = pg.MATCH_POLICY_ONCE_SATISFIED


def gang_ref(pod: Pod) -> GangRef | None:
    """The pod's gang, or None for a pod that is not a gang member."""
    meta = pod.meta  # every scheduled pod comes here several times: plain pods leave after two checks
    labels, notes = meta.labels, meta.annotations
    if labels:
        name = labels.get(pg.LABEL_POD_GROUP, "")
        if name:
            return GangRef(f"{meta.namespace}/{name}", name, True)
        name = labels.get(pg.LABEL_LIGHTWEIGHT_NAME, "")
        if name:
            return GangRef(f"{meta.namespace}/{name}", name, False)
    name = notes.get(pg.ANNOTATION_GANG_NAME, "") if notes else ""
    return GangRef(f"{meta.namespace}/{name}", name, False) if name else None


def group_id(gang_ids: tuple[str, ...] | list[str]) -> str:
    """Koordinator's GangGroupId: the member gang ids sorted and joined by ``,``."""
    return ",".join(sorted(gang_ids))


def spec_from_pod(pod: Pod, ref: GangRef, defaults: SpecDefaults) -> GangSpec:
    """The spec of an annotation (or lightweight-label) gang from one member pod. Raises
    :class:`GangSpecError`."""
    raw = pod.labels.get(pg.LABEL_LIGHTWEIGHT_MIN_AVAILABLE) or pod.annotations.get(pg.ANNOTATION_GANG_MIN_AVAILABLE)
    if raw is None or raw == "":
        raise GangSpecError(
            f"gang {ref.gang_id} has no {pg.ANNOTATION_GANG_MIN_AVAILABLE} annotation "
            f"(or {pg.LABEL_LIGHTWEIGHT_MIN_AVAILABLE} label)"
        )
    min_member = _positive_int(pg.ANNOTATION_GANG_MIN_AVAILABLE, raw)
    notes = pod.annotations
    merged = {**dict(pod.labels), **dict(notes)}
    return _spec(ref, min_member, merged, defaults, wait=notes.get(pg.ANNOTATION_GANG_WAITING_TIME))


def spec_from_pod_group(group: pg.PodGroupRecord, ref: GangRef, defaults: SpecDefaults) -> GangSpec:
    """The spec of a PodGroup gang: ``minMember`` and ``scheduleTimeoutSeconds`` from the spec, mode,
    match policy, groups and total-number from the PodGroup's annotations. Raises :class:`GangSpecError`."""
    if group.invalid:
        raise GangSpecError(group.invalid)
    spec = _spec(ref, group.min_member, group.annotations, defaults, wait=None)
    if group.schedule_timeout_seconds > 0:
        spec = GangSpec(
            spec.min_member,
            spec.total,
            spec.mode,
            spec.match_policy,
            min(float(group.schedule_timeout_seconds), MAX_PERMIT_WAIT_SECONDS),
            spec.groups,
            spec.network_topology,
        )
    return spec


def _spec(
    ref: GangRef, min_member: int, values: Mapping[str, str], defaults: SpecDefaults, *, wait: str | None
) -> GangSpec:
    total = min_member
    raw_total = values.get(pg.ANNOTATION_GANG_TOTAL_NUMBER, "")
    if raw_total:
        total = _non_negative_int(pg.ANNOTATION_GANG_TOTAL_NUMBER, raw_total) or min_member
        if total < min_member:
            raise GangSpecError(
                f"gang {ref.gang_id}: {pg.ANNOTATION_GANG_MIN_AVAILABLE} {min_member} is above "
                f"{pg.ANNOTATION_GANG_TOTAL_NUMBER} {total}"
            )
    mode = values.get(pg.ANNOTATION_GANG_MODE, "") or pg.MODE_STRICT
    if mode not in (pg.MODE_STRICT, pg.MODE_NON_STRICT):
        raise GangSpecError(
            f"{pg.ANNOTATION_GANG_MODE}: unsupported value {mode!r}, want {pg.MODE_STRICT} or {pg.MODE_NON_STRICT}"
        )
    policy = (
        values.get(pg.ANNOTATION_GANG_MATCH_POLICY, "")
        or values.get(pg.KEY_LIGHTWEIGHT_MATCH_POLICY, "")
        or defaults.match_policy
    )
    if policy not in pg.MATCH_POLICIES:
        raise GangSpecError(
            f"{pg.ANNOTATION_GANG_MATCH_POLICY}: unsupported value {policy!r}, "
            f"want one of {', '.join(pg.MATCH_POLICIES)}"
        )
    wait_seconds = defaults.wait_seconds if not wait else parse_waiting_time(wait)
    groups = parse_groups(values.get(pg.ANNOTATION_GANG_GROUPS, ""), ref.gang_id)
    return GangSpec(
        min_member,
        total,
        mode,
        policy,
        min(wait_seconds, MAX_PERMIT_WAIT_SECONDS),
        groups,
        _network_topology(values.get(pg.ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC, "")),
    )


def _network_topology(text: str) -> GangTopologySpec | None:
    try:
        return parse_network_topology_spec(text)
    except ValueError as exc:
        raise GangSpecError(f"{pg.ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC}: {exc}") from None


def parse_waiting_time(text: str) -> float:
    """A Go duration ("30s", "10m") in seconds; must be positive. Raises :class:`GangSpecError`."""
    try:
        seconds = parse_go_duration(text.strip())
    except ValueError as exc:
        raise GangSpecError(f"{pg.ANNOTATION_GANG_WAITING_TIME}: {exc}") from exc
    if seconds <= 0:
        raise GangSpecError(f"{pg.ANNOTATION_GANG_WAITING_TIME}: must be positive, got {text!r}")
    return seconds


def parse_groups(text: str, own_id: str) -> tuple[str, ...]:
    """The ``groups`` annotation: a JSON array of ``namespace/name`` gang ids. Empty means the gang alone;
    the gang itself is always a member. Sorted. Raises :class:`GangSpecError`."""
    if not text.strip():
        return (own_id,)
    try:
        value = boundedjson.loads(text)
    except json.JSONDecodeError as exc:
        raise GangSpecError(f"{pg.ANNOTATION_GANG_GROUPS}: not JSON ({exc.msg}): {text!r}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise GangSpecError(f"{pg.ANNOTATION_GANG_GROUPS}: want a JSON array of gang ids, got {text!r}")
    for gang in value:
        if gang.count("/") != 1:
            raise GangSpecError(f"{pg.ANNOTATION_GANG_GROUPS}: gang id {gang!r} is not namespace/name")
    return tuple(sorted({*value, own_id}))


def _positive_int(key: str, text: str) -> int:
    value = _non_negative_int(key, text)
    if value < 1:
        raise GangSpecError(f"{key}: must be at least 1, got {text!r}")
    return value


def _non_negative_int(key: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise GangSpecError(f"{key}: not an integer: {text!r}") from None
    if value < 0:
        raise GangSpecError(f"{key}: must be non-negative, got {text!r}")
    return value


_BIND_ANNOTATIONS = (
    pg.ANNOTATION_BIND_GANG_GROUP_ID,
    pg.ANNOTATION_BIND_GANG_MEMBER_COUNT,
    pg.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID,
    pg.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT,
)


def bind_annotations(pod: Pod, group_id: str, members: tuple[str, ...]) -> dict[str, str | None]:
    """PreBind's annotation patch: the gang group id and member count on a pod allowed together with at
    least one other member (``members``); otherwise the removal (None) of such annotations it carries."""
    if pod.key in members and len(members) >= 2:
        count = str(len(members))
        return {
            pg.ANNOTATION_BIND_GANG_GROUP_ID: group_id,
            pg.ANNOTATION_BIND_GANG_MEMBER_COUNT: count,
            pg.DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: group_id,
            pg.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: count,
        }
    return {k: None for k in _BIND_ANNOTATIONS if k in pod.annotations}
