"""The quota webhook's view of the cluster: every ElasticQuota (watched), and a quota's pods (one LIST).

The quotas are listed once at start and then watched, so a CREATE or UPDATE costs no API call; a request
whose parent quota the watch has not delivered yet (created a moment before) lists them once more. Pods
are asked for only when a check needs them: on a DELETE one LIST with the
``quota.scheduling.koordinator.sh/name`` label selector; when ``is-parent`` turns true, as Koordinator's
``hasQuotaBoundedPods``, one pod by that label, then in the namespace named like the quota, then in each
namespace of its ``namespaces`` annotation (``limit=1`` each, stopping at the first pod found).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apis.core.paths import dns1123_label_problem
from apis.scheduling.elasticquota import (
    GROUP,
    KIND,
    LABEL_QUOTA_NAME,
    PLURAL,
    VERSION,
    QuotaRecord,
    parse_elastic_quota,
)
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.webhook.admission import ClusterLookupError
from kubeapi.http import ApiHttp
from kubeapi.paths import resource_path
from kubeapi.reflector import Reflector, ResourceKind

log = logging.getLogger(__name__)

QUOTAS = ResourceKind(KIND, GROUP, VERSION, PLURAL, parse_elastic_quota)


def by_name(records: Any) -> dict[str, QuotaRecord]:
    """Quotas by name; of two with one name (quota names are cluster-wide) the first namespace wins."""
    out: dict[str, QuotaRecord] = {}
    for record in sorted(records, key=lambda r: (r.name, r.meta.namespace)):
        out.setdefault(record.name, record)
    return out


ADMITTED_SECONDS = 10.0
"""How long a write the webhook allowed counts before the watch delivers it (then the watch's copy
counts); a write the API server did not store after all is forgotten after this long."""


class KubeQuotaLookup:
    """:class:`~koord_scheduler.webhook.quota.QuotaLookup` from a watch cache and LISTs.

    A quota write the webhook allowed is part of :meth:`quotas` at once (:meth:`admitted`), as Koordinator
    adds it to its topology when it allows it, so writes that follow it closely (a tree applied from one
    file: a parent, then its children) are checked against it before the watch delivers it."""

    def __init__(self, http: ApiHttp, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.http = http
        self.clock = clock
        self._quotas: dict[str, QuotaRecord] = {}
        self._admitted: dict[str, tuple[QuotaRecord | None, float]] = {}
        self.reflector = Reflector(http, QUOTAS, self._on_quota)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """List the quotas, then keep watching. A failed list (the CRD not installed yet) is logged and
        retried by the watch loop; requests meanwhile relist."""
        try:
            items, rv = await self.reflector.list_all()
        except ClusterError as exc:
            log.warning("cannot list ElasticQuotas yet (%s); the quota webhook retries in the background", exc)
        else:
            self.reflector.replace(items, rv)
        self._task = asyncio.get_running_loop().create_task(self.reflector.run(), name="webhook-watch-elasticquotas")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _on_quota(self, _event: Any, old: Any, new: Any) -> None:
        for value in (old, new):
            if isinstance(value, QuotaRecord):
                self._admitted.pop(value.name, None)
        self._quotas = by_name(e.value for e in self.reflector.store.values() if isinstance(e.value, QuotaRecord))

    def quotas(self) -> Mapping[str, QuotaRecord]:
        if not self._admitted:
            return self._quotas
        now = self.clock()
        view = dict(self._quotas)
        for name, (record, until) in list(self._admitted.items()):
            if until < now:
                del self._admitted[name]
            elif record is None:
                view.pop(name, None)
            else:
                view[name] = record
        return view

    def admitted(self, name: str, record: QuotaRecord | None) -> None:
        """The webhook allowed writing ``record`` (None: deleting quota ``name``)."""
        self._admitted[name] = (record, self.clock() + ADMITTED_SECONDS)

    async def relist(self) -> Mapping[str, QuotaRecord]:
        try:
            items, _ = await self.reflector.list_all()
        except ClusterError as exc:
            raise ClusterLookupError(f"cannot list ElasticQuotas: {exc}") from None
        records = []
        for obj in items:
            try:
                records.append(parse_elastic_quota(obj))
            except Exception:  # the reflector reports malformed quotas (an undecodable one too)
                continue
        return by_name(records)

    async def pods_of(self, quota: str) -> Sequence[str]:
        params = {"labelSelector": f"{LABEL_QUOTA_NAME}={quota}"}
        try:
            doc = await self.http.request_json("GET", resource_path("", "v1", "pods"), params=params)
        except ClusterError as exc:
            raise ClusterLookupError(f"cannot list the pods of quota {quota}: {exc}") from None
        names = []
        for pod in (doc.get("items") or ()) if isinstance(doc, dict) else ():
            meta = pod.get("metadata") or {}
            names.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        return sorted(names)

    async def has_pods(self, quota: str, namespaces: Sequence[str]) -> bool:
        queries: list[tuple[str, dict[str, str]]] = []
        if len(quota) <= MAX_LABEL_VALUE:
            queries.append((resource_path("", "v1", "pods"), {"labelSelector": f"{LABEL_QUOTA_NAME}={quota}"}))
        for namespace in (quota, *namespaces):
            if not dns1123_label_problem(namespace):  # a quota name may not be a namespace name
                queries.append((resource_path("", "v1", "pods", namespace=namespace), {}))
        for path, params in queries:
            try:
                doc = await self.http.request_json("GET", path, params={**params, "limit": "1"})
            except ClusterError as exc:
                raise ClusterLookupError(f"cannot list the pods of quota {quota}: {exc}") from None
            if isinstance(doc, dict) and doc.get("items"):
                return True
        return False


MAX_LABEL_VALUE = 63
"""A label value's longest length: a longer quota name cannot be on any pod's label."""
