"""A pod's Dynamic Resource Allocation fields: ``spec.resourceClaims``, ``status.resourceClaimStatuses``
and each container's ``resources.claims``, validated as the API server validates them
(``pkg/apis/core/validation/validation.go`` ``validatePodResourceClaims``, ``validateResourceClaimNames``).

A pod whose claims are malformed is refused with the field named, never scheduled as if it had none.
"""

from __future__ import annotations

import re

from apis.core.frozendict import EMPTY, FrozenDict
from apis.core.jsonfields import Json, JsonList, check_item, get_list, get_str, invalid
from apis.core.types import PodResourceClaim

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def pod_resource_claims(raw: JsonList) -> tuple[PodResourceClaim, ...]:
    """``spec.resourceClaims`` (errors relative to ``resourceClaims``)."""
    out: list[PodResourceClaim] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        entry = check_item(item, "resourceClaims", i)
        where = f"resourceClaims[{i}]"
        name = get_str(entry, "name")
        if not name:
            raise invalid(f"{where}.name", "required")
        if not is_dns_label(name):
            raise invalid(f"{where}.name", f"{name!r} is not a DNS label")
        if name in seen:
            raise invalid(f"{where}.name", f"duplicate value {name!r}")
        seen.add(name)
        claim_name = get_str(entry, "resourceClaimName")
        template_name = get_str(entry, "resourceClaimTemplateName")
        if bool(claim_name) == bool(template_name):
            raise invalid(where, "exactly one of resourceClaimName or resourceClaimTemplateName must be set")
        for field_name, value in (("resourceClaimName", claim_name), ("resourceClaimTemplateName", template_name)):
            if value and not is_dns_subdomain(value):
                raise invalid(f"{where}.{field_name}", f"{value!r} is not a DNS subdomain")
        out.append(PodResourceClaim(name=name, claim_name=claim_name, template_name=template_name))
    return tuple(out)


def resource_claim_statuses(raw: JsonList) -> FrozenDict[str, str]:
    """``status.resourceClaimStatuses`` -> pod claim name -> generated claim name (``""``: none needed)."""
    if not raw:
        return EMPTY
    out: dict[str, str] = {}
    for i, item in enumerate(raw):
        entry = check_item(item, "resourceClaimStatuses", i)
        name = get_str(entry, "name")
        if not name:
            raise invalid(f"resourceClaimStatuses[{i}].name", "required")
        out[name] = get_str(entry, "resourceClaimName")
    return FrozenDict(out)


def check_container_claims(container: Json, claim_names: frozenset[str], where: str) -> None:
    """``containers[i].resources.claims``: each names one of the pod's ``resourceClaims``, at most once
    per request."""
    resources = container.get("resources")
    if not resources or not isinstance(resources, dict) or not resources.get("claims"):
        return
    seen: set[tuple[str, str]] = set()
    for j, item in enumerate(get_list(resources, "claims")):
        entry = check_item(item, f"{where}.resources.claims", j)
        path = f"{where}.resources.claims[{j}]"
        name = get_str(entry, "name")
        if not name:
            raise invalid(f"{path}.name", "required")
        if name not in claim_names:
            raise invalid(f"{path}.name", f"must be the name of an entry in pod.spec.resourceClaims, not {name!r}")
        request = get_str(entry, "request")
        if (name, request) in seen:
            raise invalid(path, f"duplicate value {name!r}" + (f" request {request!r}" if request else ""))
        seen.add((name, request))
