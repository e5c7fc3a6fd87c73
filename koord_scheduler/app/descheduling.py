"""Command-line wiring of the descheduling controllers (see :mod:`koord_scheduler.descheduler`).

Both are off by default. ``migration`` runs PodMigrationJobs; ``descheduler`` plans a round every
``deschedulingInterval`` of ``--descheduler-config`` and creates PodMigrationJobs. They read the
scheduler's Node and Pod watches, the Reservation watch (the Reservation plugin's, or their own), and
PodMigrationJob and NodeMetric watches; those kinds are optional on the source (a cluster without the
CRDs still schedules). With both on, the migration controller takes its ``defaultJobMode`` from the
configuration's MigrationControllerArgs.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

from apis.config.descheduler import (
    MIGRATION_CONTROLLER,
    MigrationControllerArgs,
    first_args,
    load_descheduler_config,
)
from apis.scheduling import migration
from apis.scheduling.constants import GROUP as SCHEDULING_GROUP
from apis.scheduling.constants import VERSION as SCHEDULING_VERSION
from apis.scheduling.record import parse_reservation
from apis.slo.common import GROUP as SLO_GROUP
from apis.slo.common import VERSION as SLO_VERSION
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.app.controller_flags import ControllerFlags
from koord_scheduler.app.controllers import ControllerClient
from koord_scheduler.controllers.selection import DESCHEDULER, MIGRATION
from koord_scheduler.descheduler.controller import NODE_METRIC, DeschedulerController
from koord_scheduler.descheduler.migration.api import KubeMigrationApi
from koord_scheduler.descheduler.migration.arbitration import Arbitrator
from koord_scheduler.descheduler.migration.controller import RESERVATION_KIND, EvictLimiter, MigrationController
from koord_scheduler.descheduler.migration.evictors import POLICY_EVICTION
from koord_scheduler.descheduler.round import Descheduler
from koord_scheduler.scheduler.kube_source import KubeClusterSource
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi import ApiHttp


@dataclass(frozen=True, slots=True)
class Migration:
    controller: MigrationController
    http: ApiHttp
    name: str = MIGRATION


@dataclass(frozen=True, slots=True)
class DeschedulerHosted:
    controller: DeschedulerController
    http: ApiHttp
    name: str = DESCHEDULER


def build_descheduling(
    flags: ControllerFlags,
    source: KubeClusterSource,
    *,
    client: ControllerClient,
    scheduler_kinds: Collection[str] = (),
    object_errors: ObjectErrors | None = None,
) -> list[Migration | DeschedulerHosted]:
    """The enabled descheduling controllers, with their watches registered on ``source``: call before
    ``source.start``. The configuration was validated with the flags (:func:`.controller_flags.controller_flags`)."""
    if not flags.enabled & {MIGRATION, DESCHEDULER}:
        return []
    config_and_args = load_descheduler_config(flags.descheduler_config) if flags.descheduler_config else None
    migration_args: MigrationControllerArgs = (
        first_args(config_and_args[1], MIGRATION_CONTROLLER, MigrationControllerArgs)
        if config_and_args is not None
        else MigrationControllerArgs()
    )
    if not source.watches(migration.KIND):
        source.watch_kind(
            SCHEDULING_GROUP,
            SCHEDULING_VERSION,
            migration.PLURAL,
            migration.parse_pod_migration_job,
            migration.KIND,
            optional=True,
        )
    out: list[Migration | DeschedulerHosted] = []
    if MIGRATION in flags.enabled:
        source.watch_optional_once(
            SCHEDULING_GROUP,
            SCHEDULING_VERSION,
            "reservations",
            parse_reservation,
            RESERVATION_KIND,
            scheduler_kinds=scheduler_kinds,
        )
        http = ApiHttp(source.connection, client.bucket())
        controller = MigrationController(
            KubeMigrationApi(http, source.events),
            ready=lambda: source.listed(migration.KIND) and source.listed(RESERVATION_KIND) and source.listed("Pod"),
            default_mode=migration_args.default_job_mode or migration.MODE_RESERVATION_FIRST,
            object_errors=object_errors,
        )
        controller.evict_limiter = EvictLimiter(
            migration_args.qps(), migration_args.evict_burst or 1, clock=time.monotonic
        )
        controller.arbitrator = Arbitrator.of(migration_args)
        controller.eviction_policy = migration_args.eviction_policy or POLICY_EVICTION
        controller.arbitration_interval = migration_args.arbitration_interval()
        out.append(Migration(controller, http))
    if DESCHEDULER in flags.enabled and config_and_args is not None:
        source.watch_optional_once(
            SLO_GROUP, SLO_VERSION, "nodemetrics", parse_node_metric, NODE_METRIC, scheduler_kinds=scheduler_kinds
        )
        config, args = config_and_args
        http = ApiHttp(source.connection, client.bucket())
        descheduler = Descheduler(config, args, clock=time.time)
        out.append(
            DeschedulerHosted(
                DeschedulerController(
                    descheduler,
                    KubeMigrationApi(http, source.events),
                    interval=config.descheduling_interval or 0.0,
                    ready=lambda: source.listed(migration.KIND) and source.listed(NODE_METRIC) and source.listed("Pod"),
                ),
                http,
            )
        )
    return out
