#!/usr/bin/env python3
"""Write charts/pykoord/crds/*.yaml from the pydantic models in ``CRDS``. Add a line to ``CRDS`` for a new CRD.
Then run scripts/render-deploy.sh: deploy/crds/ is rendered from the chart.

python scripts/gen-crds.py            # write
python scripts/gen-crds.py --check    # exit 1 if any file differs from generation
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import BaseModel

from apis.colocation import GROUP as COLOCATION_GROUP
from apis.colocation import VERSION as COLOCATION_VERSION
from apis.colocation import ClusterColocationProfile
from apis.crdgen import CRDMeta, PrinterColumn, render_all
from apis.quota import GROUP as QUOTA_GROUP
from apis.quota import KIND as QUOTA_PROFILE_KIND
from apis.quota import PLURAL as QUOTA_PROFILE_PLURAL
from apis.quota import VERSION as QUOTA_VERSION
from apis.quota import ElasticQuotaProfile
from apis.scheduling import GROUP as SCHEDULING_GROUP
from apis.scheduling import VERSION as SCHEDULING_VERSION
from apis.scheduling import Reservation, elasticquota, migration, network_topology, podgroup
from apis.scheduling.device import Device
from apis.slo import GROUP as SLO_GROUP
from apis.slo import VERSION as SLO_VERSION
from apis.slo import NodeMetric, NodeSLO

CRDS: list[tuple[type[BaseModel], CRDMeta]] = [
    (
        ClusterColocationProfile,
        CRDMeta(
            group=COLOCATION_GROUP,
            version=COLOCATION_VERSION,
            kind="ClusterColocationProfile",
            plural="clustercolocationprofiles",
            scope="Cluster",
        ),
    ),
    (
        NodeMetric,
        CRDMeta(
            group=SLO_GROUP,
            version=SLO_VERSION,
            kind="NodeMetric",
            plural="nodemetrics",
            scope="Cluster",
            printer_columns=(PrinterColumn("UpdateTime", "date", ".status.updateTime"),),
        ),
    ),
    (
        NodeSLO,
        CRDMeta(group=SLO_GROUP, version=SLO_VERSION, kind="NodeSLO", plural="nodeslos", scope="Cluster"),
    ),
    (
        Device,
        CRDMeta(
            group=SCHEDULING_GROUP,
            version=SCHEDULING_VERSION,
            kind="Device",
            plural="devices",
            scope="Cluster",
            status_subresource=False,
        ),
    ),
    (
        Reservation,
        CRDMeta(
            group=SCHEDULING_GROUP,
            version=SCHEDULING_VERSION,
            kind="Reservation",
            plural="reservations",
            scope="Cluster",
            printer_columns=(
                PrinterColumn("Phase", "string", ".status.phase", "The phase of reservation"),
                PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
                PrinterColumn("Node", "string", ".status.nodeName"),
                PrinterColumn("TTL", "string", ".spec.ttl"),
                PrinterColumn("Expires", "string", ".spec.expires"),
            ),
        ),
    ),
    (
        migration.PodMigrationJob,
        CRDMeta(
            group=SCHEDULING_GROUP,
            version=SCHEDULING_VERSION,
            kind=migration.KIND,
            plural=migration.PLURAL,
            scope="Cluster",
            short_names=("pmj",),
            printer_columns=(
                PrinterColumn("Phase", "string", ".status.phase", "The phase of PodMigrationJob"),
                PrinterColumn("Status", "string", ".status.status", "The status of PodMigrationJob"),
                PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
                PrinterColumn("Node", "string", ".status.nodeName"),
                PrinterColumn("Reservation", "string", ".spec.reservationOptions.reservationRef.name"),
                PrinterColumn("PodNamespace", "string", ".spec.podRef.namespace"),
                PrinterColumn("Pod", "string", ".spec.podRef.name"),
                PrinterColumn("NewPod", "string", ".status.podRef.name"),
                PrinterColumn("TTL", "string", ".spec.ttl"),
            ),
        ),
    ),
    (
        network_topology.ClusterNetworkTopology,
        CRDMeta(
            group=SCHEDULING_GROUP,
            version=SCHEDULING_VERSION,
            kind=network_topology.KIND,
            plural=network_topology.PLURAL,
            scope="Cluster",
        ),
    ),
    (
        elasticquota.ElasticQuota,
        CRDMeta(
            group=elasticquota.GROUP,
            version=elasticquota.VERSION,
            kind=elasticquota.KIND,
            plural=elasticquota.PLURAL,
            scope="Namespaced",
            # Koordinator's CRD has no status subresource: status is written with the object.
            status_subresource=False,
            annotations=(
                ("api-approved.kubernetes.io", "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"),
            ),
        ),
    ),
    (
        ElasticQuotaProfile,
        CRDMeta(
            group=QUOTA_GROUP,
            version=QUOTA_VERSION,
            kind=QUOTA_PROFILE_KIND,
            plural=QUOTA_PROFILE_PLURAL,
            short_names=("eqp",),
            status_subresource=False,  # as Koordinator's: the profile has an empty status
        ),
    ),
    (
        podgroup.PodGroup,
        CRDMeta(
            group=podgroup.GROUP,
            version=podgroup.VERSION,
            kind=podgroup.KIND,
            plural=podgroup.PLURAL,
            short_names=("pg", "pgs"),  # `kubectl get pgs`, as Koordinator's gang-scheduling manual uses
            status_subresource=False,  # as upstream: status is written with the object itself
            annotations=(
                ("api-approved.kubernetes.io", "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"),
            ),
            printer_columns=(
                PrinterColumn("Phase", "string", ".status.phase"),
                PrinterColumn("MinMember", "integer", ".spec.minMember"),
                PrinterColumn("Scheduled", "integer", ".status.scheduled"),
                PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
            ),
        ),
    ),
]

OUT_DIR = Path(__file__).resolve().parent.parent / "charts" / "pykoord" / "crds"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if files differ instead of writing")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all(CRDS).items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("CRDs out of date, run scripts/gen-crds.py:\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
