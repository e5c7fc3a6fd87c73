"""Command-line wiring of the descheduling controllers (``migration``; see :mod:`koord_scheduler.descheduler`).

The ``migration`` controller is off by default (``--controllers=*,migration`` turns it on). It reads the
scheduler's Pod watch, the Reservation watch (the Reservation plugin's, or its own) and a PodMigrationJob
watch; both kinds are optional on the source (a cluster without the CRDs still schedules).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from apis.scheduling import migration
from apis.scheduling.constants import GROUP as SCHEDULING_GROUP
from apis.scheduling.constants import VERSION as SCHEDULING_VERSION
from apis.scheduling.record import parse_reservation
from koord_scheduler.app.controller_flags import ControllerFlags
from koord_scheduler.descheduler.migration.api import KubeMigrationApi
from koord_scheduler.descheduler.migration.controller import RESERVATION_KIND, MigrationController
from koord_scheduler.scheduler.controllers.selection import MIGRATION
from koord_scheduler.scheduler.kube import ApiHttp, KubeClusterSource, TokenBucket
from koord_scheduler.scheduler.object_errors import ObjectErrors


@dataclass(frozen=True, slots=True)
class Migration:
    controller: MigrationController
    http: ApiHttp
    name: str = MIGRATION


def build_migration(
    flags: ControllerFlags,
    source: KubeClusterSource,
    *,
    client: tuple[float, int],
    scheduler_kinds: Collection[str] = (),
    object_errors: ObjectErrors | None = None,
) -> Migration | None:
    """The ``migration`` controller (None when it is off), with its watches registered on ``source``:
    call before ``source.start``."""
    if MIGRATION not in flags.enabled:
        return None
    if RESERVATION_KIND not in scheduler_kinds and not source.watches(RESERVATION_KIND):
        source.watch_kind(
            SCHEDULING_GROUP, SCHEDULING_VERSION, "reservations", parse_reservation, RESERVATION_KIND, optional=True
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
    http = ApiHttp(source.connection, TokenBucket(*client))
    controller = MigrationController(
        KubeMigrationApi(http, source.events),
        ready=lambda: source.listed(migration.KIND) and source.listed(RESERVATION_KIND) and source.listed("Pod"),
        object_errors=object_errors,
    )
    return Migration(controller, http)
