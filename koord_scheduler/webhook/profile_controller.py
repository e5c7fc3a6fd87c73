"""The ``colocationprofile`` controller: ClusterColocationProfiles applied to pods that exist already.

Models Koordinator v1.8 ``pkg/controller/colocationprofile`` (gate ``ColocationProfileController``, Alpha,
off by default: here the controller runs only when ``--controllers`` names it). It lives beside the pod
webhook, whose profile parsing and strategic merge patch it shares. On the leader, for each profile
labelled ``config.koordinator.sh/controller-managed: "true"``, every 30 s and when the profile changes:

1. A profile without ``spec.selector`` selects nothing (the webhook reads it as every pod; Koordinator's
   controller does not). The pods its selector selects that are **Pending and on no node** are listed,
   those whose namespace the ``namespaceSelector`` does not select (a missing namespace included) left out.
2. Per pod: the ``probability`` roll (0 never, 100 always, else skipped when ``roll() > percent``); a pod
   already updated for this version of the profile within :attr:`ControllerOptions.force_update_seconds`
   is left alone; updates are rate limited (:attr:`ControllerOptions.qps`, ``burst``: a pod over the
   limit waits for the next round).
3. The pod gets, in this order, the profile's ``labels``, ``annotations``, ``labelKeysMapping``,
   ``annotationKeysMapping``, ``labelSuffixes``, the ``koordinator.sh/qosClass`` label, the
   ``koordinator.sh/priority`` label and the strategic merge ``patch``; **not** ``schedulerName`` or
   ``priorityClassName`` (a pod's spec cannot change them), and its resources are not renamed. The
   difference is sent as one JSON merge PATCH; nothing is sent when nothing changes.

As in Koordinator, the pod validating webhook refuses to set or change the ``koordinator.sh/qosClass``
and ``koordinator.sh/priority`` labels of an existing pod (they are immutable on update): while it serves,
a round that would change them leaves the pod as it is (a warning per pod) and tries again later; a
profile's other fields go through.

Whatever else one pod's update raises is reported to ``ObjectErrors`` against that pod (counted as
failed, the round going on), and whatever one profile's round raises against that profile; the other
profiles' rounds go on.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apis.colocation import KIND, ResolvedProfile, resolve_profile
from apis.core.selectors import label_selector_matches
from apis.core.types import LabelSelector, Node, Pod
from apis.extension.constants import LABEL_POD_PRIORITY, LABEL_POD_QOS
from koord_scheduler.controllers.containment import Containment
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.controllers.selection import COLOCATIONPROFILE
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors
from koord_scheduler.webhook.strategicmerge import PatchError, strategic_merge_pod
from kubeapi.http import ApiError, ApiHttp
from kubeapi.paths import resource_path

log = logging.getLogger(__name__)

Json = dict[str, Any]
LABEL_CONTROLLER_MANAGED = "config.koordinator.sh/controller-managed"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class ManagedProfile:
    """A profile as the controller reads it: the webhook's view plus what only the controller needs."""

    resolved: ResolvedProfile
    managed: bool
    """Labelled ``config.koordinator.sh/controller-managed: "true"``."""
    resource_version: str
    has_selector: bool
    """``spec.selector`` is present (an absent one selects nothing here)."""
    deleting: bool = False

    @property
    def name(self) -> str:
        return self.resolved.name


def parse_managed_profile(obj: Mapping[str, Any]) -> ManagedProfile:
    """Raises ``ProfileError`` (a ``ValueError``) naming the profile and the field."""
    resolved = resolve_profile(dict(obj))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(labels, Mapping)
    return ManagedProfile(
        resolved=resolved,
        managed=labels.get(LABEL_CONTROLLER_MANAGED) == "true",
        resource_version=str(meta.get("resourceVersion", "")),
        has_selector=resolved.spec.selector is not None,
        deleting=bool(meta.get("deletionTimestamp")),
    )


# ----- the mutation, pure -----


def mutate(pod: Json, profile: ResolvedProfile) -> Json:
    """Koordinator's ``doMutateByColocationProfile`` on a copy of ``pod``. Raises ``PatchError`` when the
    profile's patch does not apply."""
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    labels: dict[str, str] = dict(meta.get("labels") or {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    spec = profile.spec
    labels.update(spec.labels or {})
    annotations.update(spec.annotations or {})
    for old, new in sorted((spec.label_keys_mapping or {}).items()):
        labels[new] = labels.get(old, "")
    for old, new in sorted((spec.annotation_keys_mapping or {}).items()):
        annotations[new] = annotations.get(old, "")
    for key, suffix in sorted((spec.label_suffixes or {}).items()):
        if key in labels:
            labels[key] += suffix
    if spec.qos_class:
        labels[LABEL_POD_QOS] = str(spec.qos_class)
    if spec.koordinator_priority is not None:
        labels[LABEL_POD_PRIORITY] = str(spec.koordinator_priority)
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if spec.patch:
        out = strategic_merge_pod(out, spec.patch)
    return out


def merge_patch(old: Any, new: Any) -> Any:
    """The RFC 7386 JSON merge patch from ``old`` to ``new`` (``None``: no difference)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None if old == new else new
    patch: Json = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            inner = merge_patch(old[key], value)
            patch[key] = value if inner is None else inner
    return patch or None


def selector_string(selector: LabelSelector | None) -> str:
    """A label selector as the API's ``labelSelector`` parameter (``""``: every object)."""
    if selector is None:
        return ""
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for requirement in selector.match_expressions:
        operator = requirement.operator.value
        values = ",".join(requirement.values)
        parts.append(
            {
                "In": f"{requirement.key} in ({values})",
                "NotIn": f"{requirement.key} notin ({values})",
                "Exists": requirement.key,
                "DoesNotExist": f"!{requirement.key}",
            }[operator]
        )
    return ",".join(parts)


# ----- the controller -----


class PodApi(Protocol):
    async def pending_pods(self, label_selector: str) -> Sequence[Json]:
        """Pods on no node whose phase is Pending, matching ``label_selector``. Raises ``ClusterError``."""
        ...

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """None when the namespace does not exist. Raises ``ClusterError``."""
        ...

    async def patch_pod(self, namespace: str, name: str, patch: Json) -> None:
        """A JSON merge PATCH. Raises ``ClusterError``."""
        ...


class KubePodApi:
    def __init__(self, http: ApiHttp) -> None:
        self.http = http

    async def pending_pods(self, label_selector: str) -> Sequence[Json]:
        params = {"fieldSelector": "spec.nodeName=,status.phase=Pending"}
        if label_selector:
            params["labelSelector"] = label_selector
        doc = await self.http.request_json("GET", resource_path("", "v1", "pods"), params=params)
        items = doc.get("items") if isinstance(doc, dict) else None
        return [p for p in items or () if isinstance(p, dict)]

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        try:
            doc = await self.http.request_json("GET", resource_path("", "v1", "namespaces", name=name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        labels = (doc.get("metadata") or {}).get("labels") if isinstance(doc, dict) else None
        return {str(k): str(v) for k, v in (labels or {}).items()}

    async def patch_pod(self, namespace: str, name: str, patch: Json) -> None:
        path = resource_path("", "v1", "pods", namespace=namespace, name=name)
        await self.http.request("PATCH", path, body=patch, content_type=MERGE_PATCH)


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """Koordinator's ``--colocation-profile-*`` flags, with its defaults."""

    reconcile_by_default: bool = False
    """Reconcile profiles without the controller-managed label too."""
    interval_seconds: float = 30.0
    force_update_seconds: float = 300.0
    """A pod updated for a version of a profile is not looked at again for this long."""
    qps: float = 10.0
    burst: int = 100


DEFAULT_OPTIONS = ControllerOptions()


@dataclass(slots=True)
class RoundSummary:
    """Koordinator's ``ReconcileSummary``: what one round of one profile did."""

    desired: int = 0
    succeeded: int = 0
    changed: int = 0
    rate_limited: int = 0
    skipped: int = 0
    cached: int = 0
    failed: int = 0


@dataclass(slots=True)
class _Bucket:
    rate: float
    burst: int
    clock: Callable[[], float]
    tokens: float = field(init=False)
    at: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens, self.at = float(self.burst), self.clock()

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class ColocationProfileController:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: PodApi,
        *,
        options: ControllerOptions = DEFAULT_OPTIONS,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        roll: Callable[[], int] = lambda: random.randrange(100),
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self.api = api
        self.contained = Containment("colocationprofile", object_errors)
        self.options = options
        self.ready = ready
        self.clock = clock
        self.roll = roll
        self.profiles: dict[str, ManagedProfile] = {}
        self.dirty: set[str] = set()
        self.updated: dict[str, float] = {}
        """``<profile resourceVersion>/<pod uid>`` → when (Koordinator's pod update cache)."""
        self.limiter = _Bucket(options.qps, options.burst, clock)
        self.loop = ReconcileLoop(
            COLOCATIONPROFILE,
            waiting_for="ClusterColocationProfiles",
            resync_seconds=options.interval_seconds,
            idle_seconds=options.interval_seconds,
        )

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        return None

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        return None

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind != KIND:
            return
        record: ManagedProfile = new if new is not None else old
        if event == EventType.DELETED or new is None:
            self.profiles.pop(record.name, None)
            return
        self.profiles[record.name] = record
        self.dirty.add(record.name)
        self.loop.wake()

    # ----- reconcile -----

    async def reconcile_profile(self, profile: ManagedProfile) -> RoundSummary:
        """One round for ``profile`` (see the module docstring)."""
        summary = RoundSummary()
        if profile.deleting or not (profile.managed or self.options.reconcile_by_default) or not profile.has_selector:
            return summary
        now = self.clock()
        for key, at in list(self.updated.items()):
            if now - at > self.options.force_update_seconds:
                del self.updated[key]
        pods = await self.api.pending_pods(selector_string(profile.resolved.selector))
        namespaces: dict[str, Mapping[str, str] | None] = {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if (pod.get("spec") or {}).get("nodeName") or phase != "Pending":
                continue  # only pending pods on no node (the LIST asks for them; a stale copy may differ)
            if profile.resolved.namespace_selector is not None:
                if namespace not in namespaces:
                    namespaces[namespace] = await self.api.namespace_labels(namespace)
                labels = namespaces[namespace]
                if labels is None or not label_selector_matches(profile.resolved.namespace_selector, labels):
                    continue
            percent = profile.resolved.percent
            if percent == 0 or (percent != 100 and self.roll() > percent):
                summary.skipped += 1
                continue
            key = f"{profile.resource_version}/{uid}"
            if key in self.updated:
                summary.cached += 1
                continue
            summary.desired += 1
            if not self.limiter.allow():
                summary.rate_limited += 1
                continue
            try:
                patch = merge_patch(pod, mutate(pod, profile.resolved))
                if patch is not None:
                    await self.api.patch_pod(namespace, name, patch)
            except (PatchError, ClusterError) as exc:
                summary.failed += 1
                log.warning("colocationprofile %s: pod %s/%s not updated: %s", profile.name, namespace, name, exc)
                continue
            except Exception as exc:
                summary.failed += 1
                self.contained.report("Pod", f"{namespace}/{name}", exc)
                continue
            self.updated[key] = self.clock()
            summary.succeeded += 1
            summary.changed += patch is not None
        if summary.desired or summary.skipped:
            log.info("colocationprofile %s: %s", profile.name, summary)
        return summary

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; call only while holding the leader Lease. On the hosted
        controllers' :class:`~koord_scheduler.controllers.loop.ReconcileLoop`: nothing before ``ready()``,
        every profile at the first pass and every :attr:`ControllerOptions.interval_seconds`, a changed
        profile as soon as its event arrives."""
        await self.loop.run(stop, ready=self.ready, reconcile=self._pass, pending=lambda: False)

    async def _pass(self, full: bool) -> None:
        """The dirty profiles (all of them when ``full``), each contained: one profile's failure is
        reported against it and the others' rounds go on."""
        if full:
            self.dirty.update(self.profiles)
        for name in sorted(self.dirty):
            self.dirty.discard(name)
            profile = self.profiles.get(name)
            if profile is None:
                continue
            try:
                await self.reconcile_profile(profile)
            except ClusterError as exc:
                log.warning("colocationprofile %s: cannot list its pods: %s", name, exc)
            except Exception as exc:
                self.contained.report(KIND, name, exc)
