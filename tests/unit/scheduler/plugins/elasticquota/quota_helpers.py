"""Builders for ElasticQuota records in unit tests."""

from __future__ import annotations

import json
from collections.abc import Mapping

from apis.scheduling.elasticquota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    QuotaRecord,
    parse_elastic_quota,
)


def quota(
    name: str,
    *,
    min: Mapping[str, int | str] | None = None,
    max: Mapping[str, int | str] | None = None,
    parent: str = "",
    is_parent: bool = False,
    lend: bool = True,
    weight: Mapping[str, int | str] | None = None,
    namespace: str = "default",
    namespaces: tuple[str, ...] = (),
) -> QuotaRecord:
    """A quota as parsed from the API; amounts as in YAML (``{"cpu": 4}`` is 4 cores)."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if parent:
        labels[LABEL_PARENT] = parent
    if is_parent:
        labels[LABEL_IS_PARENT] = "true"
    if not lend:
        labels[LABEL_ALLOW_LENT_RESOURCE] = "false"
    if weight is not None:
        annotations[ANNOTATION_SHARED_WEIGHT] = json.dumps({k: str(v) for k, v in weight.items()})
    if namespaces:
        annotations[ANNOTATION_NAMESPACES] = json.dumps(list(namespaces))
    return parse_elastic_quota(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
            "spec": {
                "min": {k: str(v) for k, v in (min or {}).items()},
                "max": {k: str(v) for k, v in (max or {}).items()},
            },
        }
    )
