"""The webhook's view of the cluster: ClusterColocationProfiles, Namespaces and PriorityClasses.

Each kind is listed once at start and then watched (:class:`~kubeapi.reflector.Reflector`),
so an admission request costs no API call. A namespace or PriorityClass missing from the cache (created
a moment ago) is fetched with one GET. A profile that cannot be used (:func:`~apis.colocation.resolve_profile`
refuses it) gets a Warning Event ``InvalidClusterColocationProfile`` when it is seen, and is left out;
a matched profile skipped during admission (PriorityClass not found, bad patch) gets one too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.colocation import API_VERSION, GROUP, KIND, VERSION, ResolvedProfile, resolve_profile
from apis.colocation.profile import ProfileError
from apis.core.paths import InvalidNameError, check_namespace
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.scheduler.source import EventType
from koord_scheduler.webhook.admission import ClusterLookupError
from koord_scheduler.webhook.mutation import PriorityClassInfo, ProfileSkip
from kubeapi.events import EventRecorder, Regarding
from kubeapi.http import ApiError, ApiHttp
from kubeapi.paths import InvalidRequestError, resource_path
from kubeapi.reflector import Reflector, ResourceKind

log = logging.getLogger(__name__)

Json = dict[str, Any]
CONTROLLER = "koord-scheduler/colocation-webhook"


@dataclass(frozen=True, slots=True)
class InvalidProfile:
    name: str
    uid: str
    message: str


def parse_profile(obj: Json) -> ResolvedProfile | InvalidProfile:
    try:
        return resolve_profile(obj)
    except ProfileError as exc:
        meta = obj.get("metadata") or {}
        return InvalidProfile(str(meta.get("name", "")), str(meta.get("uid", "")), str(exc))


def parse_priority_class(obj: Json) -> PriorityClassInfo:
    value = obj.get("value")
    if not isinstance(value, int):
        raise ValueError("PriorityClass: value: expected an integer")
    policy = obj.get("preemptionPolicy")
    return PriorityClassInfo(
        str((obj.get("metadata") or {}).get("name", "")), value, str(policy) if policy is not None else None
    )


def parse_namespace_labels(obj: Json) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict):
        raise ValueError("Namespace: metadata.labels: expected an object")
    return {str(k): str(v) for k, v in labels.items()}


PROFILES = ResourceKind(KIND, GROUP, VERSION, "clustercolocationprofiles", parse_profile)
NAMESPACES = ResourceKind("Namespace", "", "v1", "namespaces", parse_namespace_labels)
PRIORITY_CLASSES = ResourceKind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", parse_priority_class)


def _cluster_object_path(group: str, resource: str, name: str, *, namespace_name: bool = False) -> str:
    """The path of a cluster-scoped object; a name that is not a Kubernetes name (a DNS-1123 label for a
    Namespace) raises ``ClusterLookupError`` and nothing is asked."""
    try:
        if namespace_name:
            check_namespace(name)
        return resource_path(group, "v1", resource, name=name)
    except (InvalidNameError, InvalidRequestError) as exc:
        raise ClusterLookupError(str(exc)) from None


class KubeColocationLookup:
    """:class:`~koord_scheduler.webhook.admission.ColocationLookup` from watch caches."""

    def __init__(self, http: ApiHttp, recorder: EventRecorder | None = None) -> None:
        self.http = http
        self.recorder = recorder
        self._profiles: list[ResolvedProfile] = []
        self.profiles_reflector = Reflector(http, PROFILES, self._on_profile)
        self.namespaces = Reflector(http, NAMESPACES, lambda *_: None)
        self.priority_classes = Reflector(http, PRIORITY_CLASSES, lambda *_: None)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """List every kind (so the first admission sees them all), then keep watching.

        A kind that cannot be listed (the CRD not installed yet, say) is logged and listed again by its
        watch loop, with backoff; the server still starts, and admits pods unchanged meanwhile."""
        reflectors = (self.profiles_reflector, self.namespaces, self.priority_classes)
        for reflector in reflectors:
            try:
                items, rv = await reflector.list_all()
            except ClusterError as exc:
                log.warning(
                    "cannot list %s yet (%s); the webhook retries in the background", reflector.kind.plural, exc
                )
                continue
            reflector.replace(items, rv)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(r.run(), name=f"webhook-watch-{r.kind.plural}") for r in reflectors]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def _on_profile(self, event: EventType, _old: Any, new: Any) -> None:
        if isinstance(new, InvalidProfile):
            log.warning("%s", new.message)
            self._event(new.name, new.uid, "InvalidClusterColocationProfile", new.message)
        if event is EventType.DELETED or isinstance(new, InvalidProfile | ResolvedProfile):
            self._profiles = [
                v for v in (e.value for e in self.profiles_reflector.store.values()) if isinstance(v, ResolvedProfile)
            ]

    def profiles(self) -> Sequence[ResolvedProfile]:
        return self._profiles

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        cached = self.namespaces.get(name)
        if cached is not None:
            return dict(cached)
        obj = await self._get(_cluster_object_path("", "namespaces", name, namespace_name=True))
        return None if obj is None else parse_namespace_labels(obj)

    async def priority_class(self, name: str) -> PriorityClassInfo | None:
        cached = self.priority_classes.get(name)
        if isinstance(cached, PriorityClassInfo):
            return cached
        obj = await self._get(_cluster_object_path("scheduling.k8s.io", "priorityclasses", name))
        try:
            return None if obj is None else parse_priority_class(obj)
        except ValueError as exc:
            raise ClusterLookupError(str(exc)) from None

    async def _get(self, path: str) -> Json | None:
        try:
            obj = await self.http.request_json("GET", path)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise ClusterLookupError(str(exc)) from None
        except ClusterError as exc:
            raise ClusterLookupError(str(exc)) from None
        return obj if isinstance(obj, dict) else None

    def profile_skipped(self, skip: ProfileSkip) -> None:
        uid = next((p.uid for p in self._profiles if p.name == skip.profile), "")
        self._event(skip.profile, uid, skip.reason, f"skipped while mutating a pod: {skip.message}")

    def _event(self, name: str, uid: str, reason: str, note: str) -> None:
        if self.recorder is None:
            return
        self.recorder.record_for(
            Regarding(KIND, API_VERSION, "", name, uid),
            event_type="Warning",
            reason=reason,
            action="Mutate",
            note=note,
            controller=CONTROLLER,
        )
