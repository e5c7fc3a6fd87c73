"""Per-gang and per-gang-group bookkeeping, kept from pod and PodGroup events (Koordinator
``coscheduling/core/gang.go``, ``gang_cache.go``). Plain state: no clock, no I/O.

A gang's children are all its pods. A child is *waiting* from Permit until it binds or is unreserved,
and *bound* once PostBind ran or a watch event shows a node name. The rest with no node are *pending*.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from apis.core.types import Pod
from apis.scheduling.podgroup import MATCH_POLICY_ONCE_SATISFIED, MATCH_POLICY_ONLY_WAITING, PodGroupRecord
from koord_scheduler.plugins.coscheduling.spec import (
    GangRef,
    GangSpec,
    GangSpecError,
    SpecDefaults,
    spec_from_pod,
    spec_from_pod_group,
)


@dataclass(slots=True)
class Gang:
    gang_id: str
    from_pod_group: bool
    spec: GangSpec | None = None
    not_ready: str = ""
    """Why the gang has no spec yet (no PodGroup, bad PodGroup, first pod without min-available)."""
    pod_group: PodGroupRecord | None = None
    children: dict[str, Pod] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)

    def pending(self) -> list[str]:
        """Children with no node that are neither waiting nor bound, sorted by key."""
        return sorted(
            k for k, p in self.children.items() if not p.node_name and k not in self.waiting and k not in self.bound
        )


@dataclass(slots=True)
class Round:
    """One gang group tried back to back (Koordinator's GangSchedulingContext)."""

    group_id: str
    attempted: set[str] = field(default_factory=set)
    failed_message: str = ""
    preemption_message: str = ""
    """Set once job-level preemption ran in the round: what the round's later members are told."""
    planned: dict[str, str] = field(default_factory=dict)
    """Network-topology gangs: pod key -> node, planned for every pending member by the first one."""
    first: str = ""
    """The member that started the round."""
    quick_failed: str = ""
    """The last member PreFilter failed with :attr:`failed_message` (a "non-root-cause" pod)."""
    conditions_written: bool = False
    """Whether the round's untried members got ``PodScheduled=False`` (:mod:`.pending_condition`)."""


@dataclass(slots=True)
class GangGroupState:
    group_id: str
    once_satisfied: bool = False
    binding_members: tuple[str, ...] = ()
    """Keys of the pods allowed together when the group was satisfied (for the bind-gang annotations)."""


class GangCache:
    """Gangs by id, group state by group id."""

    def __init__(self, defaults: SpecDefaults) -> None:
        self.defaults = defaults
        self.gangs: dict[str, Gang] = {}
        self.groups: dict[str, GangGroupState] = {}
        self.pod_groups: dict[str, PodGroupRecord] = {}

    # ----- events -----

    def on_pod_group(self, record: PodGroupRecord | None, key: str) -> Gang | None:
        """A PodGroup was added/updated (``record``) or deleted (None). Re-initialises the gang."""
        if record is None:
            self.pod_groups.pop(key, None)
            gang = self.gangs.get(key)
            if gang is not None and gang.from_pod_group:
                spec = gang.spec
                gang.spec, gang.pod_group, gang.not_ready = None, None, f"PodGroup {key} was deleted"
                if not gang.children:
                    del self.gangs[key]
                    self._forget_group(spec)
            return gang
        self.pod_groups[key] = record
        gang = self.gangs.get(key)
        if gang is None:
            gang = self.gangs[key] = Gang(key, True)
        if gang.from_pod_group:
            self._init_from_pod_group(gang, record)
        return gang

    def add_pod(self, ref: GangRef, pod: Pod) -> Gang:
        gang = self.gangs.get(ref.gang_id)
        if gang is None:
            gang = self.gangs[ref.gang_id] = Gang(ref.gang_id, ref.from_pod_group)
            if ref.from_pod_group:
                record = self.pod_groups.get(ref.gang_id)
                if record is not None:
                    self._init_from_pod_group(gang, record)
                else:
                    gang.not_ready = f"PodGroup {ref.gang_id} does not exist"
        if not gang.from_pod_group and gang.spec is None:
            try:
                gang.spec = spec_from_pod(pod, ref, self.defaults)
                gang.not_ready = ""
            except GangSpecError as exc:
                gang.not_ready = str(exc)
        gang.children[pod.key] = pod
        if pod.node_name:
            gang.bound.add(pod.key)
            gang.waiting.discard(pod.key)
            if gang.spec is not None:
                self.group(gang.spec.group_id).once_satisfied = True
        return gang

    def remove_pod(self, ref: GangRef, pod: Pod) -> None:
        gang = self.gangs.get(ref.gang_id)
        if gang is None:
            return
        gang.children.pop(pod.key, None)
        gang.waiting.discard(pod.key)
        gang.bound.discard(pod.key)
        if not gang.children and (not gang.from_pod_group or ref.gang_id not in self.pod_groups):
            del self.gangs[ref.gang_id]
            self._forget_group(gang.spec)

    def _forget_group(self, spec: GangSpec | None) -> None:
        """Drop the group state of a deleted gang once no gang of its group is left."""
        if spec is not None and not any(g in self.gangs for g in spec.groups):
            self.groups.pop(spec.group_id, None)

    def _init_from_pod_group(self, gang: Gang, record: PodGroupRecord) -> None:
        gang.pod_group = record
        try:
            gang.spec = spec_from_pod_group(record, GangRef(gang.gang_id, record.name, True), self.defaults)
            gang.not_ready = ""
        except GangSpecError as exc:
            gang.spec, gang.not_ready = None, str(exc)

    # ----- queries -----

    def group(self, group_id: str) -> GangGroupState:
        state = self.groups.get(group_id)
        if state is None:
            state = self.groups[group_id] = GangGroupState(group_id)
        return state

    def members(self, spec: GangSpec) -> Iterator[Gang]:
        """The gangs of ``spec``'s group that exist."""
        for gang_id in spec.groups:
            gang = self.gangs.get(gang_id)
            if gang is not None:
                yield gang

    def basic_check(self, spec: GangSpec, *, counts: bool = True) -> str:
        """Koordinator's gang-group basic check: "" when every gang of the group exists, is initialised
        and has at least min-available children; otherwise the reasons joined by ``, ``. ``counts``: name
        each short gang with its children and min-available (``g (2/3)``); Koordinator's text has none."""
        missing, not_init, short = [], [], []
        for gang_id in spec.groups:
            gang = self.gangs.get(gang_id)
            if gang is None:
                missing.append(gang_id)
            elif gang.spec is None:
                not_init.append(gang_id)
            elif len(gang.children) < gang.spec.min_member:
                short.append(f"{gang_id} ({len(gang.children)}/{gang.spec.min_member})" if counts else gang_id)
        parts = []
        if missing:
            parts.append(f"memberGangs [{' '.join(missing)}] doesn't exists")
        if not_init:
            parts.append(f"memberGangs [{' '.join(not_init)}] has not init")
        if short:
            parts.append(f"memberGangs [{' '.join(short)}] child pod not collect enough")
        return ", ".join(parts)

    def group_satisfied(self, spec: GangSpec) -> bool:
        """Every gang of the group is valid for Permit under its match policy (Koordinator
        ``isGangValidForPermit``)."""
        once = self.group(spec.group_id).once_satisfied
        for gang_id in spec.groups:
            gang = self.gangs.get(gang_id)
            if gang is None or gang.spec is None:
                return False
            if not gang_valid_for_permit(
                gang.spec.match_policy, gang.spec.min_member, len(gang.waiting), len(gang.bound), once
            ):
                return False
        return True

    def group_satisfied_with(self, spec: GangSpec, gang_id: str, pod_key: str) -> bool:
        """:meth:`group_satisfied` were ``pod_key`` (a member of ``gang_id``) waiting at Permit too."""
        once = self.group(spec.group_id).once_satisfied
        for member_id in spec.groups:
            gang = self.gangs.get(member_id)
            if gang is None or gang.spec is None:
                return False
            waiting = len(gang.waiting | {pod_key}) if member_id == gang_id else len(gang.waiting)
            if not gang_valid_for_permit(gang.spec.match_policy, gang.spec.min_member, waiting, len(gang.bound), once):
                return False
        return True

    def waiting_in_group(self, spec: GangSpec) -> list[str]:
        return sorted(k for gang in self.members(spec) for k in gang.waiting)

    def report_rows(self) -> list[dict[str, object]]:
        """One row per gang, by id (``simulate``'s gangs table)."""
        rows: list[dict[str, object]] = []
        for gang_id in sorted(self.gangs):
            gang = self.gangs[gang_id]
            spec = gang.spec
            rows.append(
                {
                    "gang": gang_id,
                    "minMember": spec.min_member if spec else None,
                    "mode": spec.mode if spec else None,
                    "group": spec.group_id if spec else None,
                    "children": len(gang.children),
                    "bound": len([k for k, p in gang.children.items() if p.node_name]),
                    "problem": gang.not_ready,
                }
            )
        return rows


def gang_valid_for_permit(policy: str, min_member: int, waiting: int, bound: int, once_satisfied: bool) -> bool:
    """only-waiting: waiting ≥ min; waiting-and-running: waiting + bound ≥ min; once-satisfied (default):
    waiting ≥ min, or the group has been satisfied once."""
    if policy == MATCH_POLICY_ONLY_WAITING:
        return waiting >= min_member
    if policy == MATCH_POLICY_ONCE_SATISFIED:
        return waiting >= min_member or once_satisfied
    return waiting + bound >= min_member
