"""ElasticQuota's debug endpoints (Koordinator ``elasticquota/plugin_service.go``, ``core/quota_summary.go``):

- ``GET /apis/v1/plugins/ElasticQuota/quotas/:name[?includePods=true]``: one quota's ``QuotaInfoSummary``,
  or 404 ``{"message": "cannot find quota <name>"}``;
- ``GET /apis/v1/plugins/ElasticQuota/quota/:name``: the same (the path Koordinator's capacity manual tells
  users to ``curl``);
- ``GET /apis/v1/plugins/ElasticQuota/quotas[?tree=<id>][&includePods=true]``: every quota's, by name
  (``koordinator-root-quota`` left out, as Koordinator does); ``tree`` keeps one quota tree.

The numbers are the plugin's own accounting, the same :class:`~.forest.QuotaForest` ``simulate``'s quota
table prints: ``request`` (what pods ask, raised to ``min`` when the quota does not lend), ``childRequest``,
``used``, ``runtime`` (refreshed before answering), ``sharedWeight``; ``self*`` are the quota's own pods'
(0 for a parent quota); ``nonPreemptible*`` count pods labelled ``preemptible: "false"``. Not tracked by
pykoord, so shown as Koordinator shows them when its gates are off: ``allocated`` and ``guaranteed`` empty
(ElasticQuotaGuaranteeUsage), ``autoScaleMin`` equal to ``min``. ``podCache`` keys are ``namespace/name``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from apis.scheduling.elasticquota import ROOT_QUOTA
from koord_scheduler.framework.services import ApiReply, ApiRoute, not_found, ok, query_flag, resource_list
from koord_scheduler.quota.tree import PodEntry, QuotaNode

if TYPE_CHECKING:
    from koord_scheduler.plugins.elasticquota.plugin import ElasticQuota


def _add(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for k, v in amounts.items():
        total[k] = total.get(k, 0) + v


def _leaves(node: QuotaNode) -> list[QuotaNode]:
    out, todo = [], [node]
    while todo:
        current = todo.pop()
        if current.children:
            todo.extend(current.children)
        else:
            out.append(current)
    return out


def quota_summary(plugin: ElasticQuota, name: str, *, include_pods: bool) -> dict[str, Any]:
    """Koordinator's ``QuotaInfoSummary`` for quota ``name`` (which must exist); the runtime is refreshed
    first."""
    forest = plugin.tree
    node = forest.node(name)
    runtime = forest.runtime(name)
    own = forest.pods_of(name)
    subtree: list[tuple[str, PodEntry]] = []
    for leaf in _leaves(node):
        subtree.extend(own if leaf is node else forest.pods_of(leaf.name))
    self_request: dict[str, int] = {}
    self_used: dict[str, int] = {}
    self_np_request: dict[str, int] = {}
    self_np_used: dict[str, int] = {}
    for _, entry in own if not node.children else ():
        _add(self_request, entry.request)
        if entry.assigned:
            _add(self_used, entry.request)
        if entry.non_preemptible:
            _add(self_np_request, entry.request)
            if entry.assigned:
                _add(self_np_used, entry.request)
    np_request: dict[str, int] = {}
    for _, entry in subtree:
        if entry.non_preemptible:
            _add(np_request, entry.request)
    keys = set(node.max) | set(node.min)

    def masked(amounts: Mapping[str, int]) -> dict[str, str]:
        return resource_list({k: v for k, v in amounts.items() if k in keys or not keys})

    summary: dict[str, Any] = {
        "name": name,
        "parentName": node.parent.name if node.parent is not None else "",
        "isParent": node.is_parent,
        "runtimeVersion": forest.version,
        "allowLentResource": node.allow_lent,
        "tree": forest.tree_id(name),
        "max": resource_list(node.max),
        "min": resource_list(node.min),
        "autoScaleMin": resource_list(node.min),
        "used": masked(node.used),
        "nonPreemptibleUsed": masked(node.non_preemptible_used),
        "request": masked(node.request),
        "nonPreemptibleRequest": masked(np_request),
        "sharedWeight": resource_list(node.weight or node.max),
        "runtime": masked(runtime),
        "childRequest": masked(node.child_request),
        "allocated": {},
        "guaranteed": {},
        "selfUsed": masked(self_used),
        "selfNonPreemptibleUsed": masked(self_np_used),
        "selfRequest": masked(self_request),
        "selfNonPreemptibleRequest": masked(self_np_request),
    }
    if include_pods and own:
        summary["podCache"] = {
            key: {"isAssigned": entry.assigned, "resource": resource_list(entry.request)} for key, entry in sorted(own)
        }
    return summary


def routes(plugin: ElasticQuota) -> Sequence[ApiRoute]:
    def quota(params: Mapping[str, str], query: Mapping[str, str]) -> ApiReply:
        name = params["name"]
        if not plugin.tree.has(name):
            return not_found(f"cannot find quota {name}")
        plugin.refresh_total()
        return ok(quota_summary(plugin, name, include_pods=query_flag(query, "includePods")))

    def quotas(_: Mapping[str, str], query: Mapping[str, str]) -> ApiReply:
        plugin.refresh_total()
        tree = query.get("tree") or None  # "" (the default tree's id) lists every tree, as Koordinator
        include_pods = query_flag(query, "includePods")
        names = sorted(
            n for n in plugin.tree.nodes if n != ROOT_QUOTA and (tree is None or plugin.tree.tree_id(n) == tree)
        )
        return ok({n: quota_summary(plugin, n, include_pods=include_pods) for n in names})

    return (
        ApiRoute("/quotas/:name", quota),
        ApiRoute("/quotas", quotas),
        ApiRoute("/quota/:name", quota),
    )
