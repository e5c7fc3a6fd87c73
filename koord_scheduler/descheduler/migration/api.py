"""How the migration controller reaches the API server: one protocol, the real client and a fake.

Every write to a job carries the ``resourceVersion`` it was decided from (a merge PATCH with
``metadata.resourceVersion`` is refused with 409 Conflict when the object changed meanwhile), so a replica
that lost the lease, or decided from a stale view, never writes over a newer state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from apis.core.paths import api_path
from apis.scheduling.constants import API_VERSION
from apis.scheduling.constants import GROUP as SCHEDULING_GROUP
from apis.scheduling.constants import VERSION as SCHEDULING_VERSION
from apis.scheduling.migration import KIND, PLURAL, PodMigrationJobRecord
from koord_scheduler.descheduler.migration.decide import JobEvent
from kubeapi.events import EventRecorder, Regarding
from kubeapi.http import ApiError, ApiHttp

MERGE_PATCH = "application/merge-patch+json"
REPORTING_CONTROLLER = "koord-descheduler"
EVENT_ACTION = "Migrating"


class MigrationApi(Protocol):
    async def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The pod as the API server serves it; None when it does not exist."""
        ...

    async def create_reservation(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Create the Reservation; the stored object. One that already exists with this name and was
        created for the same job (a retry) is returned as it is."""
        ...

    async def delete_reservation(self, name: str) -> None:
        """Delete it; one already gone is not an error."""
        ...

    async def label_reservation(self, name: str, labels: Mapping[str, str]) -> Mapping[str, Any]: ...

    async def evict(self, namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None) -> None:
        """POST the pod's ``eviction`` subresource (PDBs honoured: 429 when a budget forbids it); a pod
        already gone is not an error."""
        ...

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None
    ) -> None:
        """DELETE the pod (the ``Delete`` evictor: no PDB check), with the job's ``deleteOptions`` and a UID
        precondition; a pod already gone is not an error."""
        ...

    async def annotate_pod(self, namespace: str, name: str, *, uid: str, annotations: Mapping[str, str]) -> None:
        """Merge-PATCH the pod's annotations (the ``SoftEviction`` evictor), conditional on its UID; a pod
        already gone is not an error."""
        ...

    async def patch_job(
        self, job: PodMigrationJobRecord, body: Mapping[str, Any], *, status: bool
    ) -> Mapping[str, Any]:
        """Merge-PATCH the job (its ``/status`` when ``status``), conditional on ``job.resource_version``;
        the stored object."""
        ...

    async def delete_job(self, name: str) -> None: ...

    def event(self, job: PodMigrationJobRecord, event: JobEvent) -> None:
        """Queue an Event about the job (never blocks, never raises)."""
        ...


def _job_path(name: str, *, subresource: str = "") -> str:
    return api_path(SCHEDULING_GROUP, SCHEDULING_VERSION, PLURAL, name=name, subresource=subresource)


def _reservation_path(name: str = "") -> str:
    return api_path(SCHEDULING_GROUP, SCHEDULING_VERSION, "reservations", name=name)


def eviction_body(namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``policy/v1`` Eviction for the pod; the job's ``deleteOptions``, with a UID precondition so that
    a new pod with the same name is never evicted in its place."""
    options = dict(delete_options or {})
    if uid and not options.get("preconditions"):
        options["preconditions"] = {"uid": uid}
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if options:
        body["deleteOptions"] = options
    return body


class KubeMigrationApi:
    """Through its own :class:`ApiHttp` (own token bucket); Events through the scheduler's recorder."""

    def __init__(self, http: ApiHttp, events: EventRecorder | None) -> None:
        self.http = http
        self.events = events

    async def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            pod = await self.http.request_json("GET", api_path("", "v1", "pods", namespace=namespace, name=name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return pod if isinstance(pod, Mapping) else None

    async def create_reservation(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            created = await self.http.request_json("POST", _reservation_path(), body=dict(body))
        except ApiError as exc:
            if exc.status != 409:
                raise
            created = await self.http.request_json("GET", _reservation_path(str(body["metadata"]["name"])))
        assert isinstance(created, Mapping)
        return created

    async def delete_reservation(self, name: str) -> None:
        try:
            await self.http.request("DELETE", _reservation_path(name))
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def label_reservation(self, name: str, labels: Mapping[str, str]) -> Mapping[str, Any]:
        out = await self.http.request_json(
            "PATCH", _reservation_path(name), body={"metadata": {"labels": dict(labels)}}, content_type=MERGE_PATCH
        )
        assert isinstance(out, Mapping)
        return out

    async def evict(self, namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None) -> None:
        path = api_path("", "v1", "pods", namespace=namespace, name=name, subresource="eviction")
        try:
            await self.http.request(
                "POST", path, body=eviction_body(namespace, name, uid=uid, delete_options=delete_options)
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None
    ) -> None:
        body = eviction_body(namespace, name, uid=uid, delete_options=delete_options).get("deleteOptions", {})
        try:
            await self.http.request(
                "DELETE", api_path("", "v1", "pods", namespace=namespace, name=name), body=dict(body) or None
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def annotate_pod(self, namespace: str, name: str, *, uid: str, annotations: Mapping[str, str]) -> None:
        patch: dict[str, Any] = {"metadata": {"annotations": dict(annotations)}}
        if uid:
            patch["metadata"]["uid"] = uid
        try:
            await self.http.request(
                "PATCH",
                api_path("", "v1", "pods", namespace=namespace, name=name),
                body=patch,
                content_type=MERGE_PATCH,
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def patch_job(
        self, job: PodMigrationJobRecord, body: Mapping[str, Any], *, status: bool
    ) -> Mapping[str, Any]:
        patch = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": job.resource_version}}
        out = await self.http.request_json(
            "PATCH", _job_path(job.name, subresource="status" if status else ""), body=patch, content_type=MERGE_PATCH
        )
        assert isinstance(out, Mapping)
        return out

    async def create_job(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        out = await self.http.request_json(
            "POST", api_path(SCHEDULING_GROUP, SCHEDULING_VERSION, PLURAL), body=dict(body)
        )
        assert isinstance(out, Mapping)
        return out

    async def delete_job(self, name: str) -> None:
        try:
            await self.http.request("DELETE", _job_path(name))
        except ApiError as exc:
            if not exc.not_found:
                raise

    def event(self, job: PodMigrationJobRecord, event: JobEvent) -> None:
        if self.events is None:
            return
        regarding = Regarding(KIND, API_VERSION, "", job.name, job.uid, job.resource_version)
        self.events.record_for(
            regarding,
            event_type=event.type,
            reason=event.reason,
            action=EVENT_ACTION,
            note=event.message,
            controller=REPORTING_CONTROLLER,
        )


@dataclass(slots=True)
class MemoryMigrationApi:
    """An in-memory API server for the controller's unit tests: pods, Reservations and jobs as raw objects,
    every call recorded in ``calls``; ``fail`` maps a call name to the exception it raises."""

    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(job, type, reason, message)."""
    fail: dict[str, Exception] = field(default_factory=dict)
    version: int = 1

    def _check(self, call: str, what: str) -> None:
        self.calls.append((call, what))
        error = self.fail.get(call)
        if error is not None:
            raise error

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return obj

    async def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self._check("get_pod", f"{namespace}/{name}")
        return self.pods.get((namespace, name))

    async def create_reservation(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        name = str(body["metadata"]["name"])
        self._check("create_reservation", name)
        if name not in self.reservations:
            created = dict(body)
            created["metadata"] = {**body["metadata"], "uid": f"uid-{name}"}
            self.reservations[name] = self._bump(created)
        return self.reservations[name]

    async def delete_reservation(self, name: str) -> None:
        self._check("delete_reservation", name)
        self.reservations.pop(name, None)

    async def label_reservation(self, name: str, labels: Mapping[str, str]) -> Mapping[str, Any]:
        self._check("label_reservation", name)
        obj = self.reservations[name]
        obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), **labels}
        return self._bump(obj)

    async def evict(self, namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None) -> None:
        self._check("evict", f"{namespace}/{name}")

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str, delete_options: Mapping[str, Any] | None
    ) -> None:
        self._check("delete_pod", f"{namespace}/{name}")
        self.pods.pop((namespace, name), None)

    async def annotate_pod(self, namespace: str, name: str, *, uid: str, annotations: Mapping[str, str]) -> None:
        self._check("annotate_pod", f"{namespace}/{name}")
        pod = self.pods.get((namespace, name))
        if pod is not None:
            meta = pod.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}

    async def patch_job(
        self, job: PodMigrationJobRecord, body: Mapping[str, Any], *, status: bool
    ) -> Mapping[str, Any]:
        self._check("patch_job_status" if status else "patch_job", job.name)
        obj = self.jobs[job.name]
        if obj["metadata"].get("resourceVersion") != job.resource_version:
            raise ApiError(409, "Conflict", "the object has been modified")
        _merge(obj, dict(body))
        return self._bump(obj)

    async def create_job(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        name = str(body["metadata"]["name"])
        self._check("create_job", name)
        created = {
            **body,
            "metadata": {**body["metadata"], "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z"},
        }
        self.jobs[name] = self._bump(created)
        return self.jobs[name]

    async def delete_job(self, name: str) -> None:
        self._check("delete_job", name)
        self.jobs.pop(name, None)

    def event(self, job: PodMigrationJobRecord, event: JobEvent) -> None:
        self.events.append((job.name, event.type, event.reason, event.message))


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif isinstance(value, Mapping):
            target[key] = {}
            _merge(target[key], value)
        else:
            target[key] = value
