"""Which quota a pod belongs to (Koordinator pkg/scheduler/plugins/elasticquota/plugin_helper.go)."""

from __future__ import annotations

from collections.abc import Mapping

from apis.core.types import Pod
from apis.scheduling.elasticquota import DEFAULT_QUOTA, LABEL_PREEMPTIBLE, LABEL_QUOTA_NAME, QuotaRecord


def namespace_index(quotas: Mapping[str, QuotaRecord]) -> dict[str, str]:
    """Namespace -> the first quota (by name) whose ``namespaces`` annotation binds it."""
    index: dict[str, str] = {}
    for name in sorted(quotas):
        for namespace in quotas[name].namespaces:
            index.setdefault(namespace, name)
    return index


def quota_name_for(pod: Pod, quotas: Mapping[str, QuotaRecord], by_namespace: Mapping[str, str]) -> str:
    """The pod's quota: its ``quota.scheduling.koordinator.sh/name`` label; else a quota named like its
    namespace in that namespace; else a quota whose ``namespaces`` annotation lists the namespace; else the
    default quota. A name that is not a valid leaf quota also means the default quota (a parent quota
    cannot hold pods)."""
    name = pod.meta.labels.get(LABEL_QUOTA_NAME, "")
    namespace = pod.meta.namespace
    if not name:
        same = quotas.get(namespace)
        if same is not None and same.meta.namespace == namespace:
            name = namespace
        else:
            name = by_namespace.get(namespace, DEFAULT_QUOTA)
    record = quotas.get(name)
    if record is None or record.is_parent:
        return DEFAULT_QUOTA
    return name


def is_preemptible(pod: Pod) -> bool:
    return pod.meta.labels.get(LABEL_PREEMPTIBLE) != "false"
