"""LoadAwareScheduling's debug endpoint (Koordinator ``loadaware/service.go``):

``GET /apis/v1/plugins/LoadAwareScheduling/node/:nodeName``: the node's ``NodeAssignInfoData``, the pods
assigned to it (oldest first) and, when it has a NodeMetric, the sums Filter and Score add to the reported
usage: ``nodeDelta`` (what the pods not yet fully reported add), ``prodUsage``, ``prodDelta``,
``nodeEstimated`` (their full estimates) over the plugin's resources, and the pods behind each. A node the
plugin knows nothing about answers ``{}`` (200), as Koordinator's does.

``simulate``'s node-load table prints the same numbers: its ``estimated`` column is the NodeMetric's usage
plus ``nodeDelta``. Each pod is shown by ``metadata.name`` / ``namespace`` only (Koordinator embeds the whole
Pod object, which the scheduler does not keep); ``timestamp`` is when the pod was assigned (Go's zero time
when unknown: found on the node at start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from koord_scheduler.framework.services import ApiReply, ApiRoute, go_time, ok, resource_list
from koord_scheduler.plugins.loadaware.assign_cache import NodeLoad

if TYPE_CHECKING:
    from koord_scheduler.plugins.loadaware.plugin import LoadAwareScheduling


def node_assign_info(load: NodeLoad | None, resources: Sequence[str]) -> dict[str, Any]:
    """Koordinator's ``NodeAssignInfoData`` for one node (``{}`` for none)."""
    if load is None or (not load.pods and load.metric is None):
        return {}
    pods = sorted(load.pods.values(), key=lambda p: (p.timestamp if p.timestamp is not None else float("-inf"), p.key))
    out: dict[str, Any] = {
        "pods": [{"timestamp": go_time(p.timestamp), "pod": {"metadata": _meta(p.key)}} for p in pods]
    }
    if load.metric is None:
        return out

    def vector(values: Sequence[int]) -> dict[str, str]:
        return resource_list(dict(zip(resources, values, strict=True)))

    out["prodUsage"] = vector(load.prod_usage)
    out["nodeDelta"] = vector(load.node_delta)
    out["prodDelta"] = vector(load.prod_delta)
    out["nodeEstimated"] = vector(load.node_estimated)
    contributions = load._contributions  # same package: the per-pod split behind the sums
    delta_pods = sorted(load.delta_pods)
    prod_delta_pods = sorted(
        k
        for k, p in load.pods.items()
        if (k in contributions and contributions[k].prod_delta is not None) or (k not in contributions and p.prod)
    )
    for field_name, keys in (
        ("nodeDeltaPods", delta_pods),
        ("prodDeltaPods", prod_delta_pods),
        ("nodeEstimatedPods", sorted(load.pods)),
    ):
        if keys:  # omitempty
            out[field_name] = keys
    return out


def _meta(key: str) -> dict[str, str]:
    namespace, _, name = key.rpartition("/")
    return {"name": name, "namespace": namespace}


def routes(plugin: LoadAwareScheduling) -> Sequence[ApiRoute]:
    def node(params: Mapping[str, str], _: Mapping[str, str]) -> ApiReply:
        return ok(node_assign_info(plugin.cache.get(params["nodeName"]), plugin.resources))

    return (ApiRoute("/node/:nodeName", node),)
