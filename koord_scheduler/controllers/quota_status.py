"""The ``elasticquota`` controller: every ElasticQuota's ``status.used`` and the scheduler-written
annotations (``runtime``, ``request``, ``child-request``) kept true, as Koordinator's elasticquota
controller does (pkg/scheduler/plugins/elasticquota/controller.go).

It shares koord-scheduler's Node and Pod informers and adds the ElasticQuota kind. It keeps its own
:class:`~koord_scheduler.quota.forest.QuotaForest` (the same pure accounting the plugin uses),
charging bound pods to used and every live pod to request, so it also runs with scheduling off. Invalid
quotas (see :func:`~koord_scheduler.quota.validation.validate_tree`) are left alone.

The built-in quotas (root, system and default) are created in ``quotaGroupNamespace`` when no object of
that name exists there, as Koordinator's plugin does at start (pkg/scheduler/plugins/elasticquota,
``createRootQuotaIfNotPresent`` and its two siblings): the root as a parent that does not lend, the
system and default quotas with ``systemQuotaGroupMax`` / ``defaultQuotaGroupMax`` as max. Here the
leader creates them once its ElasticQuota list is in; Koordinator does it on every replica.

With ``monitorAllQuotas`` (and ``enableRuntimeQuota``) it also runs Koordinator's over-use revoke
controller: every ``revokePodInterval``, a quota whose used has stayed above its runtime for longer than
``delayEvictTime`` has pods evicted through the Eviction API (:mod:`~koord_scheduler.quota.revoke`
says which).

Events only update the state; :meth:`QuotaStatusController.run`, started once the replica holds the leader
Lease, recomputes every ``interval`` seconds and sends one JSON merge patch per quota whose values changed. It
runs on the hosted controllers' :class:`~koord_scheduler.controllers.loop.ReconcileLoop` (nothing before the
ElasticQuotas are listed, a failing pass logged and counted) but is not woken by events: a pass is a
whole-cluster one (the used of a quota is the sum over its subtree, and the tree's total the sum over every
node), so it runs once per ``interval`` rather than after every pod event. A write's values are remembered
until the next version of the object arrives, so the same values are not sent again before the watch echoes
them, and are sent again if someone overwrites them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from apis.config.elasticquota_args import ElasticQuotaArgs
from apis.core.paths import api_path
from apis.core.types import Node, Pod
from apis.scheduling.elasticquota import (
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
    API_VERSION,
    DEFAULT_QUOTA,
    GROUP,
    KIND,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    PLURAL,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    VERSION,
    QuotaRecord,
    resources_to_wire,
)
from koord_scheduler.controllers.api import ControllerApi
from koord_scheduler.controllers.containment import Containment
from koord_scheduler.controllers.decide import Write
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.controllers.selection import ELASTICQUOTA
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.quota.forest import QuotaForest
from koord_scheduler.quota.mapping import is_preemptible, namespace_index, quota_name_for
from koord_scheduler.quota.revoke import Assigned, OverUseMonitor, pods_to_revoke
from koord_scheduler.quota.tree import PodEntry
from koord_scheduler.quota.validation import validate_tree
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi.http import ApiError

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


def quota_path(namespace: str, name: str) -> str:
    return api_path(GROUP, VERSION, PLURAL, namespace=namespace, name=name)


def builtin_quota(name: str, args: ElasticQuotaArgs) -> dict[str, Any]:
    """The object created for a missing built-in quota (root, system or default) in the args' namespace."""
    meta: dict[str, Any] = {"name": name, "namespace": args.quota_group_namespace, "annotations": {}}
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta}
    if name == ROOT_QUOTA:
        meta["labels"] = {LABEL_IS_PARENT: "true", LABEL_ALLOW_LENT_RESOURCE: "false", LABEL_PARENT: ""}
        body["spec"] = {}
    else:
        which = "system" if name == SYSTEM_QUOTA else "default"
        body["spec"] = {"max": resources_to_wire(args.builtin_max(which))}
    return body


def desired_status(tree: QuotaForest, record: QuotaRecord) -> dict[str, Any]:
    """The annotations and ``status.used`` the quota should show (resources of its max, JSON as
    Koordinator writes them: ``{"cpu":"40m","memory":"40Mi"}``)."""
    node = tree.node(record.name)
    keys = list(record.max)
    runtime = tree.runtime(record.name)

    def pick(values: Mapping[str, int]) -> dict[str, int]:
        return {k: values.get(k, 0) for k in keys if values.get(k, 0)}

    annotations = {
        ANNOTATION_RUNTIME: _json(resources_to_wire(pick(runtime))),
        ANNOTATION_REQUEST: _json(resources_to_wire(pick(node.request))),
        ANNOTATION_CHILD_REQUEST: _json(resources_to_wire(pick(node.child_request))),
    }
    used = {k: v for k, v in resources_to_wire({k: node.used.get(k, 0) for k in keys}).items()}
    return {"metadata": {"annotations": annotations}, "status": {"used": used}}


def current_status(record: QuotaRecord) -> dict[str, Any]:
    used = resources_to_wire({k: record.used.get(k, 0) for k in record.max})
    annotations = {
        k: record.annotations_written.get(k, "")
        for k in (ANNOTATION_RUNTIME, ANNOTATION_REQUEST, ANNOTATION_CHILD_REQUEST)
    }
    return {"metadata": {"annotations": annotations}, "status": {"used": used}}


def eviction_path(pod: Pod) -> str:
    return api_path("", "v1", "pods", namespace=pod.meta.namespace, name=pod.meta.name, subresource="eviction")


def eviction(pod: Pod) -> dict[str, Any]:
    """A ``policy/v1`` Eviction of the pod (Koordinator's ``EvictPod``)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.meta.name, "namespace": pod.meta.namespace},
    }


def _json(value: Mapping[str, str]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class QuotaStatusController:
    """See the module docstring. Event methods run on the event-loop thread."""

    def __init__(
        self,
        api: ControllerApi,
        *,
        args: ElasticQuotaArgs | None = None,
        interval: float = 1.0,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self.api = api
        self.contained = Containment(ELASTICQUOTA, object_errors)
        self.args = args or ElasticQuotaArgs()
        self.interval = interval
        self.ready = ready
        self.tree = QuotaForest(
            scale_min=self.args.enable_min_quota_scale,
            builtin_max={
                DEFAULT_QUOTA: self.args.builtin_max("default"),
                SYSTEM_QUOTA: self.args.builtin_max("system"),
            },
        )
        self.objects: dict[str, QuotaRecord] = {}
        self.quotas: dict[str, QuotaRecord] = {}
        self._by_namespace: dict[str, str] = {}
        self.pods: dict[str, Pod] = {}
        self.allocatable: dict[str, Mapping[str, int]] = {}
        self.written: dict[str, dict[str, Any]] = {}
        self.write_count = 0
        self.clock = clock
        self.revoking = self.args.monitor_all_quotas and self.args.enable_runtime_quota
        self.monitors: dict[str, OverUseMonitor] = {}
        self.evictions = 0
        self._next_revoke = 0.0
        self.builtins_present: set[str] = set()
        """Built-in quotas known to exist in ``quotaGroupNamespace`` (seen, created, or found on create)."""
        self.loop = ReconcileLoop(ELASTICQUOTA, waiting_for="ElasticQuotas", idle_seconds=interval)
        """Never woken: a pass every ``interval`` (see the module docstring)."""

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if new is None:
            if old is not None:
                self.allocatable.pop(old.name, None)
        else:
            self.allocatable[new.name] = new.allocatable

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        if new is None or new.is_terminal:
            pod = new or old
            if pod is not None:
                self.pods.pop(pod.key, None)
                self.tree.remove_pod(pod.key)
        else:
            self.pods[new.key] = new
            self._charge(new)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind != KIND:
            return
        record = new if new is not None else old
        key = f"{record.meta.namespace}/{record.name}"
        before = self.objects.get(key)
        # Any newer version of the object says what it shows now: compare with that from here on.
        self.written.pop(key, None)
        if event == EventType.DELETED:
            self.objects.pop(key, None)
        else:
            self.objects[key] = new
        if before is not None and new is not None and before.tree_key() == new.tree_key():
            if self.quotas.get(new.name) is before:
                self.quotas[new.name] = new
            return
        valid, _ = validate_tree(self.objects.values())
        if {n: r.tree_key() for n, r in valid.items()} != {n: r.tree_key() for n, r in self.quotas.items()}:
            self.quotas = valid
            self._by_namespace = namespace_index(valid)
            self.tree.set_quotas(r for r in valid.values() if r.name != ROOT_QUOTA)
            for pod in self.pods.values():
                self._charge(pod)
        else:
            self.quotas = valid

    def _charge(self, pod: Pod) -> None:
        quota = quota_name_for(pod, self.quotas, self._by_namespace)
        entry = PodEntry(quota, pod.requests, bool(pod.node_name), not is_preemptible(pod))
        self.tree.upsert_pod(pod.key, entry)

    # ----- decisions -----

    def missing_builtins(self) -> list[Write]:
        """A create for each built-in quota with no object of its name in ``quotaGroupNamespace``."""
        namespace = self.args.quota_group_namespace
        writes: list[Write] = []
        for name in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA):
            key = f"{namespace}/{name}"
            if key in self.objects:
                self.builtins_present.add(name)
            if name in self.builtins_present:
                continue
            path = api_path(GROUP, VERSION, PLURAL, namespace=namespace)
            writes.append(Write(ELASTICQUOTA, key, "POST", path, builtin_quota(name, self.args), note="built-in"))
        return writes

    def decide(self) -> list[Write]:
        """The missing built-in quotas, then one merge patch per valid quota whose shown values differ
        from the wanted ones."""
        writes = self.missing_builtins()
        total: dict[str, int] = {}
        for allocatable in self.allocatable.values():
            for k, v in allocatable.items():
                total[k] = total.get(k, 0) + v
        self.tree.set_total(total)
        for key, record in sorted(self.objects.items()):
            if self.quotas.get(record.name) is not record or record.name == ROOT_QUOTA:
                continue
            if not self.tree.has(record.name) or self.tree.node(record.name).builtin:
                continue
            wanted = self.contained.call(KIND, key, functools.partial(desired_status, self.tree, record))
            if wanted is None or wanted == current_status(record) or wanted == self.written.get(key):
                continue
            path = quota_path(record.meta.namespace, record.name)
            writes.append(Write(ELASTICQUOTA, key, "PATCH", path, wanted, MERGE_PATCH, "status and annotations"))
        return writes

    def decide_revocations(self, now: float) -> list[Write]:
        """Evictions for the quotas whose over-use has lasted longer than ``delayEvictTime``."""
        if not self.revoking:
            return []
        names = [n for n in self.tree.nodes if n not in (ROOT_QUOTA, SYSTEM_QUOTA)]
        for gone in set(self.monitors) - set(names):
            del self.monitors[gone]
        writes: list[Write] = []
        for name in sorted(names):
            node = self.tree.node(name)
            if node.builtin:
                runtime: Mapping[str, int] = node.max
            else:
                full = self.tree.runtime(name)
                runtime = {k: full.get(k, 0) for k in node.max}
            monitor = self.monitors.setdefault(name, OverUseMonitor(now))
            if not monitor.due(node.used, runtime, now, self.args.delay_evict_time):
                continue
            assigned = []
            for key, entry in self.tree.pods_of(name):
                pod = self.pods.get(key)
                if pod is not None and entry.assigned:
                    start = pod.meta.creation_timestamp or 0.0
                    assigned.append(Assigned(key, pod.priority, start, entry.request, entry.non_preemptible))
            for key in pods_to_revoke(node.used, runtime, assigned):
                pod = self.pods[key]
                log.info("elasticquota: evicting %s, quota %s uses more than its runtime", key, name)
                writes.append(Write(ELASTICQUOTA, key, "POST", eviction_path(pod), eviction(pod), note="revoke"))
        return writes

    async def sync(self) -> None:
        writes = self.decide()
        now = self.clock()
        if self.revoking and now >= self._next_revoke:
            self._next_revoke = now + self.args.revoke_pod_interval
            writes += self.decide_revocations(now)
        for write in writes:
            try:
                await self.api.send(write)
            except ApiError as exc:
                if write.note == "built-in":
                    # Tried once, as Koordinator does: AlreadyExists means another replica or a user was first.
                    self.builtins_present.add(write.body["metadata"]["name"])
                    if exc.conflict:
                        continue
                log.warning("elasticquota: %s %s failed: %s", write.verb, write.node, exc)
                continue
            except ClusterError as exc:
                log.warning("elasticquota: %s %s failed: %s", write.verb, write.node, exc)
                continue
            except Exception as exc:  # a failure of our own: that quota only
                self.contained.report(KIND, write.node, exc)
                continue
            if write.note == "built-in":
                self.builtins_present.add(write.body["metadata"]["name"])
                log.info("elasticquota: created built-in quota %s", write.node)
            elif write.note == "revoke":
                self.evictions += 1
            else:
                self.written[write.node] = write.body
            self.write_count += 1

    async def run(self, stop: asyncio.Event) -> None:
        """Keep quotas true until ``stop`` is set (leader only: start after acquiring the Lease)."""
        await self.loop.run(stop, ready=self.ready, reconcile=lambda _full: self.sync(), pending=lambda: False)
