"""The Reservation a ReservationFirst PodMigrationJob creates for its pod, as Koordinator builds it
(``pkg/descheduler/controllers/migration/reservation/util.go`` ``CreateOrUpdateReservationOptions``).

- named after the job's UID unless the job's ``reservationOptions.template`` names it;
- ``spec.template``: the pod's labels, annotations and spec (``nodeName`` cleared) unless the job gives one;
- ``spec.owners``: the pod's controller reference (with the pod's namespace); the pod itself when it is
  pending and unschedulable; unless the job gives owners;
- ``allocateOnce: true``; the job's ``ttl`` when the template sets neither ``ttl`` nor ``expires``;
- label ``app.kubernetes.io/created-by: koord-descheduler``;
- a ``metadata.name NotIn [current node]`` match field on every required node-affinity term (one term
  with only that field when there is none), so the replacement never lands where the pod was.

Two deliberate differences. Koordinator also labels the Reservation
``scheduling.koordinator.sh/reservation-order`` (the time in milliseconds) when it creates it; here the job
adds that label just before it evicts its pod (:mod:`.decide`), so that a replacement pod prefers the
Reservation of a job whose pod is gone (the scheduler prefers the lowest order, and any order over none) to
that of a job that has not evicted yet, which would fail that job and leave the evicting one without a
replacement. And Koordinator copies the pod's whole ``ObjectMeta`` (uid, resourceVersion, ownerReferences,
managedFields...) into the template; only name, namespace, labels and annotations are copied here (the rest
means nothing for a pod not yet created), and the pod's own
``reservation-allocated`` annotation is dropped (the replacement must not claim the old Reservation).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from apis.scheduling.constants import (
    ANNOTATION_RESERVATION_ALLOCATED,
    API_VERSION,
)
from apis.scheduling.migration import PodMigrationJobRecord

LABEL_CREATED_BY: Final = "app.kubernetes.io/created-by"
CREATOR: Final = "koord-descheduler"
_KEPT_POD_META = ("name", "namespace", "labels", "annotations")


class TemplateError(ValueError):
    """The job's template or the pod cannot give a Reservation (the message names the field)."""


def reservation_owners(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Koordinator's ``GenerateReserveResourceOwners``: the pod itself when it is Pending with
    ``PodScheduled=False``, else its controller reference (namespaced), else none."""
    meta = _mapping(pod.get("metadata"))
    status = _mapping(pod.get("status"))
    if status.get("phase") == "Pending":
        for condition in status.get("conditions") or ():
            if (
                isinstance(condition, Mapping)
                and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
            ):
                return [
                    {
                        "object": {
                            "uid": meta.get("uid", ""),
                            "kind": "Pod",
                            "name": meta.get("name", ""),
                            "namespace": meta.get("namespace", ""),
                        }
                    }
                ]
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return [{"controller": {**dict(ref), "namespace": meta.get("namespace", "")}}]
    return []


def reservation_for_job(job: PodMigrationJobRecord, pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Reservation object (JSON-ready) ``job`` creates for ``pod`` (the pod as the API server serves
    it). Raises :class:`TemplateError` when the result
    would have no owner (a bare pod: nothing would recreate it into the Reservation)."""
    given = copy.deepcopy(dict(job.template)) if job.template else {}
    meta = dict(_mapping(given.get("metadata")))
    spec = dict(_mapping(given.get("spec")))
    if not meta.get("name"):
        meta["name"] = job.uid
    if not meta.get("name"):
        raise TemplateError(f"PodMigrationJob {job.name}: metadata.uid is empty, the Reservation needs a name")
    if not spec.get("template"):
        spec["template"] = _pod_template(pod)
    if not spec.get("owners"):
        spec["owners"] = reservation_owners(pod)
    if not spec["owners"]:
        pod_meta = _mapping(pod.get("metadata"))
        raise TemplateError(
            f"pod {pod_meta.get('namespace', '')}/{pod_meta.get('name', '')} has no controller "
            "(ownerReferences with controller: true) to recreate it into a Reservation"
        )
    spec["allocateOnce"] = True
    template = dict(_mapping(spec["template"]))
    pod_spec = dict(_mapping(template.get("spec")))
    pod_spec.pop("nodeName", None)
    node_name = _mapping(pod.get("spec")).get("nodeName")
    if isinstance(node_name, str) and node_name:
        pod_spec["affinity"] = skip_node_affinity(_mapping(pod_spec.get("affinity")), node_name)
    template["spec"] = pod_spec
    spec["template"] = template
    labels = dict(_mapping(meta.get("labels")))
    labels[LABEL_CREATED_BY] = CREATOR
    meta["labels"] = labels
    if spec.get("ttl") is None and spec.get("expires") is None and job.ttl_seconds:
        spec["ttl"] = job.ttl_text
    return {"apiVersion": API_VERSION, "kind": "Reservation", "metadata": meta, "spec": spec}


def skip_node_affinity(affinity: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """``affinity`` with ``metadata.name NotIn [node_name]`` added to every required node-selector term
    (Koordinator's ``appendSkipNodeAffinity``); a copy, the input is not changed."""
    out = copy.deepcopy(dict(affinity))
    node_affinity = dict(_mapping(out.get("nodeAffinity")))
    required = dict(_mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")))
    skip = {"key": "metadata.name", "operator": "NotIn", "values": [node_name]}
    terms = [dict(_mapping(t)) for t in required.get("nodeSelectorTerms") or ()]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or ()), skip]
    if not terms:
        terms = [{"matchFields": [skip]}]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    out["nodeAffinity"] = node_affinity
    return out


def _pod_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = _mapping(pod.get("metadata"))
    kept = {k: copy.deepcopy(meta[k]) for k in _KEPT_POD_META if meta.get(k)}
    annotations = dict(_mapping(kept.get("annotations")))
    annotations.pop(ANNOTATION_RESERVATION_ALLOCATED, None)
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    return {"metadata": kept, "spec": copy.deepcopy(dict(_mapping(pod.get("spec"))))}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
