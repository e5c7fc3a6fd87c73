"""The :class:`~koord_scheduler.framework.handle.ClusterClient` for a real API server.

Binding posts a raw ``v1.Binding`` to the pods/binding subresource and only checks the status code: the
API server answers with a ``metav1.Status``, not a Binding, which is what breaks the kubernetes client's
response parsing (kubernetes-client/python#547). The pod's UID goes in the Binding's metadata as a
precondition, so a pod deleted and recreated under the same name is never bound by a stale decision;
a pod that is already bound gets ``409 Conflict``, so no pod is ever bound twice. With ``protobuf`` the
Binding goes as ``application/vnd.kubernetes.protobuf`` (:func:`kubeapi.protobody.binding`, the same
fields) and the answer is asked for as protobuf, as kube-scheduler's default ``clientConnection`` does.

Paths come from :mod:`.paths`: a pod or object whose namespace or name is not a Kubernetes name is
refused (:class:`~.paths.InvalidRequestError`, a ``ClusterError``) before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.core.types import Pod
from kubeapi import jsoncodec, protobody
from kubeapi.errors import ClusterError
from kubeapi.events import EventRecorder, Regarding
from kubeapi.http import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiError, ApiHttp
from kubeapi.kinds import ObjectKind
from kubeapi.paths import object_path, pod_path
from kubeapi.protowire import PROTOBUF, PROTOBUF_OR_JSON


def binding_body(pod: Pod, node_name: str) -> bytes:
    """The ``v1.Binding`` JSON for ``pod`` onto ``node_name``; the UID (when known) is a precondition."""
    meta: dict[str, str] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    return jsoncodec.dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
    )


def _preconditions(patch: Mapping[str, Any]) -> dict[str, Any]:
    meta = patch.get("metadata")
    if not isinstance(meta, Mapping):
        return {}
    return {k: meta[k] for k in ("uid", "resourceVersion") if meta.get(k)}


class KubeClusterClient:
    """Writes to the API server on behalf of the scheduler and its plugins. Every method raises
    :class:`~koord_scheduler.framework.errors.ClusterError` on failure."""

    def __init__(
        self,
        http: ApiHttp,
        events: EventRecorder,
        *,
        controller: str = "default-scheduler",
        protobuf: bool = False,
    ) -> None:
        """``protobuf``: send Bindings as protobuf (``clientConnection.contentType``'s default); False: JSON."""
        self.http = http
        self.events = events
        self.controller = controller
        self.protobuf = protobuf
        self.bound = 0

    async def bind(self, pod: Pod, node_name: str) -> None:
        path = pod_path(pod, "binding")  # refuses a bad name before any body is built
        if self.protobuf:
            body = protobody.binding(pod.namespace, pod.name, uid=pod.uid, node_name=node_name)
            await self.http.request("POST", path, body=body, content_type=PROTOBUF, accept=PROTOBUF_OR_JSON)
        else:
            await self.http.request("POST", path, body=binding_body(pod, node_name))
        self.bound += 1

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        meta: dict[str, Any] = {}
        if annotations:
            meta["annotations"] = dict(annotations)
        if labels:
            meta["labels"] = dict(labels)
        if not meta:
            return
        if pod.uid:
            # A merge patch of metadata.uid is a precondition: it fails unless the UID matches.
            meta["uid"] = pod.uid
        await self.http.request("PATCH", pod_path(pod), body={"metadata": meta}, content_type=MERGE_PATCH)

    async def delete_pod(self, pod: Pod, *, reason: str) -> None:
        """Delete ``pod`` (this UID only). A pod that is already gone counts as deleted. When ``reason``
        is given, a Normal ``Preempted`` event carries it, as kube-scheduler's preemption does."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if pod.uid:
            body["preconditions"] = {"uid": pod.uid}
        try:
            await self.http.request("DELETE", pod_path(pod), body=body)
        except ApiError as err:
            if not err.not_found:
                raise
            return
        if reason:
            self.events.record(
                pod,
                event_type="Normal",
                reason="Preempted",
                action="Preempting",
                note=reason,
                controller=self.controller,
            )

    async def set_nominated_node_name(self, pod: Pod, node_name: str) -> None:
        """Merge-patch ``status.nominatedNodeName`` (``""`` clears it); a pod that is gone is fine."""
        body: dict[str, Any] = {"status": {"nominatedNodeName": node_name or None}}
        if pod.uid:
            body["metadata"] = {"uid": pod.uid}
        try:
            await self.http.request("PATCH", pod_path(pod, "status"), body=body, content_type=MERGE_PATCH)
        except ApiError as err:
            if not (err.not_found or err.conflict):
                raise

    async def patch_object_status(
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Patch the status subresource; the updated object, parsed with ``kind.parse``. Core Pods get a
        strategic merge patch (``status.conditions`` merged by type, as kube-scheduler's PatchPodStatus
        does), everything else a JSON merge patch (custom resources support no strategic merge).
        ``metadata.uid`` / ``metadata.resourceVersion`` in ``patch`` are sent as preconditions (a
        mismatch is a 409 Conflict)."""
        body: dict[str, Any] = {"status": patch.get("status", {})}
        preconditions = _preconditions(patch)
        if preconditions:
            body["metadata"] = preconditions
        content_type = STRATEGIC_MERGE_PATCH if kind.kind == "Pod" and not kind.group else MERGE_PATCH
        return await self._patch(kind, object_path(kind, name, namespace, "status"), body, content_type)

    async def patch_object(
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch the object (``status`` is ignored: the main resource does not write it)."""
        body = {k: v for k, v in patch.items() if k != "status"}
        return await self._patch(kind, object_path(kind, name, namespace), body)

    async def _patch(
        self, kind: ObjectKind[Any], path: str, body: Mapping[str, Any], content_type: str = MERGE_PATCH
    ) -> Any:
        raw = await self.http.request_json("PATCH", path, body=dict(body), content_type=content_type)
        try:
            return kind.parse(raw)
        except ValueError as exc:
            raise ClusterError(f"{kind.kind} {path}: the updated object does not parse: {exc}") from None

    async def record_event(
        self,
        kind: ObjectKind[Any] | None,
        name: str,
        *,
        namespace: str = "",
        type: str,
        reason: str,
        message: str,
    ) -> None:
        """Queue an Event about an object (``kind`` None: a Pod). Never blocks on the API server."""
        regarding = (
            Regarding("Pod", "v1", namespace, name)
            if kind is None
            else Regarding(kind.kind, kind.api_version, namespace if kind.namespaced else "", name)
        )
        self.events.record_for(
            regarding, event_type=type, reason=reason, action=reason, note=message, controller=self.controller
        )
