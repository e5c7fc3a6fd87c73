"""CPUNormalization's values (Koordinator ``runtimehooks/hooks/cpunormalization``), as pure functions.

On a node whose ``node.koordinator.sh/cpu-normalization-ratio`` annotation is set (the ratio of this node's
CPU to the reference CPU, written by the noderesource controller), an LS pod's CPU limit means reference
cores: its CFS quota becomes ``ceil(quota / ratio)`` for a ratio above 1 (a faster CPU does the same work
in less time), the kubelet's quota for a ratio of at most 1. The quota is Kubernetes' ``limit * 100000 /
1000`` (at least 1000 us); a container or pod without a CPU limit keeps no quota.

Which pods: the ``koordinator.sh/qosClass`` label LS, or no label (Koordinator's ``QoSNone``) unless the
pod has a bound cpuset in ``scheduling.koordinator.sh/resource-status`` (then it counts as LSR). Without the
annotation (ratio -1) nothing is written, as Koordinator's disabled rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from apis.extension import LABEL_POD_QOS
from apis.extension.numa import AnnotationError, resource_status_of
from koordlet.qosmanager.plugins.batchresource.policy import milli_cpu_to_quota
from koordlet.statesinformer.pods import PodMeta

NAME = "CPUNormalization"


def normalize(quota: int, ratio: float) -> int:
    """``ceil(quota / ratio)`` for a positive quota and a ratio above 1; else the quota itself."""
    if quota > 0 and ratio > 1.0:
        return math.ceil(quota / ratio)
    return quota


def cpu_share_pod(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """Koordinator's ``isPodCPUShare``: LS, or unlabelled without a bound cpuset."""
    qos = labels.get(LABEL_POD_QOS, "")
    if qos == "":
        try:
            return not resource_status_of(annotations).cpuset
        except AnnotationError:
            return True
    return qos == "LS"


@dataclass(frozen=True, slots=True)
class NormalizedQuotas:
    """The pod's quota (``None``: a container has no CPU limit) and each limited container's, by name."""

    pod: int | None
    containers: Mapping[str, int]


def normalized_quotas(pod: PodMeta, ratio: float) -> NormalizedQuotas | None:
    """The quotas of ``pod`` under ``ratio``; ``None`` when the pod is not normalized (not LS, or no ratio)."""
    if ratio == -1 or not cpu_share_pod(pod.labels, pod.annotations):
        return None
    containers = {
        c.name: normalize(milli_cpu_to_quota(c.limits["cpu"]), ratio)
        for c in pod.containers
        if c.limits.get("cpu", 0) > 0
    }
    limited = pod.containers and all(c.limits.get("cpu", 0) > 0 for c in pod.containers)
    pod_quota = normalize(milli_cpu_to_quota(sum(c.limits["cpu"] for c in pod.containers)), ratio) if limited else None
    return NormalizedQuotas(pod_quota, containers)
