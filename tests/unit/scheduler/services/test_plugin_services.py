"""Koordinator's ``/apis/v1`` plugin services, answered from a scheduler's state: the paths and JSON keys are
Koordinator's, and the numbers are the ones ``koord-scheduler simulate`` prints for the same state (each
example cluster in ``config/simulate`` is run once and both views are compared)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from apis.config import load_scheduler_config
from apis.core.quantity import to_amount
from apis.scheduling.elasticquota import format_resources
from koord_scheduler.app.simulate import run_simulation, to_json
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.plugin_services import ServiceTable, param_problem, scheduler_services

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = REPO / "config" / "simulate"
NOW = 1_800_000_000.0

GANG_SUMMARY_KEYS = [
    "name",
    "waitTime",
    "createTime",
    "mode",
    "gangMatchPolicy",
    "minRequiredNumber",
    "totalChildrenNum",
    "gangGroup",
    "children",
    "pendingChildren",
    "waitingForBindChildren",
    "boundChildren",
    "onceResourceSatisfied",
    "gangGroupInfo",
    "gangFrom",
    "hasGangInit",
]
QUOTA_SUMMARY_KEYS = [
    "name",
    "parentName",
    "isParent",
    "runtimeVersion",
    "allowLentResource",
    "tree",
    "max",
    "min",
    "autoScaleMin",
    "used",
    "nonPreemptibleUsed",
    "request",
    "nonPreemptibleRequest",
    "sharedWeight",
    "runtime",
    "childRequest",
    "allocated",
    "guaranteed",
    "selfUsed",
    "selfNonPreemptibleUsed",
    "selfRequest",
    "selfNonPreemptibleRequest",
]
DEVICE_SUMMARY_KEYS = [
    "deviceTotal",
    "deviceFree",
    "deviceUsed",
    "deviceTotalDetail",
    "deviceFreeDetail",
    "deviceUsedDetail",
    "allocateSet",
]


async def run(
    cluster: str, config: str = "scheduler-config.yaml", *, now: float = NOW
) -> tuple[dict[str, Any], ServiceTable]:
    result, scheduler = await run_simulation(
        EXAMPLES / cluster, load_scheduler_config(EXAMPLES / config), in_tree_registry(), now=now
    )
    import json

    return json.loads(to_json(result)), scheduler_services(scheduler)


def get(table: ServiceTable, path: str, query: Mapping[str, str] | None = None) -> Any:
    status, body = table.answer(path.strip("/").split("/"), query or {})
    assert status == 200, (path, body)
    return body


def amounts(wire: Mapping[str, str]) -> dict[str, int]:
    return {k: to_amount(k, v) for k, v in wire.items()}


def rfc3339(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# ----- the table -----


async def test_every_koordinator_path_is_served_when_its_plugin_is_enabled() -> None:
    _, table = await run("numa-cluster.yaml", "numa-scheduler-config.yaml")
    _, quotas = await run("elasticquota-cluster.yaml", "elasticquota-config.yaml")
    _, example = await run("example-cluster.yaml")
    paths = set(table.paths) | set(quotas.paths) | set(example.paths)
    assert paths >= {
        "/apis/v1/__services__",
        "/apis/v1/nodes/:nodeName",
        "/apis/v1/plugins/Coscheduling/gang/:namespace/:name",
        "/apis/v1/plugins/Coscheduling/gangs",
        "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries",
        "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/:name",
        "/apis/v1/plugins/ElasticQuota/quotas",
        "/apis/v1/plugins/ElasticQuota/quotas/:name",
        "/apis/v1/plugins/ElasticQuota/quota/:name",
        "/apis/v1/plugins/LoadAwareScheduling/node/:nodeName",
        "/apis/v1/plugins/NodeNUMAResource/nodes/:nodeName",
        "/apis/v1/plugins/Reservation/nodeReservations/:nodeName",
        "/apis/v1/plugins/Reservation/reservationSelectorIndex",
    }
    assert get(example, "/apis/v1/__services__") == {"GET": sorted(example.paths)}


@pytest.mark.parametrize(
    ("path", "want_status", "want_message"),
    [
        pytest.param("/apis/v1/nodes/no-such-node", 404, "cannot find node no-such-node", id="unknown-node"),
        pytest.param(
            "/apis/v1/plugins/Coscheduling/gang/default/none", 404, "cannot find gang default/none", id="unknown-gang"
        ),
        pytest.param(
            "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/none",
            404,
            "cannot find node none",
            id="node-without-devices",
        ),
        pytest.param(
            "/apis/v1/nodes/Node_1",
            400,
            "nodeName 'Node_1' is invalid: a lowercase RFC 1123 subdomain",
            id="node-name-rule",
        ),
        pytest.param(
            "/apis/v1/plugins/Coscheduling/gang/Default/g",
            400,
            "namespace 'Default' is invalid: a lowercase RFC 1123 label",
            id="namespace-rule",
        ),
        pytest.param(
            "/apis/v1/plugins/Coscheduling/gang/default/a\r\nb",
            400,
            "name 'a\\r\\nb' is invalid: at most 253 visible ASCII characters",
            id="control-characters",
        ),
        pytest.param(
            "/apis/v1/plugins/NoSuchPlugin/x", 404, "no service at '/apis/v1/plugins/NoSuchPlugin/x'", id="unknown-path"
        ),
    ],
)
async def test_errors_are_koordinators_message_objects(path: str, want_status: int, want_message: str) -> None:
    _, table = await run("example-cluster.yaml")
    status, body = table.answer(path.strip("/").split("/"), {})
    assert status == want_status
    assert set(body) == {"message"}
    assert body["message"].startswith(want_message), body


@pytest.mark.parametrize(
    ("name", "value", "want"),
    [
        pytest.param("nodeName", "node-1.example", "", id="subdomain"),
        pytest.param("namespace", "a.b", "is invalid: a lowercase RFC 1123 label", id="dot-in-namespace"),
        pytest.param("name", "My Gang", "", id="annotation-gang-name"),
        pytest.param("name", "x" * 254, "at most 253", id="too-long"),
        pytest.param("name", "a/b", "no '/'", id="slash-from-%2F"),
        pytest.param("name", "é", "visible ASCII", id="non-ascii"),
        pytest.param("name", "", "is invalid", id="empty"),
    ],
)
def test_param_problem(name: str, value: str, want: str) -> None:
    problem = param_problem(name, value)
    assert (want in problem) if want else problem == ""


# ----- the same numbers as simulate -----


async def test_quotas_match_the_simulate_quota_table() -> None:
    printed, table = await run("elasticquota-cluster.yaml", "elasticquota-config.yaml")
    summaries = get(table, "/apis/v1/plugins/ElasticQuota/quotas")
    rows = {r["quota"]: r for r in printed["ElasticQuotas"]}
    assert rows, "the example has quotas"
    for name, row in rows.items():
        summary = summaries[name]
        assert list(summary) == QUOTA_SUMMARY_KEYS
        assert format_resources(amounts(summary["min"])) == row["min"]
        assert format_resources(amounts(summary["max"])) == row["max"]
        assert format_resources(amounts(summary["runtime"])) == row["runtime"]
        assert format_resources(amounts(summary["used"])) == row["used"].split(" -> ")[1]
        assert summary["parentName"] == row["parent"]
        assert get(table, f"/apis/v1/plugins/ElasticQuota/quotas/{name}") == summary
        assert get(table, f"/apis/v1/plugins/ElasticQuota/quota/{name}") == summary
    assert "koordinator-root-quota" not in summaries


async def test_a_quotas_pods_are_listed_with_include_pods() -> None:
    printed, table = await run("elasticquota-cluster.yaml", "elasticquota-config.yaml")
    web = get(table, "/apis/v1/plugins/ElasticQuota/quotas/web", {"includePods": "true"})
    bound = {f"{p['namespace']}/{p['name']}" for p in printed["pods"] if p["node"]}
    assert {k for k, v in web["podCache"].items() if v["isAssigned"]} <= bound | {"default/web-0", "default/web-1"}
    used: dict[str, int] = {}
    for entry in web["podCache"].values():
        if entry["isAssigned"]:
            for k, v in amounts(entry["resource"]).items():
                used[k] = used.get(k, 0) + v
    assert used == amounts(web["used"])
    assert "podCache" not in get(table, "/apis/v1/plugins/ElasticQuota/quotas/web")


async def test_gangs_match_the_simulate_gang_table() -> None:
    printed, table = await run("gang-cluster.yaml")
    gangs = get(table, "/apis/v1/plugins/Coscheduling/gangs")
    for row in printed["gangs"]:
        summary = gangs[row["gang"]]
        assert list(summary) == GANG_SUMMARY_KEYS
        assert summary["minRequiredNumber"] == (row["minMember"] or 0)
        assert summary["mode"] == (row["mode"] or "")
        assert len(summary["children"]) == row["children"]
        assert len(summary["boundChildren"]) == row["bound"]
        assert summary["hasGangInit"] is (row["problem"] == "")
        namespace, name = row["gang"].split("/")
        assert get(table, f"/apis/v1/plugins/Coscheduling/gang/{namespace}/{name}") == summary
    training = gangs["default/training"]
    assert training["waitTime"] == 60 * 10**9, "a Go time.Duration: nanoseconds"
    assert training["gangFrom"] == "GangFromPodGroupCrd"
    assert training["boundChildren"] == {f"default/training-{i}": {} for i in range(3)}


async def test_device_summaries_match_the_simulate_allocation_table() -> None:
    printed, table = await run("gpu-cluster.yaml")
    summaries = get(table, "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries")
    rows = printed["DeviceShare allocations"]
    assert rows, "the example places GPU pods"
    for row in rows:
        device_type, minor = row["device"].split("/")
        summary = summaries[row["node"]]
        assert list(summary) == DEVICE_SUMMARY_KEYS
        held = summary["allocateSet"][device_type][row["pod"]][minor]
        shown = " ".join(f"{k.removeprefix('koordinator.sh/')}={v}" for k, v in sorted(held.items()))
        assert shown == row["resources"]
    for node, summary in summaries.items():
        total, free, used = (amounts(summary[k]) for k in ("deviceTotal", "deviceFree", "deviceUsed"))
        assert all(free[k] == total[k] - used.get(k, 0) for k in total), node
        assert get(table, f"/apis/v1/plugins/DeviceShare/nodeDeviceSummaries/{node}") == summary


async def test_reservations_match_the_simulate_reservation_table() -> None:
    printed, table = await run("reservations.yaml")
    rows = [r for r in printed["Reservations"] if r["node"] and r["phase"] == "Available"]
    assert rows, "the example has Available reservations"
    for row in rows:
        items = get(table, f"/apis/v1/plugins/Reservation/nodeReservations/{row['node']}")["items"]
        item = next(i for i in items if i["name"] == row["reservation"])
        assert ",".join(f"{k}={v}" for k, v in item["allocatable"].items()) == row["allocatable"]
        assert ",".join(f"{k}={v}" for k, v in item.get("allocated", {}).items()) == row["allocated"]
        assert sorted(f"{p['Namespace']}/{p['Name']}" for p in item.get("assignedPods", [])) == row["owners"]
        left = {
            k: amounts(item["allocatable"])[k] - amounts(item.get("allocated", {})).get(k, 0)
            for k in item["allocatable"]
        }
        go = item["availableResource"]
        assert (go["MilliCPU"], go["Memory"]) == (left.get("cpu", 0), left.get("memory", 0))
    assert get(table, "/apis/v1/plugins/Reservation/nodeReservations/no-such-node") == {"items": []}
    assert get(table, "/apis/v1/plugins/Reservation/reservationSelectorIndex")["enabled"] is False


async def test_node_load_matches_the_simulate_load_table() -> None:
    printed, table = await run("loadaware-cluster.yaml", now=rfc3339("2026-01-01T00:05:00Z"))
    title = next(k for k in printed if k.startswith("Node load"))
    checked = 0
    for row in printed[title]:
        info = get(table, f"/apis/v1/plugins/LoadAwareScheduling/node/{row['node']}")
        if row["cpu usage"] == "-":
            assert "nodeDelta" not in info
            continue
        usage = to_amount("cpu", row["cpu usage"].split()[0])
        estimated = to_amount("cpu", row["cpu estimated"].split()[0])
        assert to_amount("cpu", info["nodeDelta"]["cpu"]) == estimated - usage, row["node"]
        assert len(info.get("nodeDeltaPods", [])) == row["pods estimated"]
        checked += estimated > usage
    assert checked, "some node has pods not yet reported"


async def test_nodes_match_the_simulate_node_table() -> None:
    printed, table = await run("example-cluster.yaml")
    for row in printed["nodes"]:
        info = get(table, f"/apis/v1/nodes/{row['name']}")
        requested = info["requested"]
        assert requested["MilliCPU"] == to_amount("cpu", row["requested"].get("cpu", "0"))
        assert requested["Memory"] == to_amount("memory", row["requested"].get("memory", "0"))
        assert info["allocatable"]["MilliCPU"] == to_amount("cpu", row["allocatable"]["cpu"])
        assert len(info["pods"]) == row["pods"]
        assert info["remaining"]["AllowedPodNumber"] == row["maxPods"] - row["pods"]


async def test_numa_allocations_match_the_simulate_cpuset_table() -> None:
    printed, table = await run("numa-cluster.yaml", "numa-scheduler-config.yaml")
    rows = printed["Bound cpusets (NodeNUMAResource)"]
    assert rows, "the example binds cpuset pods"
    for row in rows:
        response = get(table, f"/apis/v1/plugins/NodeNUMAResource/nodes/{row['node']}")
        pods = {f"{p['namespace']}/{p['name']}": p for p in response["allocatedPods"]}
        assert pods[row["pod"]]["cpuset"] == row["cpuset"]
        assert response["cpuTopology"]["numCPUs"] == len(response["cpuTopology"]["cpuDetails"])
    status, body = table.answer(["apis", "v1", "plugins", "NodeNUMAResource", "nodes", "plain-1"], {})
    assert (status, body) == (500, {"message": "invalid topology, please check the NodeResourceTopology object"})
