"""The API-server side of the states informer: kubeapi's reflectors for this node, and the NodeMetric writer.

:class:`KubeSource` list+watches the node's pods, the Node, its NodeSLO and its NodeMetric (each with a
field selector for this node) with :class:`kubeapi.reflector.Reflector` s, as tasks on one
:class:`~.apiloop.ApiLoop` thread: resuming from the last resourceVersion, re-listing on 410 Gone with a
diff against what was seen, backing off on outages, trimming the heap after lists, all as the scheduler's
informers do. Pod events are applied to the informer in batches (all the events of one read of the
stream, or one list, at once), so a list of the node's pods notifies the informer's callbacks once.

A bad object costs that object only. One the informer refuses (a NodeMetric spec of the wrong type, a pod
that does not parse) is reported through :meth:`StatesInformer.reject` and the informer keeps what it had;
one that cannot even be decoded (nested past orjson's 1,024 levels) is reported the same way and treated
as absent, as everywhere kubeapi reads (an earlier version of that pod is dropped). Neither restarts the
watch.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from apis.core.paths import api_path
from apis.slo import GROUP, VERSION, NodeMetricStatus
from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.statesinformer.informer import StatesInformer
from kubeapi.heap import request_trim
from kubeapi.http import ApiError, ApiHttp
from kubeapi.kinds import EventType
from kubeapi.reflector import Reflector, ReflectorOptions, Rejection, ResourceKind

log = logging.getLogger(__name__)

Json = dict[str, Any]


def _raw(obj: Json) -> Json:
    return obj


class PodBatch:
    """Pod events gathered and applied to the informer at once (:meth:`flush`), latest event per uid."""

    def __init__(self, informer: StatesInformer) -> None:
        self.informer = informer
        self.changes: dict[str, Json | None] = {}
        self.flushes = 0

    def on_event(self, event: EventType, old: Any, new: Any) -> None:
        obj = new if new is not None else old
        uid = str(((obj or {}).get("metadata") or {}).get("uid", ""))
        if uid:
            self.changes[uid] = None if event == EventType.DELETED else new

    def flush(self, *, listed: bool = False) -> None:
        """Apply what was gathered (``listed``: a list was applied, so the pods are synced even when none
        changed)."""
        if self.changes or listed:
            changes, self.changes = self.changes, {}
            self.flushes += 1
            self.informer.apply_pod_changes(changes, kind="pods", synced=listed)


class KubeSource:
    """Feeds a :class:`StatesInformer` from the API server through ``api`` (see the module docstring)."""

    def __init__(
        self,
        api: ApiLoop | None,
        informer: StatesInformer,
        *,
        watch_pods: bool = True,
        on_listed: Callable[[], None] = request_trim,
        options: ReflectorOptions | None = None,
    ) -> None:
        """``watch_pods=False`` when pods come from elsewhere (the kubelet source). ``on_listed`` runs
        after every list has been applied; by default it asks for the heap to be trimmed
        (:mod:`kubeapi.heap`), since a list frees a burst of memory."""
        self._api = api
        self._informer = informer
        self._watch_pods = watch_pods
        self._on_listed = on_listed
        self._options = options
        self.pods = PodBatch(informer)
        self.reflectors: list[Reflector] = []

    def reflectors_for(self, http: ApiHttp) -> list[Reflector]:
        """The reflectors this source runs, on ``http``."""
        node = self._informer.node_name
        by_name = f"metadata.name={node}"
        out: list[Reflector] = []
        if self._watch_pods:
            pods = ResourceKind("Pod", "", "v1", "pods", _raw, field_selector=f"spec.nodeName={node}")
            out.append(self._reflector(http, pods, self._on_pod, lambda: self.pods.flush(listed=True)))
        kinds: list[tuple[ResourceKind[Json], Callable[[EventType, Any, Any], None]]] = [
            (ResourceKind("Node", "", "v1", "nodes", _raw, field_selector=by_name), self._on_node),
            (ResourceKind("NodeSLO", GROUP, VERSION, "nodeslos", _raw, field_selector=by_name), self._on_slo),
            (ResourceKind("NodeMetric", GROUP, VERSION, "nodemetrics", _raw, field_selector=by_name), self._on_metric),
        ]
        for kind, handler in kinds:
            out.append(self._reflector(http, kind, handler, self._listed_one(kind.kind)))
        return out

    def _reflector(
        self,
        http: ApiHttp,
        kind: ResourceKind[Json],
        handler: Callable[[EventType, Any, Any], None],
        after_list: Callable[[], None],
    ) -> Reflector:
        def listed() -> None:
            after_list()
            self._on_listed()

        return Reflector(http, kind, handler, options=self._options, on_invalid=self._rejected, on_listed=listed)

    def start(self) -> None:
        if self._api is None:
            raise RuntimeError("KubeSource without an ApiLoop cannot start")
        api = self._api
        api.start()
        self.reflectors = self.reflectors_for(api.http)
        for reflector in self.reflectors:
            api.spawn(reflector.run, name=f"watch-{reflector.kind.plural}")

    def stop(self) -> None:
        if self._api is not None:
            self._api.stop()

    # ----- handlers (on the loop's thread) -----

    def _on_pod(self, event: EventType, old: Any, new: Any) -> None:
        self.pods.on_event(event, old, new)
        asyncio.get_running_loop().call_soon(self.pods.flush)  # the rest of this read of the stream first

    def _contained(self, kind: str, obj: Any, apply: Callable[[], None]) -> None:
        try:
            apply()
        except Exception as err:  # the informer keeps what it had
            self._informer.reject(obj, kind, err)

    def _on_node(self, event: EventType, old: Any, new: Any) -> None:
        if new is not None and event != EventType.DELETED:
            self._contained("node", new, lambda: self._informer.set_node(new))

    def _on_slo(self, event: EventType, old: Any, new: Any) -> None:
        value = None if event == EventType.DELETED else new
        self._contained("nodeslos", new or old, lambda: self._informer.set_node_slo(value))

    def _on_metric(self, event: EventType, old: Any, new: Any) -> None:
        value = None if event == EventType.DELETED else new
        self._contained("nodemetrics", new or old, lambda: self._informer.set_node_metric(value))

    def _listed_one(self, kind: str) -> Callable[[], None]:
        """After a list of a one-object kind: an empty list means there is none (NodeSLO, NodeMetric)."""

        def listed() -> None:
            reflector = next((r for r in self.reflectors if r.kind.kind == kind), None)
            if reflector is None or reflector.store:
                return
            if kind == "NodeSLO":
                self._contained("nodeslos", {}, lambda: self._informer.set_node_slo(None))
            elif kind == "NodeMetric":
                self._contained("nodemetrics", {}, lambda: self._informer.set_node_metric(None))

        return listed

    def _rejected(self, rejection: Rejection) -> None:
        self._informer.reject(rejection.obj, rejection.kind.plural, ValueError(rejection.message))


class KubeNodeMetricWriter:
    """Writes NodeMetric status via the status subresource; creates the object if missing; retries 409.
    Called from a worker thread: each request runs on ``api``'s loop."""

    def __init__(
        self, api: ApiLoop, node_name: str, *, attempts: int = 5, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._api = api
        self.node_name = node_name
        self.attempts = attempts
        self._sleep = sleep

    def _path(self, subresource: str = "") -> str:
        return api_path(GROUP, VERSION, "nodemetrics", name=self.node_name, subresource=subresource)

    def _get(self) -> Json | None:
        async def get(http: ApiHttp) -> Json | None:
            try:
                found: Json = await http.request_json("GET", self._path())
            except ApiError as err:
                if err.not_found:
                    return None
                raise
            return found

        return self._api.call(get)

    def write_status(self, status: NodeMetricStatus) -> None:
        wire = status.to_wire()
        for attempt in range(self.attempts):
            current = self._get()
            if current is None:
                body = {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "NodeMetric",
                    "metadata": {"name": self.node_name},
                    "spec": {},
                }
                self._api.call(functools.partial(_create, path=api_path(GROUP, VERSION, "nodemetrics"), body=body))
                continue
            current["status"] = wire
            try:
                self._api.call(functools.partial(_put, path=self._path("status"), body=current))
                return
            except ApiError as err:
                if not err.conflict or attempt == self.attempts - 1:
                    raise
                self._sleep(0.05 * (attempt + 1))
        raise RuntimeError(f"NodeMetric {self.node_name}: gave up after {self.attempts} conflicts")


async def _put(http: ApiHttp, *, path: str, body: Mapping[str, Any]) -> None:
    await http.request("PUT", path, body=dict(body))


async def _create(http: ApiHttp, *, path: str, body: Mapping[str, Any]) -> None:
    """POST ``body``; one that exists already is fine."""
    try:
        await http.request("POST", path, body=dict(body))
    except ApiError as err:
        if not err.conflict:
            raise
