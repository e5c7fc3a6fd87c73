"""``simulate`` on config/simulate/volumes-cluster.yaml with the default profile: placements decided by
the volume plugins and ImageLocality, and the Volumes section saying what each claim got."""

from __future__ import annotations

from pathlib import Path

from apis.config import parse_scheduler_config
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import run_simulation, to_text

REPO = Path(__file__).resolve().parents[5]
CLUSTER = REPO / "config" / "simulate" / "volumes-cluster.yaml"
DEFAULT = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


async def test_volumes_cluster_placements() -> None:
    config = parse_scheduler_config(DEFAULT, source="test")
    result, _ = await run_simulation(CLUSTER, config, build_registry(use_entry_points=False), now=1_700_000_000.0)
    assert result.problems == []
    assert {p.name: p.node for p in result.placements} == {
        "web-0": "n2",
        "db-0": "n2",
        "db-1": None,
        "reader": "n3",
        "cache": "n1",
    }
    db1 = next(p for p in result.placements if p.name == "db-1")
    assert db1.message.startswith(
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )
    rows = {row["claim"]: row for row in result.extra_sections["Volumes"]}
    assert rows["shop/data-db-0"] == {
        "pod": "shop/db-0",
        "claim": "shop/data-db-0",
        "volume": "local-n2",
        "how": "bound to an available volume",
    }
    web = rows["shop/data-web-0"]
    assert (web["pod"], web["how"]) == ("shop/web-0", "provisioned for n2")
    assert web["volume"].startswith("pvc-")
    assert "Volumes:" in to_text(result)
