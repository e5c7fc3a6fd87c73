"""The ``quotaprofile`` controller: each ElasticQuotaProfile kept as the root ElasticQuota of its node pool,
on the leader only.

Models Koordinator v1.8 ``pkg/quota-controller/profile`` (on by default in koord-manager, no gate). For
a profile ``p`` in namespace ``ns`` (:func:`decide_quota`, pure):

- its tree id is its ``quota.scheduling.koordinator.sh/tree-id`` label; a profile without one gets the
  decimal FNV-1a 64 hash of ``"<ns>/<p>"`` written into that label;
- the nodes its ``nodeSelector`` selects are summed: every resource of their ``status.allocatable``
  (``total``), and that of the nodes that are unschedulable or not Ready (``unschedulable``); both are
  multiplied by ``resourceRatio`` when it is a number in (0, 1] (cpu in millicores, others in units,
  truncated as Koordinator's ``MultiplyQuantity``);
- the ElasticQuota ``spec.quotaName`` in ``ns`` gets ``min`` = ``total`` of each resource of the profile's
  ``quota.scheduling.koordinator.sh/resource-keys`` annotation (default cpu and memory; 0 when no node
  has it) and ``max`` = ``MaxInt64/2000`` of each; the labels ``profile`` (the profile's name), ``tree-id``,
  ``is-root: "true"`` and the profile's ``quotaLabels`` (other labels are kept); the annotations
  ``total-resource`` and ``unschedulable-resource`` (JSON ResourceLists). It is created when missing,
  else patched where it differs; nothing is sent when nothing differs.

Koordinator re-reads a profile every 10 s and on a change of its generation; here a profile is looked at
again when it changes, when a node changes, when its quota changes, and every :data:`RESYNC_SECONDS`, so
a node that joins a pool raises the pool's quota at once. A write that fails is retried after
``retry_seconds`` and reported as a Warning Event ``CreateQuotaFailed`` / ``UpdateQuotaFailed`` on the
profile, as Koordinator's. A write the API server refuses for good (400, 413, 422: see
:mod:`~koord_scheduler.controllers.containment`) gets the same Event once and is not sent
again until it would change; a profile whose decision or write raises anything else is reported to
``ObjectErrors`` and skipped until it changes, the other profiles going on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from apis.colocation import canonical_quantity, format_decimal
from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_resource_list
from apis.core.paths import api_path
from apis.core.selectors import label_selector_matches
from apis.core.types import CPU, Node, Pod
from apis.quota import API_VERSION as PROFILE_API_VERSION
from apis.quota import GROUP as PROFILE_GROUP
from apis.quota import KIND as PROFILE_KIND
from apis.quota import PLURAL as PROFILE_PLURAL
from apis.quota import VERSION as PROFILE_VERSION
from apis.quota import QuotaProfileRecord
from apis.scheduling import elasticquota as eq
from koord_scheduler.controllers.containment import Containment, permanent
from koord_scheduler.controllers.decide import MERGE_PATCH, Write
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi.events import EventRecorder, Regarding
from kubeapi.http import ApiHttp

log = logging.getLogger(__name__)

QUOTAPROFILE = "quotaprofile"
LABEL_PROFILE = eq.PREFIX + "profile"
ANNOTATION_UNSCHEDULABLE_RESOURCE = eq.PREFIX + "unschedulable-resource"
DEFAULT_RESOURCE_KEYS = ("cpu", "memory")
MAX_QUOTA = (2**63 - 1) // 2000
"""Koordinator's ``math.MaxInt64/2000``: the max of every resource of a profile's quota, in units."""
RESYNC_SECONDS = 10.0
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_GO_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def fnv1a_64(text: str) -> int:
    """Go's ``hash/fnv`` New64a over the UTF-8 bytes of ``text``."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value ^= byte
        value = (value * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def tree_id_of(profile: QuotaProfileRecord) -> str:
    """The profile's tree id: its label, else the hash of ``namespace/name`` (Koordinator's ``hash``)."""
    return profile.meta.labels.get(eq.LABEL_TREE_ID) or str(fnv1a_64(f"{profile.namespace}/{profile.name}"))


def resource_ratio(text: str | None) -> float:
    """``resourceRatio`` when it parses as a number in (0, 1]; 1 otherwise (absent, malformed, out of range)."""
    if text is None or not _GO_FLOAT.fullmatch(text):
        return 1.0
    value = float(text)
    return value if 0 < value <= 1.0 else 1.0


def multiply(resource: str, amount: int, ratio: float) -> int:
    """Koordinator's ``MultiplyQuantity``: cpu on millicores, everything else on units, truncated."""
    return int(float(amount) * ratio)


def pool_resources(profile: QuotaProfileRecord, nodes: Iterable[Node]) -> tuple[dict[str, int], dict[str, int]]:
    """(total, unschedulable) allocatable of the nodes ``profile`` selects, the ratio applied."""
    total: dict[str, int] = {}
    unschedulable: dict[str, int] = {}
    for node in nodes:
        if not label_selector_matches(profile.node_selector, node.labels):
            continue
        out = node.unschedulable or node.conditions.get("Ready") != "True"
        for name, amount in node.allocatable.items():
            total[name] = total.get(name, 0) + amount
            if out:
                unschedulable[name] = unschedulable.get(name, 0) + amount
    ratio = resource_ratio(profile.resource_ratio)
    if ratio != 1.0:
        total = {k: multiply(k, v, ratio) for k, v in total.items()}
        unschedulable = {k: multiply(k, v, ratio) for k, v in unschedulable.items()}
    return total, unschedulable


def quantity_text(resource: str, amount: int) -> str:
    """An amount as Go writes the Quantity Koordinator computes: cpu as DecimalSI of millicores, byte
    resources in the largest binary unit that divides them (DecimalSI under 1Ki), the rest DecimalSI."""
    if resource == CPU:
        return format_decimal(amount * 1_000_000)
    if (resource in _BYTE_RESOURCES or resource.startswith("hugepages-")) and amount >= 1024 and amount % 1024 == 0:
        return canonical_quantity(f"{amount // 1024}Ki")
    return format_decimal(amount * 1_000_000_000)


def resource_list_json(resources: Mapping[str, int]) -> str:
    """``json.Marshal`` of the ResourceList: keys sorted, canonical quantities."""
    return json.dumps({k: quantity_text(k, v) for k, v in sorted(resources.items())}, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class WantedQuota:
    """What the profile's quota should hold."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    min: Mapping[str, int]
    max: Mapping[str, int]


def wanted_quota(profile: QuotaProfileRecord, nodes: Iterable[Node]) -> WantedQuota:
    total, unschedulable = pool_resources(profile, nodes)
    keys = profile.resource_keys if profile.resource_keys is not None else DEFAULT_RESOURCE_KEYS
    min_ = {key: total.get(key, 0) for key in keys}
    max_ = {key: MAX_QUOTA * (1000 if key == CPU else 1) for key in keys}
    labels = {
        LABEL_PROFILE: profile.name,
        **profile.quota_labels,
        eq.LABEL_TREE_ID: tree_id_of(profile),
        eq.LABEL_IS_ROOT: "true",
    }
    annotations = {
        eq.ANNOTATION_TOTAL_RESOURCE: resource_list_json(total),
        ANNOTATION_UNSCHEDULABLE_RESOURCE: resource_list_json(unschedulable),
    }
    return WantedQuota(labels, annotations, min_, max_)


def _wire(resources: Mapping[str, int]) -> dict[str, str]:
    return {k: quantity_text(k, v) for k, v in sorted(resources.items())}


def decide_quota(profile: QuotaProfileRecord, nodes: Iterable[Node], current: eq.QuotaRecord | None) -> list[Write]:
    """The writes that bring the profile's quota (``current``, None when missing) to what it should be."""
    want = wanted_quota(profile, nodes)
    namespace, name = profile.namespace, profile.quota_name
    if current is None:
        body = {
            "apiVersion": eq.API_VERSION,
            "kind": eq.KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(want.labels),
                "annotations": dict(want.annotations),
            },
            "spec": {"min": _wire(want.min), "max": _wire(want.max)},
        }
        path = api_path(eq.GROUP, eq.VERSION, eq.PLURAL, namespace=namespace)
        return [
            Write(
                QUOTAPROFILE,
                f"{namespace}/{profile.name}",
                "POST",
                path,
                body,
                note=f"created quota {name}: min {_wire(want.min)}",
            )
        ]
    patch: dict[str, Any] = {}
    labels = {k: v for k, v in want.labels.items() if current.meta.labels.get(k) != v}
    annotations = {k: v for k, v in want.annotations.items() if current.meta.annotations.get(k) != v}
    if labels or annotations:
        patch["metadata"] = {
            **({"labels": labels} if labels else {}),
            **({"annotations": annotations} if annotations else {}),
        }
    spec: dict[str, Any] = {}
    for field, wanted, have in (("min", want.min, current.min), ("max", want.max, current.max)):
        if dict(have) != dict(wanted):
            # A merge patch merges maps: a resource the quota should no longer name is set to null.
            spec[field] = {**dict.fromkeys(have), **_wire(wanted)}
    if spec:
        patch["spec"] = spec
    if not patch:
        return []
    path = api_path(eq.GROUP, eq.VERSION, eq.PLURAL, namespace=namespace, name=name)
    changed = ", ".join(
        [*(f"spec.{f}" for f in spec), *(f"label {k}" for k in labels), *(f"annotation {k}" for k in annotations)]
    )
    return [
        Write(
            QUOTAPROFILE,
            f"{namespace}/{profile.name}",
            "PATCH",
            path,
            patch,
            MERGE_PATCH,
            f"updated quota {name}: {changed}",
        )
    ]


def decide_tree_id(profile: QuotaProfileRecord) -> list[Write]:
    """The profile's own tree-id label, written once when it has none (as Koordinator does)."""
    if profile.meta.labels.get(eq.LABEL_TREE_ID):
        return []
    path = api_path(PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL, namespace=profile.namespace, name=profile.name)
    body = {"metadata": {"labels": {eq.LABEL_TREE_ID: tree_id_of(profile)}}}
    return [
        Write(
            QUOTAPROFILE,
            f"{profile.namespace}/{profile.name}",
            "PATCH",
            path,
            body,
            MERGE_PATCH,
            f"tree id {tree_id_of(profile)}",
        )
    ]


class QuotaProfileApi(Protocol):
    async def send(self, write: Write) -> None:
        """Perform ``write``; raises ``ClusterError`` on failure."""
        ...

    def warn(self, profile: QuotaProfileRecord, *, reason: str, message: str) -> None:
        """A Warning Event on the profile (never blocks)."""
        ...


class KubeQuotaProfileApi:
    """Writes through its own :class:`ApiHttp`, Events through the scheduler's recorder."""

    def __init__(self, http: ApiHttp, events: EventRecorder) -> None:
        self.http = http
        self.events = events

    async def send(self, write: Write) -> None:
        await self.http.request(write.verb, write.path, body=write.body, content_type=write.content_type)

    def warn(self, profile: QuotaProfileRecord, *, reason: str, message: str) -> None:
        regarding = Regarding(PROFILE_KIND, PROFILE_API_VERSION, profile.namespace, profile.name, profile.meta.uid)
        self.events.record_for(
            regarding,
            event_type="Warning",
            reason=reason,
            action="Reconcile",
            note=message,
            controller="koord-scheduler/quotaprofile",
        )


class QuotaProfileController:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: QuotaProfileApi,
        *,
        ready: Callable[[], bool] = lambda: True,
        retry_seconds: float = 2.0,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self.api = api
        self.contained = Containment(QUOTAPROFILE, object_errors)
        self.refused: dict[tuple[str, str], bytes] = {}
        """(profile key, path) -> the body the API server refused for good: not sent again while it is the same."""
        self.ready = ready
        """Profiles, nodes and quotas have been listed; nothing is decided before."""
        self.retry_seconds = retry_seconds
        self.nodes: dict[str, Node] = {}
        self.profiles: dict[str, QuotaProfileRecord] = {}
        self.quotas: dict[tuple[str, str], eq.QuotaRecord] = {}
        self.dirty: set[str] = set()
        self.writes = 0
        self.loop = ReconcileLoop(
            QUOTAPROFILE, waiting_for="ElasticQuotaProfiles and ElasticQuotas", resync_seconds=RESYNC_SECONDS
        )

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if new is None:
            if old is not None:
                self.nodes.pop(old.name, None)
            self._mark(*self.profiles)
            return
        before = self.nodes.get(new.name)
        self.nodes[new.name] = new
        if before is None or _pool_view(before) != _pool_view(new):  # not every status heartbeat
            self._mark(*self.profiles)

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        return None

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind == PROFILE_KIND:
            record: QuotaProfileRecord = new if new is not None else old
            key = f"{record.namespace}/{record.name}"
            if event == EventType.DELETED or new is None:
                self.profiles.pop(key, None)
                self.refused = {k: v for k, v in self.refused.items() if k[0] != key}
            else:
                self.profiles[key] = record
                self._mark(key)
        elif kind == eq.KIND:
            quota: eq.QuotaRecord = new if new is not None else old
            at = (quota.meta.namespace, quota.name)
            if event == EventType.DELETED or new is None:
                self.quotas.pop(at, None)
            else:
                self.quotas[at] = quota
            self._mark(*(k for k, p in self.profiles.items() if (p.namespace, p.quota_name) == at))

    def _mark(self, *keys: str) -> None:
        if keys:
            self.dirty.update(keys)
            self.loop.wake()

    # ----- reconcile -----

    def decisions(self) -> list[Write]:
        """The writes for every dirty profile (in order); clears the dirty set."""
        keys, self.dirty = self.dirty, set()
        writes: list[Write] = []
        nodes = list(self.nodes.values())
        for key in sorted(keys):
            profile = self.profiles.get(key)
            if profile is None:
                continue
            decided = self.contained.call(PROFILE_KIND, key, functools.partial(self._decide, profile, nodes))
            for write in decided or ():
                if self.refused.get((write.node, write.path)) != _body(write):
                    writes.append(write)
        return writes

    def _decide(self, profile: QuotaProfileRecord, nodes: list[Node]) -> list[Write]:
        current = self.quotas.get((profile.namespace, profile.quota_name))
        return [*decide_tree_id(profile), *decide_quota(profile, nodes, current)]

    async def reconcile(self) -> int:
        """Send every write; the number that succeeded. A failed one is tried again later."""
        written = 0
        for write in self.decisions():
            try:
                await self.api.send(write)
            except Exception as exc:
                self._failed(write, exc)
                continue
            self.refused.pop((write.node, write.path), None)
            self.contained.clear(PROFILE_KIND, write.node)
            log.info("quotaprofile %s: %s", write.node, write.note)
            self._applied(write)
            written += 1
            self.writes += 1
        return written

    def _failed(self, write: Write, exc: Exception) -> None:
        """A failed write: an outage or conflict is retried after ``retry_seconds``; one refused for good,
        or a failure of our own, is not sent again until it would change."""
        cluster = isinstance(exc, ClusterError)
        if cluster:
            profile = self.profiles.get(write.node)
            reason = "CreateQuotaFailed" if write.verb == "POST" else "UpdateQuotaFailed"
            message = f"failed to {'create' if write.verb == 'POST' else 'update'} quota, err: {exc}"
            if profile is not None and write.path.startswith(f"/apis/{eq.GROUP}/"):
                self.api.warn(profile, reason=reason, message=message)
            if not permanent(exc):
                log.warning("quotaprofile %s: %s; retrying in %.0fs", write.node, message, self.retry_seconds)
                asyncio.get_running_loop().call_later(self.retry_seconds, self._mark, write.node)
                return
        self.refused[(write.node, write.path)] = _body(write)
        self.contained.report(PROFILE_KIND, write.node, exc)

    def _applied(self, write: Write) -> None:
        """Reflect a successful write locally, so a resync before the watch echoes it does not repeat it."""
        profile = self.profiles.get(write.node)
        if profile is None:
            return
        if write.path.startswith(f"/apis/{PROFILE_GROUP}/"):
            labels = FrozenDict({**profile.meta.labels, **write.body["metadata"]["labels"]})
            self.profiles[write.node] = dataclasses.replace(
                profile, meta=dataclasses.replace(profile.meta, labels=labels)
            )
            return
        at = (profile.namespace, profile.quota_name)
        if write.verb == "POST":
            self.quotas[at] = eq.parse_elastic_quota(write.body)
            return
        current = self.quotas.get(at)
        if current is None:
            return
        meta_patch = write.body.get("metadata", {})
        meta = dataclasses.replace(
            current.meta,
            labels=FrozenDict({**current.meta.labels, **meta_patch.get("labels", {})}),
            annotations=FrozenDict({**current.meta.annotations, **meta_patch.get("annotations", {})}),
        )
        spec = write.body.get("spec", {})
        self.quotas[at] = dataclasses.replace(
            current,
            meta=meta,
            min=_amounts(spec["min"]) if "min" in spec else current.min,
            max=_amounts(spec["max"]) if "max" in spec else current.max,
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; call only while holding the leader Lease. On the hosted
        controllers' :class:`~koord_scheduler.controllers.loop.ReconcileLoop`: nothing before ``ready()``,
        every profile at the first pass and every :data:`RESYNC_SECONDS`, the dirty ones as soon as an
        event marks them."""
        await self.loop.run(stop, ready=self.ready, reconcile=self._pass, pending=lambda: bool(self.dirty))

    async def _pass(self, full: bool) -> int:
        if full:
            self._mark(*self.profiles)
        return await self.reconcile() if self.dirty else 0


def _body(write: Write) -> bytes:
    return json.dumps(write.body, sort_keys=True).encode()


def _pool_view(node: Node) -> tuple[object, ...]:
    """What a node contributes to a pool: a change of anything else (a heartbeat) changes no quota."""
    return (node.labels, node.allocatable, node.unschedulable, node.conditions.get("Ready"))


def _amounts(wire: Mapping[str, str | None]) -> FrozenDict[str, int]:
    return parse_resource_list({k: v for k, v in wire.items() if v is not None})
