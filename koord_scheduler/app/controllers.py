"""Command-line wiring of the cluster controllers koord-scheduler hosts.

Flags::

    --controllers LIST          kube-controller-manager's form: "*" (all on by default; the default), "name",
                                "-name". Names: reservation, nodeslo, noderesource, nodemetric, elasticquota,
                                podgroup, deviceresource, quotaprofile; colocationprofile and migration (off
                                unless named: see .descheduling).
    --scheduling[=BOOL]         schedule pods (default true); false runs only the controllers
    --config-namespace NS       where slo-controller-config lives (default koordinator-system)
    --slo-config-name NAME      its name (default slo-controller-config)
    --noderesource-plugins LIST the noderesource controller's plugins, Koordinator's form: "*" (all; the
                                default), "Name", "-Name". Names: CPUNormalization, ResourceAmplification,
                                MidResource, BatchResource.
    --reservation-controller=false   kept for compatibility: the same as adding -reservation

The ``reservation`` controller reads the scheduler's Node, Pod and Reservation watches (the Reservation
plugin's, or its own with scheduling off). The colocation controllers read the scheduler's own Node, Pod and
NodeMetric watches; they add the NodeSLO kind (when ``nodeslo`` runs), a watch of the one ConfigMap in its
namespace, and the NodeResourceTopology kind for the koordlet's ``cpu-basic-info`` (CPU normalization) and its
zones (NUMA-level batch resources), shared with the NUMA plugin's watch when that runs; optional. The ``elasticquota``
controller reads the same Node and Pod watches plus ElasticQuotas (optional: a cluster without the CRD
still schedules). The ``podgroup`` controller reads the Pod watch and the PodGroup kind (the Coscheduling
plugin's, or its own). The ``deviceresource`` controller reads the Node watch and the Device kind (the
DeviceShare plugin's, or its own; optional, as ElasticQuota's). The ``quotaprofile`` controller reads the
Node watch, ElasticQuotaProfiles and ElasticQuotas (both optional). The ``colocationprofile`` controller
(off unless named) watches ClusterColocationProfiles and lists the pending pods each one selects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from apis import quota as qp
from apis.config import KubeSchedulerConfiguration
from apis.config.args_base import ArgsModel
from apis.config.coscheduling_args import CoschedulingArgs
from apis.config.elasticquota_args import ElasticQuotaArgs
from apis.config.plugin_args import IN_TREE_ARGS, decode_args
from apis.scheduling import elasticquota
from apis.scheduling import podgroup as pg
from apis.scheduling.constants import GROUP as SCHEDULING_GROUP
from apis.scheduling.constants import VERSION as SCHEDULING_VERSION
from apis.scheduling.device import DEVICE_KIND, DEVICE_PLURAL, parse_device
from apis.scheduling.record import parse_reservation
from apis.slo.common import GROUP, VERSION
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.app.controller_flags import ControllerFlags
from koord_scheduler.controllers.api import KubeControllerApi, parse_config_map
from koord_scheduler.controllers.decide import parse_node_slo
from koord_scheduler.controllers.deviceresource import DeviceResourceController
from koord_scheduler.controllers.fanout import ControllerSink
from koord_scheduler.controllers.nrt_batch import parse_topology_record
from koord_scheduler.controllers.podgroup import PodGroupController
from koord_scheduler.controllers.quota_status import QuotaStatusController
from koord_scheduler.controllers.quotaprofile import KubeQuotaProfileApi, QuotaProfileController
from koord_scheduler.controllers.reservation.decide import controller_options
from koord_scheduler.controllers.reservation.informed import KIND as RESERVATION_KIND
from koord_scheduler.controllers.reservation.informed import PLURAL as RESERVATION_PLURAL
from koord_scheduler.controllers.reservation.informed import KubeStatusWriter, ReservationController
from koord_scheduler.controllers.runner import (
    COLOCATION_CONTROLLERS,
    NODE_RESOURCE_TOPOLOGY,
    ColocationControllers,
    ColocationOptions,
)
from koord_scheduler.controllers.selection import (
    BATCH_RESOURCE,
    COLOCATIONPROFILE,
    CPU_NORMALIZATION,
    DEVICERESOURCE,
    ELASTICQUOTA,
    PODGROUP,
    QUOTAPROFILE,
    RESERVATION,
)
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.scheduler.kube_source import KubeClusterSource
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi import ApiHttp, TokenBucket
from kubeapi.leaderelection import LeaderElector
from kubeapi.paths import resource_path
from kubeapi.ratelimit import YieldingBucket

if TYPE_CHECKING:
    from koord_scheduler.webhook.profile_controller import ColocationProfileController

log = logging.getLogger("koord-scheduler")

WRITES_WHILE_BINDING_QPS = 20.0
"""Writes per second all the controllers together make while the scheduler binds (kube-controller-manager's
default ``--kube-api-qps``); at full ``clientConnection`` speed otherwise."""


@dataclass(frozen=True, slots=True)
class ControllerClient:
    """How a controller's own connection pool is rate limited: ``clientConnection``'s ``qps``/``burst``, and,
    when ``busy`` is given (scheduling is on), ``while_busy`` too whenever ``busy()`` says the scheduler has
    requests in flight (:class:`~kubeapi.ratelimit.YieldingBucket`): binds first."""

    qps: float
    burst: int
    busy: Callable[[], bool] | None = None
    while_busy: TokenBucket | None = None

    def bucket(self) -> TokenBucket:
        if self.busy is None or self.while_busy is None:
            return TokenBucket(self.qps, self.burst)
        return YieldingBucket(self.qps, self.burst, busy=self.busy, while_busy=self.while_busy)

    @classmethod
    def yielding_to(cls, qps: float, burst: int, busy: Callable[[], bool]) -> ControllerClient:
        """Every controller built with the result shares one budget while ``busy()``."""
        shared = TokenBucket(WRITES_WHILE_BINDING_QPS, int(WRITES_WHILE_BINDING_QPS))
        return cls(qps, burst, busy=busy, while_busy=shared)


@dataclass(frozen=True, slots=True)
class Colocation:
    controllers: ColocationControllers
    http: ApiHttp
    """The controllers' own connection pool and token bucket (closed at shutdown)."""


def build_colocation(
    flags: ControllerFlags,
    source: KubeClusterSource,
    metrics: SchedulerMetrics,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
) -> Colocation | None:
    """The colocation controllers (None when none of them is enabled), with their watches registered on
    ``source``: call before ``source.start``. ``client`` rate-limits their own connection pool.

    Their kinds are optional on the source (a missing CRD or Role does not hold up scheduling); the
    controllers act only once every kind they read has been listed. NodeMetric stays a required kind
    when a scheduler plugin watches it (``scheduler_kinds``)."""
    enabled = flags.enabled & frozenset(COLOCATION_CONTROLLERS)
    if not enabled:
        return None
    http = ApiHttp(source.connection, client.bucket())
    kinds = ["NodeMetric", "ConfigMap"] + (["NodeSLO"] if "nodeslo" in enabled else [])
    controllers = ColocationControllers(
        KubeControllerApi(http, source.events),
        options=ColocationOptions(enabled=enabled, noderesource_plugins=flags.noderesource_plugins),
        registry=metrics.registry,
        ready=lambda: all(source.listed(kind) for kind in kinds),
        object_errors=metrics.object_errors,
    )
    source.watch_optional_once(
        GROUP, VERSION, "nodemetrics", parse_node_metric, "NodeMetric", scheduler_kinds=scheduler_kinds
    )
    if "nodeslo" in enabled:
        source.watch_kind(GROUP, VERSION, "nodeslos", parse_node_slo, "NodeSLO", optional=True)
    source.watch_kind(
        "",
        "v1",
        "configmaps",
        parse_config_map,
        "ConfigMap",
        namespace=flags.config_namespace,
        field_selector=f"metadata.name={flags.config_name}",
        optional=True,
    )
    if (
        "noderesource" in enabled
        and flags.noderesource_plugins & {CPU_NORMALIZATION, BATCH_RESOURCE}
        and NODE_RESOURCE_TOPOLOGY not in scheduler_kinds
        and not source.watches(NODE_RESOURCE_TOPOLOGY)
    ):  # cpu-basic-info and the zones; the NUMA plugin's own watch serves when it runs
        source.watch_kind(
            "topology.node.k8s.io",
            "v1alpha1",
            "noderesourcetopologies",
            parse_topology_record,
            NODE_RESOURCE_TOPOLOGY,
            optional=True,
        )
    return Colocation(controllers, http)


COSCHEDULING = "Coscheduling"
_Args = TypeVar("_Args", bound=ArgsModel)


def _first_args(config: KubeSchedulerConfiguration, plugin: str, model: type[_Args]) -> _Args:
    """The args of the first profile that configures ``plugin`` (its defaults when none does): the
    controller Koordinator runs beside a plugin reads that plugin's args."""
    for profile in config.profiles:
        raw = next((pc.args for pc in profile.plugin_config if pc.name == plugin), None)
        if raw is not None:
            decoded = decode_args(plugin, raw, IN_TREE_ARGS)
            assert isinstance(decoded, model)
            return decoded
    return model()


@dataclass(frozen=True, slots=True)
class QuotaStatus:
    controller: QuotaStatusController
    http: ApiHttp
    name: str = ELASTICQUOTA


def build_quota_status(
    flags: ControllerFlags,
    source: KubeClusterSource,
    config: KubeSchedulerConfiguration,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
    object_errors: ObjectErrors | None = None,
) -> QuotaStatus | None:
    """The ``elasticquota`` status controller (None when it is off), its ElasticQuota watch registered on
    ``source`` as optional: call before ``source.start``. Its arguments are those of the first profile
    that configures ElasticQuota (else Koordinator's defaults)."""
    if ELASTICQUOTA not in flags.enabled:
        return None
    args = _first_args(config, elasticquota.KIND, ElasticQuotaArgs)
    http = ApiHttp(source.connection, client.bucket())
    controller = QuotaStatusController(
        KubeControllerApi(http, source.events),
        args=args,
        ready=lambda: source.listed(elasticquota.KIND),
        object_errors=object_errors,
    )
    source.watch_optional_once(
        elasticquota.GROUP,
        elasticquota.VERSION,
        elasticquota.PLURAL,
        elasticquota.parse_elastic_quota,
        elasticquota.KIND,
        scheduler_kinds=scheduler_kinds,
    )
    return QuotaStatus(controller, http)


class KubePodGroupApi:
    """PodGroup status writes through the controller's own :class:`ApiHttp`."""

    def __init__(self, http: ApiHttp) -> None:
        self.http = http

    async def patch_pod_group(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        path = resource_path(pg.GROUP, pg.VERSION, pg.PLURAL, namespace=namespace, name=name)
        await self.http.request("PATCH", path, body=dict(body), content_type="application/merge-patch+json")


@dataclass(frozen=True, slots=True)
class PodGroups:
    controller: PodGroupController
    http: ApiHttp
    name: str = PODGROUP


def build_podgroup(
    flags: ControllerFlags,
    source: KubeClusterSource,
    config: KubeSchedulerConfiguration,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
    object_errors: ObjectErrors | None = None,
) -> PodGroups | None:
    """The ``podgroup`` status controller (None when it is off), with the PodGroup watch registered on
    ``source``: call before ``source.start``. It writes with ``controllerWorkers`` of the first profile
    that configures Coscheduling (else Koordinator's default, 1).

    The PodGroup kind is optional on the source whether the controller or the scheduler's Coscheduling
    plugin reads it: without the CRD, annotation gangs still schedule and PodGroup gangs wait (their pods
    say the PodGroup does not exist) until it can be listed."""
    if (PODGROUP in flags.enabled or pg.KIND in scheduler_kinds) and not source.watches(pg.KIND):
        source.watch_kind(pg.GROUP, pg.VERSION, pg.PLURAL, pg.parse_pod_group, pg.KIND, optional=True)
    if PODGROUP not in flags.enabled:
        return None
    args = _first_args(config, COSCHEDULING, CoschedulingArgs)
    http = ApiHttp(source.connection, client.bucket())
    controller = PodGroupController(KubePodGroupApi(http), workers=args.controller_workers, object_errors=object_errors)
    return PodGroups(controller, http)


class HostedController(ControllerSink, Protocol):
    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; called once the replica holds the leader Lease."""
        ...


class Hosted(Protocol):
    """A controller started on the leader with its own connection pool (closed at shutdown)."""

    @property
    def controller(self) -> HostedController: ...

    @property
    def http(self) -> ApiHttp: ...

    @property
    def name(self) -> str:
        """The controller's ``--controllers`` name (its restarts are counted as ``controller-<name>``)."""
        ...


@dataclass(frozen=True, slots=True)
class DeviceResources:
    controller: DeviceResourceController
    http: ApiHttp
    name: str = DEVICERESOURCE


def build_deviceresource(
    flags: ControllerFlags,
    source: KubeClusterSource,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
    object_errors: ObjectErrors | None = None,
) -> DeviceResources | None:
    """The ``deviceresource`` controller (None when it is off), with the Device watch registered on
    ``source`` as optional: call before ``source.start``."""
    if DEVICERESOURCE not in flags.enabled:
        return None
    source.watch_optional_once(
        SCHEDULING_GROUP, SCHEDULING_VERSION, DEVICE_PLURAL, parse_device, DEVICE_KIND, scheduler_kinds=scheduler_kinds
    )
    http = ApiHttp(source.connection, client.bucket())
    controller = DeviceResourceController(
        KubeControllerApi(http, source.events),
        ready=lambda: source.listed(DEVICE_KIND) and source.listed("Node"),
        object_errors=object_errors,
    )
    return DeviceResources(controller, http)


@dataclass(frozen=True, slots=True)
class Reservations:
    controller: ReservationController
    http: ApiHttp
    name: str = RESERVATION


def build_reservation(
    flags: ControllerFlags,
    source: KubeClusterSource,
    config: KubeSchedulerConfiguration,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
    plugin_enabled: bool = True,
    object_errors: ObjectErrors | None = None,
) -> Reservations | None:
    """The ``reservation`` lifecycle controller (None when it is off, or when ``plugin_enabled`` is false:
    scheduling is on and no profile enables the Reservation plugin). It reads the Reservation kind the
    plugin watches; with scheduling off it registers the kind on ``source`` itself, as optional (call
    before ``source.start``). Its options are the Reservation args of the first profile that configures
    them (gcDurationSeconds, gcIntervalSeconds, disableGarbageCollection, controllerWorkers)."""
    if RESERVATION not in flags.enabled or not plugin_enabled:
        return None
    source.watch_optional_once(
        SCHEDULING_GROUP,
        SCHEDULING_VERSION,
        RESERVATION_PLURAL,
        parse_reservation,
        RESERVATION_KIND,
        scheduler_kinds=scheduler_kinds,
    )
    http = ApiHttp(source.connection, client.bucket())
    controller = ReservationController(
        KubeStatusWriter(http),
        options=controller_options(config),
        object_errors=object_errors,
        ready=lambda: all(source.listed(kind) for kind in ("Node", "Pod", RESERVATION_KIND)),
    )
    return Reservations(controller, http)


@dataclass(frozen=True, slots=True)
class QuotaProfiles:
    controller: QuotaProfileController
    http: ApiHttp
    name: str = QUOTAPROFILE


def build_quotaprofile(
    flags: ControllerFlags,
    source: KubeClusterSource,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
    object_errors: ObjectErrors | None = None,
) -> QuotaProfiles | None:
    """The ``quotaprofile`` controller (None when it is off), with the ElasticQuotaProfile watch and (unless
    another reader registered it) the ElasticQuota watch on ``source``, both optional: call before
    ``source.start``. Without the CRDs the scheduler still runs; the controller waits."""
    if QUOTAPROFILE not in flags.enabled:
        return None
    source.watch_kind(qp.GROUP, qp.VERSION, qp.PLURAL, qp.parse_quota_profile, qp.KIND, optional=True)
    source.watch_optional_once(
        elasticquota.GROUP,
        elasticquota.VERSION,
        elasticquota.PLURAL,
        elasticquota.parse_elastic_quota,
        elasticquota.KIND,
        scheduler_kinds=scheduler_kinds,
    )
    http = ApiHttp(source.connection, client.bucket())
    controller = QuotaProfileController(
        KubeQuotaProfileApi(http, source.events),
        ready=lambda: all(source.listed(kind) for kind in (qp.KIND, elasticquota.KIND, "Node")),
        object_errors=object_errors,
    )
    return QuotaProfiles(controller, http)


@dataclass(frozen=True, slots=True)
class ColocationProfiles:
    controller: ColocationProfileController
    http: ApiHttp
    name: str = COLOCATIONPROFILE


def build_colocationprofile(
    flags: ControllerFlags,
    source: KubeClusterSource,
    *,
    client: ControllerClient,
    object_errors: ObjectErrors | None = None,
) -> ColocationProfiles | None:
    """The ``colocationprofile`` controller (None unless ``--controllers`` names it), with the
    ClusterColocationProfile watch on ``source`` (optional): call before ``source.start``. It lists the
    pending pods a profile selects itself, so it needs no pod informer of its own."""
    if COLOCATIONPROFILE not in flags.enabled:
        return None
    from apis import colocation
    from koord_scheduler.webhook.profile_controller import (
        ColocationProfileController,
        KubePodApi,
        parse_managed_profile,
    )

    source.watch_kind(
        colocation.GROUP,
        colocation.VERSION,
        "clustercolocationprofiles",
        parse_managed_profile,
        colocation.KIND,
        optional=True,
    )
    http = ApiHttp(source.connection, client.bucket())
    controller = ColocationProfileController(
        KubePodApi(http), ready=lambda: source.listed(colocation.KIND), object_errors=object_errors
    )
    return ColocationProfiles(controller, http)


async def hold_controllers(
    elector: LeaderElector | None, stop: asyncio.Event, controllers: asyncio.Future[None] | None
) -> int:
    """Controllers only (``--scheduling=false``): run until stopped (exit code 0) or until the Lease is
    lost or the controllers fail (1)."""
    waiting: set[asyncio.Future[Any]] = {asyncio.ensure_future(stop.wait())}
    hold = asyncio.ensure_future(elector.hold()) if elector is not None else None
    waiting |= {f for f in (hold, controllers) if f is not None}
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    failed = not stop.is_set()
    if hold is not None and hold.done() and failed:
        log.error("leader election lost; exiting")
    elif controllers is not None and controllers.done() and (error := controllers.exception()) is not None:
        log_failure(log, "cluster controllers failed", error)
    stop.set()
    for future in waiting:
        if future is not controllers:
            future.cancel()
    await asyncio.gather(*(f for f in waiting if f is not controllers), return_exceptions=True)
    return 1 if failed else 0
