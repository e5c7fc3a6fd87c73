"""How a job's pod is evicted: Koordinator's evictor interpreter
(``pkg/descheduler/controllers/migration/evictor``), as pure functions.

The policy is the pod's ``koordinator.sh/evict-policy`` label, else the job's, else the
MigrationController's ``evictionPolicy`` (default ``Eviction``); an unknown label value falls back to the
configured policy, as Koordinator's interpreter does:

- ``Eviction``: the ``policy/v1`` Eviction API (PodDisruptionBudgets honoured);
- ``Delete``: DELETE the pod with the job's ``deleteOptions`` (no budget is checked);
- ``SoftEviction``: annotate the pod with ``scheduling.koordinator.sh/soft-eviction`` (JSON: ``timestamp``,
  ``deleteOptions``, ``initiator`` (the job's ``koordinator.sh/evict-trigger``) and ``reason`` (its
  ``koordinator.sh/evict-reason``, else the trigger, else ``NotSet``)) and leave the pod to whatever
  controller acts on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from koord_scheduler.descheduler.migration.decide import ANNOTATION_EVICT_REASON, ANNOTATION_EVICT_TRIGGER
from kubeapi.events import rfc3339

POLICY_EVICTION: Final = "Eviction"
POLICY_DELETE: Final = "Delete"
POLICY_SOFT_EVICTION: Final = "SoftEviction"
POLICIES: Final = (POLICY_EVICTION, POLICY_DELETE, POLICY_SOFT_EVICTION)
LABEL_EVICT_POLICY: Final = "koordinator.sh/evict-policy"
ANNOTATION_SOFT_EVICTION: Final = "scheduling.koordinator.sh/soft-eviction"


def eviction_policy(pod_labels: Mapping[str, str], job_labels: Mapping[str, str], *, default: str) -> str:
    """The evictor for one job (module docstring)."""
    for labels in (pod_labels, job_labels):
        value = labels.get(LABEL_EVICT_POLICY, "")
        if value:
            return value if value in POLICIES else default
    return default


def trigger_and_reason(job_annotations: Mapping[str, str]) -> tuple[str, str]:
    """Koordinator's ``GetEvictionTriggerAndReason``."""
    trigger = job_annotations.get(ANNOTATION_EVICT_TRIGGER, "")
    reason = job_annotations.get(ANNOTATION_EVICT_REASON, "") or trigger or "NotSet"
    return trigger, reason


def soft_eviction_spec(
    job_annotations: Mapping[str, str], delete_options: Mapping[str, Any] | None, *, now: float
) -> str:
    """The ``scheduling.koordinator.sh/soft-eviction`` value (``extension.SoftEvictionSpec`` as Go marshals
    it: fields in declaration order, empty ones left out)."""
    trigger, reason = trigger_and_reason(job_annotations)
    spec: dict[str, Any] = {"timestamp": rfc3339(now)}
    if delete_options:
        spec["deleteOptions"] = dict(delete_options)
    if trigger:
        spec["initiator"] = trigger
    spec["reason"] = reason
    return json.dumps(spec, separators=(",", ":"))
