"""The messages users see, worded as Koordinator's (``coscheduling/core/core.go``) so that searches for a
Koordinator message find ours. Quoted values use Go's ``%q`` style (double quotes, escapes)."""

from __future__ import annotations

import json
from collections.abc import Sequence


def go_quote(text: str) -> str:
    """Go's ``%q`` for the text users see (double quotes, backslash escapes)."""
    return json.dumps(text, ensure_ascii=False)


def gang_not_found(gang_id: str, pod_key: str) -> str:
    return f"can't find gang, gangName: {gang_id}, podName: {pod_key}"


def not_init(gang_id: str, pod_key: str, why: str) -> str:
    text = f"gang has not init, gangName: {gang_id}, podName: {pod_key}"
    return f"{text}: {why}" if why else text


def not_collect_enough(groups: Sequence[str], problems: str, gang_id: str, pod_key: str) -> str:
    return f"gangGroup [{' '.join(groups)}] basic check: {problems}, current gang: {gang_id}, podName: {pod_key}"


def gang_group_rejected(group_id: str, pod_key: str, reason: str, waiting: int) -> str:
    return (
        f"GangGroup {go_quote(group_id)} gets rejected due to member Pod {go_quote(pod_key)} is unschedulable "
        f"with reason {go_quote(reason)}, alreadyWaitForBound: {waiting}"
    )


def unreserve_rejected(gang_id: str, pod_name: str) -> str:
    return f"Gang {go_quote(gang_id)} gets rejected due to Pod {go_quote(pod_name)} in Unreserve"


def all_attempted() -> str:
    return "all pending pods is already been attempted"


def gang_cannot_complete(group_id: str) -> str:
    """DefaultPreemption's answer for a gang member preempting alone (pykoord's own message: Koordinator lets
    the member preempt)."""
    return (
        f"gangGroup {group_id} would not be satisfied even with this pod: a gang member preempts on its own "
        "only when its gang can complete (job-level preemption: CoschedulingArgs.enablePreemption)"
    )
