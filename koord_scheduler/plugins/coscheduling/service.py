"""Coscheduling's debug endpoints (Koordinator ``coscheduling/plugin_service.go``, ``core/gang_summary.go``):

- ``GET /apis/v1/plugins/Coscheduling/gang/:namespace/:name``: one gang's ``GangSummary``, or 404
  ``{"message": "cannot find gang <ns>/<name>"}``;
- ``GET /apis/v1/plugins/Coscheduling/gangs``: every gang's, by ``namespace/name``.

The JSON is Koordinator's: ``waitTime`` in nanoseconds (a Go ``time.Duration``), the member sets as
``{"ns/pod": {}}`` objects, ``gangGroupInfo`` with Go's field names. ``createTime`` is the PodGroup's
creation time, or the earliest member's for an annotation gang. ``gangGroupInfo.RepresentativePodKey`` is
the first member of the round in progress for the group (pykoord keeps no representative between rounds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from koord_scheduler.framework.services import ApiReply, ApiRoute, go_time, not_found, ok, string_set
from koord_scheduler.plugins.coscheduling.gang_cache import Gang, Round

if TYPE_CHECKING:
    from koord_scheduler.plugins.coscheduling.plugin import Coscheduling

GANG_FROM_POD_GROUP = "GangFromPodGroupCrd"
GANG_FROM_ANNOTATION = "GangFromPodAnnotation"
NANOS = 1_000_000_000


def gang_summary(plugin: Coscheduling, gang: Gang) -> dict[str, Any]:
    """Koordinator's ``GangSummary`` for ``gang``."""
    spec = gang.spec
    groups = list(spec.groups) if spec is not None else [gang.gang_id]
    group_id = spec.group_id if spec is not None else gang.gang_id
    state = plugin.cache.groups.get(group_id)
    once = state.once_satisfied if state is not None else False
    bound = {k for k, p in gang.children.items() if p.node_name} | gang.bound
    current = plugin.round
    waiting_gangs = [g for g in groups if (member := plugin.cache.gangs.get(g)) is not None and member.waiting]
    return {
        "name": gang.gang_id,
        "waitTime": int(spec.wait_seconds * NANOS) if spec is not None else 0,
        "createTime": _create_time(gang),
        "mode": spec.mode if spec is not None else "",
        "gangMatchPolicy": spec.match_policy if spec is not None else "",
        "minRequiredNumber": spec.min_member if spec is not None else 0,
        "totalChildrenNum": spec.total if spec is not None else 0,
        "gangGroup": groups,
        "children": string_set(set(gang.children)),
        "pendingChildren": string_set(set(gang.pending())),
        "waitingForBindChildren": string_set(gang.waiting),
        "boundChildren": string_set(bound),
        "onceResourceSatisfied": once,
        "gangGroupInfo": {
            "Initialized": spec is not None,
            "GangGroupId": group_id,
            "GangGroup": groups,
            "OnceResourceSatisfied": once,
            "WaitingGangIDs": string_set(waiting_gangs),
            "RepresentativePodKey": _representative(current, group_id),
            "BindingMemberPods": string_set(set(state.binding_members) if state is not None else set()),
        },
        "gangFrom": GANG_FROM_POD_GROUP if gang.from_pod_group else GANG_FROM_ANNOTATION,
        "hasGangInit": spec is not None,
    }


def _create_time(gang: Gang) -> str:
    if gang.pod_group is not None and gang.pod_group.creation_timestamp:
        return gang.pod_group.creation_timestamp
    times = [p.meta.creation_timestamp for p in gang.children.values() if p.meta.creation_timestamp is not None]
    return go_time(min(times) if times else None)


def _representative(current: Round | None, group_id: str) -> str:
    return current.first if current is not None and current.group_id == group_id else ""


def routes(plugin: Coscheduling) -> Sequence[ApiRoute]:
    def gang(params: Mapping[str, str], _: Mapping[str, str]) -> ApiReply:
        gang_id = f"{params['namespace']}/{params['name']}"
        found = plugin.cache.gangs.get(gang_id)
        if found is None:
            return not_found(f"cannot find gang {gang_id}")
        return ok(gang_summary(plugin, found))

    def gangs(_: Mapping[str, str], __: Mapping[str, str]) -> ApiReply:
        return ok({gang_id: gang_summary(plugin, g) for gang_id, g in sorted(plugin.cache.gangs.items())})

    return (ApiRoute("/gang/:namespace/:name", gang), ApiRoute("/gangs", gangs))
