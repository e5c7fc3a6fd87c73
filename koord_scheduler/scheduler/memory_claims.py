"""The resourceclaim controller of the in-memory cluster (``koord-scheduler simulate``).

In a real cluster kube-controller-manager's resourceclaim controller
(``pkg/controller/resourceclaim/controller.go``) creates a pod's claims from its ResourceClaimTemplates,
names them in the pod's ``status.resourceClaimStatuses``, and once a pod is gone takes it out of the
claims' ``reservedFor``, deletes the claims it had generated for it and deallocates the others nobody
uses any more. The simulator does the same, after loading and after every write that may matter:

- a pending pod's template claim is created as ``<pod>-<claim>-<5 hex>`` (stable, from the pod's uid),
  owned by the pod (controller reference) with the ``resource.kubernetes.io/pod-claim-name`` annotation;
- a claim reserved for pods that no longer exist (or have finished) loses them; a generated claim whose
  pod is gone is deleted; an allocated claim left with no consumer is deallocated (allocation and the
  scheduler's finalizer removed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from apis.core.types import Pod

CLAIM_KIND = "ResourceClaim"
TEMPLATE_KIND = "ResourceClaimTemplate"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"

Raw = dict[str, Any]


def generated_claim_name(pod: Pod, claim_name: str) -> str:
    digest = hashlib.sha256(f"{pod.uid or pod.key}/{claim_name}".encode()).hexdigest()[:5]
    return f"{pod.name}-{claim_name}-{digest}"[:253]


def create_claims(templates: Mapping[str, Mapping[str, Any]], pod: Pod) -> tuple[list[tuple[str, Raw]], dict[str, str]]:
    """The claims to create for ``pod``'s template entries that have no status yet, and the pod's new
    ``resourceClaimStatuses`` (None-free: name -> claim name). Templates that do not exist are left for
    later (the pod keeps waiting, as with the real controller)."""
    created: list[tuple[str, Raw]] = []
    statuses = dict(pod.resource_claim_statuses)
    for entry in pod.resource_claims:
        if not entry.template_name or entry.name in statuses:
            continue
        template = templates.get(f"{pod.namespace}/{entry.template_name}")
        if template is None:
            continue
        spec = template.get("spec") or {}
        claim_meta = spec.get("metadata") or {}
        name = generated_claim_name(pod, entry.name)
        raw: Raw = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": CLAIM_KIND,
            "metadata": {
                "name": name,
                "namespace": pod.namespace,
                "uid": f"claim-{hashlib.sha256(f'{pod.namespace}/{name}'.encode()).hexdigest()[:12]}",
                "labels": dict(claim_meta.get("labels") or {}),
                "annotations": {**(claim_meta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: entry.name},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.name,
                        "uid": pod.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": json.loads(json.dumps(spec.get("spec") or {})),
        }
        created.append((f"{pod.namespace}/{name}", raw))
        statuses[entry.name] = name
    return created, statuses


def release_claims(claims: Mapping[str, Mapping[str, Any]], live_pod_uids: set[str]) -> list[tuple[str, Raw | None]]:
    """The claim writes for pods that are gone: ``(key, new raw)``, ``None`` meaning delete."""
    out: list[tuple[str, Raw | None]] = []
    for key, claim in claims.items():
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        owner = next(
            (r for r in meta.get("ownerReferences") or () if r.get("controller") and r.get("kind") == "Pod"), None
        )
        if owner is not None and owner.get("uid") not in live_pod_uids:
            out.append((key, None))
            continue
        reserved = list(status.get("reservedFor") or ())
        kept = [r for r in reserved if r.get("resource") != "pods" or r.get("uid") in live_pod_uids]
        if len(kept) == len(reserved):
            continue
        new_status = {k: v for k, v in status.items() if k != "reservedFor"}
        new_meta = dict(meta)
        if kept:
            new_status["reservedFor"] = kept
        elif status.get("allocation") is not None:
            new_status.pop("allocation", None)
            new_status.pop("devices", None)
            new_meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != FINALIZER] or None
            if new_meta["finalizers"] is None:
                new_meta.pop("finalizers")
        out.append((key, {**claim, "metadata": new_meta, "status": new_status}))
    return out
