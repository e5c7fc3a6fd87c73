"""Devices inside Reservations (Koordinator ``deviceshare/reservation.go``): a Reservation asking for
GPUs holds the GPUs its reserve pod got; only its owners get them back, first; pods that are no owner
never do; an expired or deleted Reservation gives them back; owners' devices are not counted twice."""

from __future__ import annotations

import json

import pytest

from apis.config import load_scheduler_config
from apis.extension.device import DeviceAllocation
from apis.scheduling import parse_reservation
from apis.scheduling.device import parse_device
from koord_scheduler.app.simulate import SimulationResult, run_simulation
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.deviceshare.cache import DeviceCache, reservation_key
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.unit.scheduler.plugins.deviceshare.gpu_objects import (
    ALLOCATED,
    CORE,
    RATIO,
    gpu_node,
    gpu_pod,
    gpu_reservation,
)
from tests.unit.scheduler.plugins.deviceshare.test_deviceshare_plugin import device, node, setup

NOW = 1_800_000_000.0
OWNER = {"app": "train"}
RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


async def simulate(*objects: str) -> tuple[SimulationResult, MemoryCluster]:
    config = load_scheduler_config("config/simulate/scheduler-config.yaml")
    text = "\n---\n".join(objects)
    result, scheduler = await run_simulation(None, config, in_tree_registry(), now=NOW, cluster_text=text)
    assert isinstance(scheduler.source, MemoryCluster)
    return result, scheduler.source


def gpus_of(result: SimulationResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in result.extra_sections["DeviceShare allocations"]:
        out.setdefault(row["pod"], []).append(row["device"])
    return {k: sorted(v) for k, v in out.items()}


def whole_gpu_by_share(name: str, **kwargs: object) -> str:
    """One whole GPU asked as gpu-core + gpu-memory-ratio 100: NodeResourcesFit checks gpu-core only,
    which the Reservation (asking nvidia.com/gpu) does not hold, so DeviceShare alone keeps the pod off
    the reserved GPUs (Koordinator's "reservation did not hold the devices" report)."""
    body = json.loads(gpu_pod(name, 0, percent=50, **kwargs))  # type: ignore[arg-type]
    requests = body["spec"]["containers"][0]["resources"]["requests"]
    requests[CORE] = requests[RATIO] = "100"
    body["spec"]["containers"][0]["resources"]["limits"] = requests
    return json.dumps(body)


async def test_two_gpu_reservation_is_consumed_by_its_owner_only() -> None:
    result, cluster = await simulate(
        *gpu_node("gpu-1", 4),
        gpu_reservation("train-slot", 2, app="train"),
        *[whole_gpu_by_share(f"other-{i}", created=f"2024-01-01T00:0{i}:00Z") for i in range(3)],
        gpu_pod("trainer", 0, gpus=2, labels=OWNER),
    )
    placed = {p.name: (p.node, p.message) for p in result.placements}
    assert placed["other-0"][0] == placed["other-1"][0] == "gpu-1"
    assert placed["other-2"] == (None, placed["other-2"][1])
    assert "Insufficient gpu devices" in placed["other-2"][1]
    assert placed["trainer"] == ("gpu-1", "")
    gpus = gpus_of(result)
    assert gpus["reservation/uid-train-slot"] == ["gpu/0", "gpu/1"]
    assert gpus["default/other-0"] + gpus["default/other-1"] in (["gpu/2", "gpu/3"], ["gpu/3", "gpu/2"])
    assert gpus["default/trainer"] == ["gpu/0", "gpu/1"], "the owner gets the Reservation's GPUs"
    trainer = cluster.pods["default/trainer"]
    assert "train-slot" in trainer.annotations[RESERVATION_ALLOCATED]
    allocated = json.loads(trainer.annotations[ALLOCATED])
    assert sorted(a["minor"] for a in allocated["gpu"]) == [0, 1]


async def test_owner_asking_more_than_reserved_takes_the_reservation_first_aligned() -> None:
    result, _ = await simulate(
        *gpu_node("gpu-1", 4),
        gpu_reservation("slot", 2, app="train", policy="Aligned"),
        gpu_pod("trainer", 0, gpus=3, labels=OWNER),
    )
    assert {p.name: p.node for p in result.placements} == {"trainer": "gpu-1"}
    trainer = gpus_of(result)["default/trainer"]
    assert {"gpu/0", "gpu/1"} <= set(trainer) and len(trainer) == 3


AVAILABLE = {
    "phase": "Available",
    "nodeName": "gpu-1",
    "allocatable": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "2"},
}
HELD_2_3 = json.dumps(
    {
        "gpu": [
            {"minor": m, "resources": {CORE: "100", RATIO: "100", "koordinator.sh/gpu-memory": "80Gi"}} for m in (2, 3)
        ]
    }
)


async def test_an_available_reservation_read_from_its_annotation_holds_its_gpus() -> None:
    """After a restart: the Reservation's device-allocated annotation (GPUs 2 and 3) is what it holds."""
    result, _ = await simulate(
        *gpu_node("gpu-1", 4),
        gpu_reservation("slot", 2, app="train", status=AVAILABLE, annotations={ALLOCATED: HELD_2_3}),
        *[whole_gpu_by_share(f"other-{i}") for i in range(3)],
        gpu_pod("trainer", 0, gpus=2, labels=OWNER),
    )
    gpus = gpus_of(result)
    others = sorted(g for k, v in gpus.items() if k.startswith("default/other") for g in v)
    assert others == ["gpu/0", "gpu/1"]
    assert gpus["default/trainer"] == ["gpu/2", "gpu/3"]


# ----- the cache's arithmetic -----


def held(*minors: int, percent: int = 100) -> dict[str, tuple[DeviceAllocation, ...]]:
    return {"gpu": tuple(DeviceAllocation(m, {CORE: percent, RATIO: percent}) for m in minors)}


@pytest.fixture
def cache() -> DeviceCache:
    c = DeviceCache()
    c.set_device(parse_device(device("n1", 4)))
    c.assign(reservation_key("r1"), "n1", held(0, 1))
    return c


def free_core(c: DeviceCache) -> dict[int, int]:
    view = c.node_devices("n1")
    assert view is not None
    return {d.minor: d.free[CORE] for d in view.group("gpu").devices}


def test_an_owner_inside_its_reservation_is_not_counted_twice(cache: DeviceCache) -> None:
    cache.assign("default/owner", "n1", held(0, percent=50), reservation="r1")
    assert free_core(cache) == {0: 0, 1: 0, 2: 100, 3: 100}
    view = cache.node_devices("n1")
    assert view is not None
    remainder = view.remainders["r1"]
    assert remainder.amounts["gpu"] == {0: {CORE: 50, RATIO: 50}, 1: {CORE: 100, RATIO: 100}}
    owner_view, preferred = view.for_owner("r1", restricted=False)
    assert {d.minor: d.free[CORE] for d in owner_view.group("gpu").devices} == {0: 50, 1: 100, 2: 100, 3: 100}
    assert preferred == {"gpu": frozenset({0, 1})}
    restricted, _ = view.for_owner("r1", restricted=True)
    assert {d.minor: d.free[CORE] for d in restricted.group("gpu").devices} == {0: 50, 1: 100}


def test_an_owner_outside_its_reservations_minors_counts_on_the_node(cache: DeviceCache) -> None:
    cache.assign("default/owner", "n1", held(0, 3), reservation="r1")
    assert free_core(cache) == {0: 0, 1: 0, 2: 100, 3: 0}
    view = cache.node_devices("n1")
    assert view is not None and view.remainders["r1"].amounts["gpu"][0] == {CORE: 0, RATIO: 0}


def test_a_pod_of_another_or_no_reservation_counts_fully(cache: DeviceCache) -> None:
    cache.assign("default/stranger", "n1", held(2))
    cache.assign("default/ghost", "n1", held(3), reservation="gone")
    assert free_core(cache) == {0: 0, 1: 0, 2: 0, 3: 0}


def test_the_reservation_leaving_frees_its_gpus_and_its_owners_count_on_the_node(cache: DeviceCache) -> None:
    cache.assign("default/owner", "n1", held(0), reservation="r1")
    cache.unassign(reservation_key("r1"))
    assert free_core(cache) == {0: 0, 1: 100, 2: 100, 3: 100}


def test_reservation_events_hold_and_give_back() -> None:
    plugin, _, _ = setup([node("gpu-1")], [device("gpu-1", 4)])
    available = json.loads(gpu_reservation("slot", 2, app="t", status=AVAILABLE, annotations={ALLOCATED: HELD_2_3}))
    record = parse_reservation(available)
    plugin.on_reservation(EventType.ADDED, None, record)
    assert plugin.cache.holds(reservation_key("uid-slot"))
    view = plugin.cache.node_devices("gpu-1")
    assert view is not None and {d.minor: d.free[CORE] for d in view.group("gpu").devices} == {
        0: 100,
        1: 100,
        2: 0,
        3: 0,
    }
    failed = parse_reservation({**available, "status": {**AVAILABLE, "phase": "Failed"}})
    plugin.on_reservation(EventType.MODIFIED, record, failed)
    assert not plugin.cache.holds(reservation_key("uid-slot"))
    plugin.on_reservation(EventType.MODIFIED, failed, record)
    assert plugin.cache.holds(reservation_key("uid-slot"))
    plugin.on_reservation(EventType.DELETED, record, None)
    assert not plugin.cache.holds(reservation_key("uid-slot"))
