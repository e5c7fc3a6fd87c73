"""The API-server side of the states informer: raw-JSON list+watch, and the NodeMetric status writer.

Watches run in daemon threads (the kubernetes client is blocking) with ``_preload_content=False`` and
raw JSON per line, never the client's model classes. Each resource is list+watched with a field
selector for this node; a 410 Gone or a broken stream re-lists; errors back off and never escape.

A bad object costs that object only. Lists and events are decoded with
:func:`apis.core.boundedjson.decode_document`, so one object nested past orjson's 1,024 levels is
reported by name and skipped while the rest of its list is used; an event whose object cannot be read or
applied (a NodeMetric spec of the wrong type, a pod that does not parse) is reported and skipped, and
the informer keeps what it had (for pods, a list leaves the bad one out). Neither restarts the watch.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from apis.core.boundedjson import UndecodableObject, decode_document
from apis.slo import GROUP, VERSION, NodeMetricStatus
from koordlet.statesinformer.informer import StatesInformer
from koordlet.system.errorlog import FailureLog
from koordlet.system.heap import request_trim

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 60
MAX_BACKOFF_SECONDS = 30.0

ListCall = Callable[..., Any]


def iter_lines(response: Any) -> Iterator[bytes]:
    """Newline-delimited chunks of a streaming urllib3 response."""
    buffer = b""
    for chunk in response.stream(16 * 1024, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


class KubeSource:
    """Feeds a :class:`StatesInformer` from the API server. ``api_client`` is a kubernetes ``ApiClient``."""

    def __init__(
        self, api_client: Any, informer: StatesInformer, *, watch_pods: bool = True,
        on_listed: Callable[[], None] = request_trim,
    ) -> None:
        """``watch_pods=False`` when pods come from elsewhere (the kubelet source). ``on_listed`` runs
        after every list has been applied; by default it asks for the heap to be trimmed
        (:mod:`koordlet.system.heap`), since a list frees a burst of memory."""
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._informer = informer
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._by_name = f"metadata.name={informer.node_name}"
        self._watch_pods = watch_pods
        self._on_listed = on_listed
        self.failure_log = FailureLog(log)

    def start(self) -> None:
        node = self._informer.node_name
        self._by_name = f"metadata.name={node}"
        if self._watch_pods:
            self._spawn("pods", self._list_pods, on_list=self._informer.replace_pods, on_event=self._on_pod_event)
        self._spawn("node", self._list_node, on_list=self._on_node_list, on_event=self._on_node_event)
        self._spawn("nodeslos", self._list_nodeslos, on_list=self._on_slo_list, on_event=self._on_slo_event)
        self._spawn("nodemetrics", self._list_nodemetrics, on_list=self._on_nm_list, on_event=self._on_nm_event)

    def _list_pods(self, **kw: Any) -> Any:
        return self._core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self._informer.node_name}", **kw)

    def _list_node(self, **kw: Any) -> Any:
        return self._core.list_node(field_selector=self._by_name, **kw)

    def _list_nodeslos(self, **kw: Any) -> Any:
        return self._custom.list_cluster_custom_object(GROUP, VERSION, "nodeslos", field_selector=self._by_name, **kw)

    def _list_nodemetrics(self, **kw: Any) -> Any:
        return self._custom.list_cluster_custom_object(
            GROUP, VERSION, "nodemetrics", field_selector=self._by_name, **kw
        )

    def _on_node_list(self, items: list[dict[str, Any]]) -> None:
        if items:
            self._informer.set_node(items[0])

    def _on_node_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind != "DELETED":
            self._informer.set_node(obj)

    def _on_slo_list(self, items: list[dict[str, Any]]) -> None:
        self._informer.set_node_slo(items[0] if items else None)

    def _on_slo_event(self, kind: str, obj: dict[str, Any]) -> None:
        self._informer.set_node_slo(None if kind == "DELETED" else obj)

    def _on_nm_list(self, items: list[dict[str, Any]]) -> None:
        self._informer.set_node_metric(items[0] if items else None)

    def _on_nm_event(self, kind: str, obj: dict[str, Any]) -> None:
        self._informer.set_node_metric(None if kind == "DELETED" else obj)

    def stop(self) -> None:
        self._stop.set()

    def _on_pod_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self._informer.delete_pod(obj.get("metadata", {}).get("uid", ""))
        else:
            self._informer.upsert_pod(obj)

    def _spawn(
        self,
        name: str,
        list_call: ListCall,
        *,
        on_list: Callable[[list[dict[str, Any]]], Any],
        on_event: Callable[[str, dict[str, Any]], Any],
    ) -> None:
        thread = threading.Thread(
            target=self._list_watch,
            args=(name, list_call, on_list, on_event),
            name=f"watch-{name}",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)

    def _list_watch(
        self,
        name: str,
        list_call: ListCall,
        on_list: Callable[[list[dict[str, Any]]], Any],
        on_event: Callable[[str, dict[str, Any]], Any],
    ) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                response = list_call(_preload_content=False)
                data = decode_document(response.data, container="items")
                items = self._usable(name, data.get("items") or [])
                try:
                    on_list(items)
                except Exception as err:  # the node, its NodeSLO or NodeMetric: one object
                    self._informer.reject(items[0] if items else {}, name, err)
                version = data.get("metadata", {}).get("resourceVersion", "")
                self._on_listed()
                backoff = 1.0
                self.failure_log.succeeded(f"list/watch {name}")
                while not self._stop.is_set():
                    stream = list_call(
                        watch=True,
                        resource_version=version,
                        timeout_seconds=WATCH_TIMEOUT_SECONDS,
                        allow_watch_bookmarks=True,
                        _preload_content=False,
                    )
                    gone = False
                    try:
                        for line in iter_lines(stream):
                            event = decode_document(line, container="object")
                            kind, obj = event.get("type", ""), event.get("object") or {}
                            if kind == "ERROR":
                                gone = True
                                break
                            version = obj.get("metadata", {}).get("resourceVersion", version)
                            if kind != "BOOKMARK":
                                self._apply(name, on_event, kind, obj)
                    finally:
                        stream.release_conn()
                    if gone:
                        break
            except Exception as err:
                status = getattr(err, "status", None)
                # a CRD that is not installed (404) is normal on some clusters: debug only
                level = logging.DEBUG if status == 404 else logging.WARNING
                self.failure_log.failed(f"list/watch {name}", err, level=level)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


    def _usable(self, name: str, items: list[Any]) -> list[dict[str, Any]]:
        """The listed objects that could be decoded; the others are reported."""
        usable = []
        for item in items:
            if isinstance(item, UndecodableObject):
                self._informer.reject(item, name, ValueError(item.error))
            elif isinstance(item, dict):
                usable.append(item)
        return usable

    def _apply(self, name: str, on_event: Callable[[str, dict[str, Any]], Any], kind: str, obj: Any) -> None:
        """One watch event; an object that cannot be decoded or applied is reported and skipped."""
        if isinstance(obj, UndecodableObject):
            self._informer.reject(obj, name, ValueError(obj.error))
            return
        try:
            on_event(kind, obj)
        except Exception as err:
            self._informer.reject(obj, name, err)


class KubeNodeMetricWriter:
    """Writes NodeMetric status via the status subresource; creates the object if missing; retries 409."""

    def __init__(self, api_client: Any, node_name: str, *, attempts: int = 5) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api_client)
        self._exc = client.ApiException
        self.node_name = node_name
        self.attempts = attempts

    def _get(self) -> dict[str, Any] | None:
        try:
            response: Any = self._custom.get_cluster_custom_object(
                GROUP, VERSION, "nodemetrics", self.node_name, _preload_content=False
            )
        except self._exc as err:
            if err.status == 404:
                return None
            raise
        result: dict[str, Any] = json.loads(response.data)
        return result

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
                try:
                    self._custom.create_cluster_custom_object(GROUP, VERSION, "nodemetrics", body)
                except self._exc as err:
                    if err.status != 409:
                        raise
                continue
            current["status"] = wire
            try:
                self._custom.replace_cluster_custom_object_status(
                    GROUP, VERSION, "nodemetrics", self.node_name, current, _preload_content=False
                )
                return
            except self._exc as err:
                if err.status != 409 or attempt == self.attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise RuntimeError(f"NodeMetric {self.node_name}: gave up after {self.attempts} conflicts")
