"""bench/e2e_koord_mixed.py's mix and bench/e2e_throughput.py's chart-profile contenders."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from tests.unit.bench.conftest import load_bench

load_bench("e2e_colocation")  # imported by name by the mix, as when run from bench/
mixed = load_bench("e2e_koord_mixed")


def test_the_mix_has_the_documented_shares() -> None:
    kinds = Counter(mixed.pod_kind(i) for i in range(3000))
    assert kinds == {"reserved": 150, "lsr": 300, "gang": 750, "quota": 750, "plain": 1050}


def test_gangs_are_whole_and_of_five() -> None:
    members: Counter[str] = Counter()
    for i in range(400):
        notes = mixed.pod_obj(i, "bench")["metadata"]["annotations"]
        if notes:
            assert notes["gang.scheduling.koordinator.sh/min-available"] == "5"
            members[notes["gang.scheduling.koordinator.sh/name"]] += 1
    assert set(members.values()) == {5} and len(members) == 20


def test_reserved_pods_match_only_their_reservation() -> None:
    pod = mixed.pod_obj(40, "bench")
    reservation = mixed.reservation_obj(40, "bench")
    selector = reservation["spec"]["owners"][0]["labelSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert not selector.items() <= mixed.pod_obj(60, "bench")["metadata"]["labels"].items()
    assert reservation["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"


def test_lsr_pods_ask_for_whole_cpus_with_equal_limits() -> None:
    pod = mixed.pod_obj(1, "bench")
    resources = pod["spec"]["containers"][0]["resources"]
    assert pod["metadata"]["labels"] == {"koordinator.sh/qosClass": "LSR"}
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "1"


def test_cpu_topology_has_four_cpus_in_two_cores() -> None:
    detail = json.loads(mixed.cpu_topology())["detail"]
    assert [d["id"] for d in detail] == [0, 1, 2, 3]
    assert Counter(d["core"] for d in detail) == {0: 2, 1: 2}


def test_pods_not_a_multiple_of_twenty_are_refused() -> None:
    async def never(*_: Any) -> None:
        raise AssertionError("nothing is deleted before the check")

    with pytest.raises(ValueError, match="multiple of 20"):
        asyncio.run(mixed.prepare(None, 310, namespace="bench", delete_pods=never))


def test_chart_contenders_take_the_default_scheduler_name_and_keep_every_plugin() -> None:
    throughput = load_bench("e2e_throughput")
    document = throughput.chart_profile()
    profile = document["profiles"][0]
    assert profile["schedulerName"] == "default-scheduler"
    enabled = {p["name"] for point in profile["plugins"].values() for p in point.get("enabled", [])}
    assert {"Reservation", "Coscheduling", "ElasticQuota", "LoadAwareScheduling", "NodeNUMAResource"} <= enabled
