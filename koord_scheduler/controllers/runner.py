"""The colocation controllers (``nodeslo``, ``noderesource``, ``nodemetric``) in koord-scheduler.

Koordinator runs these in koord-manager's slo-controller. Here they share koord-scheduler's informers:
:class:`ColocationControllers` is fed by the same Node, Pod and NodeMetric watches the scheduler reads
(:class:`FanoutSink` hands every event to the scheduler first, then here), plus the NodeSLO kind and the
``slo-controller-config`` ConfigMap (one object, one namespace). It keeps indexes of references to those
parsed objects (pods by node, not copies) and one work set per controller, keyed by node name.

Events only mark nodes dirty. :meth:`ColocationControllers.run`, started once the replica holds the
leader Lease, runs on the hosted controllers' :class:`~.loop.ReconcileLoop`: it decides per node
(:mod:`.decide`, pure) and executes the writes, ``concurrency`` at a time
(:func:`~.workers.run_with_workers`). A node is looked at again without any event when its NodeMetric
turns stale (degrade), after a failed write (per-node timers, which the loop's ``due`` wakes it for),
and at every full resync. A write's effect is applied to the local index at once, so events that arrive
before the watch echoes it do not repeat it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import heapq
import logging
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from apis.configuration import COLOCATION_KEY, SloConfig, default_slo_config, parse_slo_config
from apis.configuration.normalization import CPU_NORMALIZATION_KEY, RESOURCE_AMPLIFICATION_KEY
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, Pod
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.controllers.api import ConfigMapRecord, ControllerApi
from koord_scheduler.controllers.containment import Containment, permanent
from koord_scheduler.controllers.decide import (
    NodeSLORecord,
    Write,
    canonical,
    decide_node_metric,
    decide_node_slo,
)
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.controllers.noderesource import MANAGED_RESOURCES, decide_node_resources, nrt_path
from koord_scheduler.controllers.nrt_batch import TopologyRecord, TopologySource, canonical_zones
from koord_scheduler.controllers.selection import NODEMETRIC, NODERESOURCE, NODERESOURCE_PLUGINS, NODESLO
from koord_scheduler.controllers.workers import run_with_workers
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi.http import ApiError

log = logging.getLogger(__name__)

COLOCATION_CONTROLLERS = (NODESLO, NODERESOURCE, NODEMETRIC)
NODE_RESOURCE_TOPOLOGY = "NodeResourceTopology"
"""Read for the koordlet's ``cpu-basic-info`` annotation and the zones: any :class:`.nrt_batch.TopologySource`
(the scheduler's own NRT record when it watches the kind, else :class:`.nrt_batch.TopologyRecord`)."""
_UNMARSHAL_REASONS = {
    COLOCATION_KEY: "ColocationCfgUnmarshalFailed",
    CPU_NORMALIZATION_KEY: "CPUNormalizationCfgUnmarshalFailed",
    RESOURCE_AMPLIFICATION_KEY: "ResourceAmplificationCfgUnmarshalFailed",
}
"""The Event reason Koordinator gives a refused key (``SLOCfgUnmarshalFailed`` for the others)."""
INTERVAL_SPREAD = 0.2
"""Each node's ``updateTimeThresholdSeconds`` is stretched by up to this fraction (a stable hash of its
name), so the time-gated writes of nodes first written together spread over a minute instead of
arriving in one burst every 5 minutes."""


@dataclass(frozen=True, slots=True)
class ColocationOptions:
    """``enabled``: which of :data:`COLOCATION_CONTROLLERS` run. ``resync_seconds``: every node is
    looked at again this often. ``concurrency``: writes in flight at once. ``noderesource_plugins``: the
    ``noderesource`` calculate plugins that run (``--noderesource-plugins``)."""

    enabled: frozenset[str] = frozenset(COLOCATION_CONTROLLERS)
    noderesource_plugins: frozenset[str] = frozenset(NODERESOURCE_PLUGINS)
    resync_seconds: float = 600.0
    concurrency: int = 8
    retry_seconds: float = 5.0


class ColocationMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.writes = Counter(
            "koord_scheduler_colocation_writes",
            "API writes of the colocation controllers",
            ["controller", "verb", "result"],
            registry=registry,
        )
        self.config_invalid = Counter(
            "koord_scheduler_slo_config_invalid",
            "slo-controller-config keys refused (the last good value is kept)",
            ["key"],
            registry=registry,
        )


class ColocationControllers:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: ControllerApi,
        *,
        options: ColocationOptions | None = None,
        clock: Callable[[], float] = time.time,
        registry: CollectorRegistry | None = None,
        ready: Callable[[], bool] = lambda: True,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        """``object_errors`` hears of a node whose decision or write failed for good (the scheduler's)."""
        self.api = api
        self.contained = Containment("colocation", object_errors)
        self.ready = ready
        """Every kind the controllers read has been listed; nothing is decided before."""
        self.options = options or ColocationOptions()
        self.clock = clock
        self.metrics = ColocationMetrics(registry)
        self.nodes: dict[str, Node] = {}
        self.pods_by_node: dict[str, dict[str, Pod]] = {}
        self.node_metrics: dict[str, NodeMetricRecord] = {}
        self.node_slos: dict[str, NodeSLORecord] = {}
        self.topologies: dict[str, TopologySource] = {}
        """Node name -> its NodeResourceTopology (CPU normalization, NUMA-level batch resources)."""
        self.config: SloConfig = default_slo_config()
        self.last_sync: dict[str, float] = {}
        self.write_counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._dirty: dict[str, set[str]] = {c: set() for c in COLOCATION_CONTROLLERS if c in self.options.enabled}
        self._recheck: dict[tuple[str, str], float] = {}
        """(controller, node) -> when it is looked at again; the heap may hold stale entries."""
        self._timers: list[tuple[float, str, str]] = []
        self._failing: collections.Counter[tuple[str, str, str]] = collections.Counter()
        """(controller, verb, failure kind) -> failures since that controller's last successful write: only
        the first is a warning, so a missing CRD or an unreachable API server is one line, not one per node."""
        self.loop = ReconcileLoop(
            "colocation",
            waiting_for="NodeMetric, NodeSLO and ConfigMap",
            resync_seconds=self.options.resync_seconds,
            clock=clock,
        )
        """Runs the passes (see the module docstring); events wake it."""
        self._extra: list[Write] = []
        """Second writes of this pass's decisions (NodeResourceTopology zones)."""

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        name = (new or old).name  # type: ignore[union-attr]
        if new is None:
            self.nodes.pop(name, None)
            self.last_sync.pop(name, None)
            self._mark(name, COLOCATION_CONTROLLERS)
            return
        self.nodes[name] = new
        meta_changed = old is None or old.labels != new.labels or old.annotations != new.annotations
        self._mark(name, COLOCATION_CONTROLLERS if meta_changed else (NODERESOURCE,))

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        if old is not None and old.node_name and (new is None or new.node_name != old.node_name):
            on_node = self.pods_by_node.get(old.node_name)
            if on_node is not None:
                on_node.pop(old.key, None)
                if not on_node:
                    del self.pods_by_node[old.node_name]
            self._pods_changed(old.node_name)
        if new is not None and new.node_name:
            self.pods_by_node.setdefault(new.node_name, {})[new.key] = new
            self._pods_changed(new.node_name)

    def _pods_changed(self, node: str) -> None:
        """A node's pods changed. Only its batch resources can depend on them, and only through a NodeMetric
        its koordlet has reported: without one (none, or one the ``nodemetric`` controller created that no
        koordlet has filled yet) they are withdrawn whatever the pods, so the node is left alone, and a
        cluster without koordlets binds pods without a decision per bind. The first report marks it."""
        metric = self.node_metrics.get(node)
        if metric is not None and metric.update_time is not None:
            self._mark(node, (NODERESOURCE,))

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind == "NodeMetric":
            name = (new or old).name
            if new is None:
                self.node_metrics.pop(name, None)
                self.last_sync.pop(name, None)
            else:
                self.node_metrics[name] = new
            policy_changed = old is None or new is None or old.collect_policy != new.collect_policy
            self._mark(name, (NODERESOURCE, NODEMETRIC) if policy_changed else (NODERESOURCE,))
        elif kind == "NodeSLO":
            name = (new or old).name
            if new is None:
                self.node_slos.pop(name, None)
            else:
                self.node_slos[name] = new
            self._mark(name, (NODESLO,))
        elif kind == NODE_RESOURCE_TOPOLOGY:
            name = (new or old).name
            have = self.topologies.get(name)
            if isinstance(new, TopologySource):
                self.topologies[name] = new
                changed = have is None or (have.cpu_basic_info, have.zones_json) != (new.cpu_basic_info, new.zones_json)
            else:
                changed = self.topologies.pop(name, None) is not None
            if changed:
                self._mark(name, (NODERESOURCE,))
        elif kind == "ConfigMap":
            self.on_config_map(None if event == EventType.DELETED else new)

    def on_config_map(self, config_map: ConfigMapRecord | None) -> None:
        """A new ConfigMap version (None: deleted, so every key goes back to its default)."""
        config, problems = parse_slo_config(None if config_map is None else config_map.data, self.config)
        for problem in problems:
            log.warning(
                "slo-controller-config: key %s refused, keeping its last good value: %s", problem.key, problem.message
            )
            self.metrics.config_invalid.labels(problem.key).inc()
            if config_map is not None:
                reason = _UNMARSHAL_REASONS.get(problem.key, "SLOCfgUnmarshalFailed")
                self.api.warn_config(config_map, reason=reason, message=str(problem))
        if config.present != self.config.present or config.keys != self.config.keys:
            self.config = config
            self.mark_all()
        else:
            self.config = config

    def mark_all(self) -> None:
        names = set(self.nodes) | set(self.node_slos) | set(self.node_metrics)
        for dirty in self._dirty.values():
            dirty.update(names)
        self.loop.wake()

    def _mark(self, name: str, controllers: Iterable[str]) -> None:
        for controller in controllers:
            dirty = self._dirty.get(controller)
            if dirty is not None:
                dirty.add(name)
        self.loop.wake()

    # ----- the loop -----

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; call only while holding the leader Lease."""
        log.info("colocation controllers running: %s", ", ".join(sorted(self._dirty)) or "none")
        await self.loop.run(stop, ready=self.ready, reconcile=self._pass, pending=self._pending, due=self._next_timer)

    async def _pass(self, full: bool) -> int:
        """One pass of :attr:`loop`: every node when ``full``, the nodes whose timers are due, the dirty ones."""
        if full:
            self.mark_all()
        self._fire_timers(self.clock())
        return await self.reconcile_pending()

    def _pending(self) -> bool:
        return bool(self._extra) or any(self._dirty.values())

    def _next_timer(self) -> float | None:
        return self._timers[0][0] if self._timers else None

    async def reconcile_pending(self) -> int:
        """Decide for every dirty node and run the writes; the number of writes attempted."""
        writes: list[Write] = []
        now = self.clock()
        for controller, dirty in self._dirty.items():
            names = list(dirty)
            dirty.clear()
            for name in names:
                write = self.contained.call("Node", name, functools.partial(self._decide, controller, name, now))
                if write is not None:
                    writes.append(write)
        writes.extend(self._extra)
        self._extra.clear()
        if not writes:
            return 0
        await run_with_workers(writes, self.options.concurrency, self._execute)
        return len(writes)

    def _decide(self, controller: str, name: str, now: float) -> Write | None:
        node = self.nodes.get(name)
        if controller == NODESLO:
            return decide_node_slo(node, name, self.node_slos.get(name), self.config)
        if controller == NODEMETRIC:
            return decide_node_metric(node, name, self.node_metrics.get(name), self.config)
        if node is None:
            return None
        pods = self.pods_by_node.get(name, {}).values()
        decision = decide_node_resources(
            node,
            pods,
            self.node_metrics.get(name),
            self.config,
            now=now,
            last_sync=self.last_sync.get(name),
            interval_spread=INTERVAL_SPREAD * (zlib.crc32(name.encode()) % 1000) / 1000,
            plugins=self.options.noderesource_plugins,
            topology=self.topologies.get(name),
        )
        if decision.recheck_at is not None:
            self._at(decision.recheck_at, NODERESOURCE, name)
        if decision.zone_write is not None:
            self._extra.append(decision.zone_write)
        return decision.write

    def _at(self, when: float, controller: str, name: str) -> None:
        if self._recheck.get((controller, name)) != when:
            self._recheck[(controller, name)] = when
            heapq.heappush(self._timers, (when, controller, name))

    def _fire_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            when, controller, name = heapq.heappop(self._timers)
            if self._recheck.get((controller, name)) == when:
                del self._recheck[(controller, name)]
                self._mark(name, (controller,))

    async def _execute(self, write: Write) -> None:
        try:
            await self.api.send(write)
        except ApiError as err:
            if (write.verb == "DELETE" and err.not_found) or (write.verb == "POST" and err.conflict):
                self._count(write, "ok")
                return
            if permanent(err):  # the request itself is wrong: not retried until the node is marked again
                self._count(write, "error")
                self.contained.report("Node", write.node, err)
                return
            self._failed(write, err)
            return
        except ClusterError as err:
            self._failed(write, err)
            return
        except Exception as err:  # a failure of our own making: reported, not retried in a loop
            self._count(write, "error")
            self.contained.report("Node", write.node, err)
            return
        self._count(write, "ok")
        self._applied(write)

    def _failed(self, write: Write, err: Exception) -> None:
        self._count(write, "error")
        kind = str(err.status) if isinstance(err, ApiError) else type(err).__name__
        key = (write.controller, write.verb, kind)
        self._failing[key] += 1
        if self._failing[key] == 1:
            hint = ""
            if isinstance(err, ApiError) and err.not_found and write.verb == "POST":
                hint = " (the API server does not serve this resource: is its CRD installed?)"
            log.warning(
                "%s: %s %s failed: %s%s; retrying in %.0fs; further %s failures like this one are logged "
                "at debug level until a write of this controller succeeds",
                write.controller,
                write.verb,
                write.path,
                err,
                hint,
                self.options.retry_seconds,
                write.verb,
            )
        else:
            log.debug(
                "%s: %s %s failed: %s; retrying in %.0fs",
                write.controller,
                write.verb,
                write.path,
                err,
                self.options.retry_seconds,
            )
        self._retry_later(write)

    def _retry_later(self, write: Write) -> None:
        self._at(self.clock() + self.options.retry_seconds, write.controller, write.node)

    def _count(self, write: Write, result: str) -> None:
        self.metrics.writes.labels(write.controller, write.verb, result).inc()
        if result == "ok":
            self.write_counts[(write.controller, write.verb)] += 1
            if self._failing:
                for key in [k for k in self._failing if k[0] == write.controller]:
                    del self._failing[key]

    def _applied(self, write: Write) -> None:
        """Reflect a successful write in the local indexes until the watch brings the server's version."""
        name = write.node
        if write.controller == NODERESOURCE and write.path == nrt_path(name):
            have = self.topologies.get(name)
            if have is not None:
                self.topologies[name] = TopologyRecord(
                    have.name, have.cpu_basic_info, canonical_zones(write.body["zones"]), ""
                )
            log.info("noderesource: node %s: %s", name, write.note)
        elif write.controller == NODERESOURCE:
            node = self.nodes.get(name)
            status = write.body.get("status")
            if status is not None:
                self.last_sync[name] = self.clock()
                if node is not None:
                    values: dict[str, str | None] = status["allocatable"]
                    node = dataclasses.replace(
                        node,
                        capacity=_with_resources(node.capacity, values),
                        allocatable=_with_resources(node.allocatable, values),
                    )
            meta = write.body.get("metadata")
            if meta is not None and node is not None:
                annotations = _with_annotations(node.annotations, meta["annotations"])
                node = dataclasses.replace(node, meta=dataclasses.replace(node.meta, annotations=annotations))
            if node is not None:
                self.nodes[name] = node
            log.info("noderesource: node %s: %s", name, write.note)
        elif write.controller == NODESLO:
            if write.verb == "DELETE":
                self.node_slos.pop(name, None)
            else:
                spec = write.body["spec"] if write.verb == "POST" else write.body[0]["value"]
                self.node_slos[name] = NodeSLORecord(name, canonical(spec), spec.get("extensions"))
        elif write.controller == NODEMETRIC:
            if write.verb == "DELETE":
                self.node_metrics.pop(name, None)
            else:
                policy = canonical(write.body["spec"]["metricCollectPolicy"])
                existing = self.node_metrics.get(name) or NodeMetricRecord(name=name)
                self.node_metrics[name] = dataclasses.replace(existing, collect_policy=policy)


def _with_resources(resources: Any, values: dict[str, str | None]) -> FrozenDict[str, int]:
    out = dict(resources)
    for resource in MANAGED_RESOURCES:
        if resource not in values:
            continue
        amount = values[resource]
        if amount is None:
            out.pop(resource, None)
        else:
            out[resource] = int(amount)
    return FrozenDict(out)


def _with_annotations(annotations: Any, changes: dict[str, str | None]) -> FrozenDict[str, str]:
    out = dict(annotations)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return FrozenDict(out)
