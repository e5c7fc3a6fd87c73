"""Writes the node's ``NodeResourceTopology`` (``topology.node.k8s.io/v1alpha1``, cluster-scoped, named after
the node) through kubeapi, as Koordinator's ``states_noderesourcetopology.go`` does: created when missing,
else updated (a PUT of the object read, carrying its resourceVersion) only when a managed field differs.

The managed fields are the annotations in :data:`~.nodetopology.MANAGED_ANNOTATIONS`, the zones (merged
with what others wrote, :func:`~.nodetopology.merge_zones`) and ``topologyPolicies``; everything else on
the object is kept. A write that loses a race (``409 Conflict``: created or updated by someone else
between the read and the write) raises :class:`~kubeapi.http.ApiError`; the caller retries on its next
tick, from a fresh read. Called from a worker thread: each request runs on the
:class:`~.apiloop.ApiLoop`.
"""

from __future__ import annotations

from typing import Any

from apis.core.paths import api_path
from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.statesinformer.nodetopology import MANAGED_ANNOTATIONS, merge_zones, needs_update
from kubeapi.http import ApiError, ApiHttp

GROUP, VERSION, PLURAL = "topology.node.k8s.io", "v1alpha1", "noderesourcetopologies"

Json = dict[str, Any]


def updated_object(current: Json, desired: Json) -> Json:
    """``current`` with the managed fields of ``desired`` (a new dict; ``current`` is not changed)."""
    out = dict(current)
    meta = dict(out.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    for key in MANAGED_ANNOTATIONS:
        annotations[key] = desired["metadata"]["annotations"][key]
    meta["annotations"] = annotations
    out["metadata"] = meta
    out["zones"] = merge_zones(current.get("zones"), desired["zones"])
    out["topologyPolicies"] = desired["topologyPolicies"]
    return out


class KubeTopologyWriter:
    """See the module docstring. :meth:`write` returns whether a write was made."""

    def __init__(self, api: ApiLoop, node_name: str, *, timeout: float = 60.0) -> None:
        self._api = api
        self.node_name = node_name
        self.timeout = timeout

    def _get(self) -> Json | None:
        path = api_path(GROUP, VERSION, PLURAL, name=self.node_name)

        async def get(http: ApiHttp) -> Json | None:
            try:
                found: Json = await http.request_json("GET", path)
            except ApiError as err:
                if err.not_found:
                    return None
                raise
            return found

        return self._api.call(get, timeout=self.timeout)

    def write(self, desired: Json) -> bool:
        """Create the object from ``desired``, or update its managed fields when they differ. Raises
        :class:`~kubeapi.errors.ClusterError` (a conflict, an outage) or ``TimeoutError``."""
        current = self._get()
        if current is None:
            path = api_path(GROUP, VERSION, PLURAL)
            self._api.call(lambda http: http.request("POST", path, body=desired), timeout=self.timeout)
            return True
        if not needs_update(current, desired):
            return False
        body = updated_object(current, desired)
        path = api_path(GROUP, VERSION, PLURAL, name=self.node_name)
        self._api.call(lambda http: http.request("PUT", path, body=body), timeout=self.timeout)
        return True
