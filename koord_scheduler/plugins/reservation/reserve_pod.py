"""A Reservation as a pod (Koordinator's ``NewReservePod``): what the queue schedules, and what an
Available reservation holds on its node.

- name and uid are the reservation's uid (its name when it has none yet, as in simulate files);
  namespace is the template's, else ``default``;
- labels and annotations are the template's overwritten by the reservation's, plus ``reserve-pod``;
- ``template.spec.nodeName`` moves to the ``reservation-node`` annotation (the Reservation PreFilter
  pins the node), so no plugin mistakes the reserve pod for a bound pod;
- priority is the template's ``spec.priority``, else ``MaxInt32``, so pods never preempt it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_pod
from apis.core.types import Pod
from apis.scheduling import (
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    ANNOTATION_RESERVE_POD,
    ReservationRecord,
)

MAX_INT32 = 2**31 - 1
DEFAULT_NAMESPACE = "default"


def reserve_pod_name(reservation: ReservationRecord) -> str:
    return reservation.uid or reservation.name


def reserve_pod_namespace(reservation: ReservationRecord) -> str:
    template = reservation.template or {}
    meta = template.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get("namespace"), str) and meta["namespace"]:
        return str(meta["namespace"])
    namespace = template.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE


def is_reserve_pod(pod: Pod) -> bool:
    return pod.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def reservation_name_of(pod: Pod) -> str:
    return pod.annotations.get(ANNOTATION_RESERVATION_NAME, "")


def pinned_node(pod: Pod) -> str:
    return pod.annotations.get(ANNOTATION_RESERVATION_NODE, "")


def new_reserve_pod(reservation: ReservationRecord) -> Pod:
    """The pending reserve pod. Raises ``ValueError`` when the template is not a valid pod."""
    template: Mapping[str, Any] = reservation.template or {}
    meta_in = template.get("metadata")
    meta_in = meta_in if isinstance(meta_in, Mapping) else {}
    spec: dict[str, Any] = copy.deepcopy(dict(template.get("spec") or {}))
    if "containers" not in spec:
        spec["containers"] = []
    node = spec.pop("nodeName", "") or ""
    labels = {**(meta_in.get("labels") or {}), **reservation.labels}
    annotations = {
        **(meta_in.get("annotations") or {}),
        **reservation.annotations,
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: reservation.name,
    }
    if node:
        annotations[ANNOTATION_RESERVATION_NODE] = str(node)
    if spec.get("priority") is None:
        spec["priority"] = MAX_INT32
    spec.pop("priorityClassName", None)
    name = reserve_pod_name(reservation)
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": reserve_pod_namespace(reservation),
            "uid": name,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return parse_pod(raw, require_containers=False)


def holding_pod(reserve_pod: Pod, node_name: str, remainder: Mapping[str, int]) -> Pod:
    """What an Available reservation accounts on its node: its unallocated remainder (cpu in millicores),
    with the template's host ports."""
    return replace(
        reserve_pod,
        node_name=node_name,
        requests=FrozenDict(remainder),
        limits=FrozenDict(),
        non_zero_cpu=int(remainder.get("cpu", 0)),
        non_zero_memory=int(remainder.get("memory", 0)),
        phase="Running",
    )
