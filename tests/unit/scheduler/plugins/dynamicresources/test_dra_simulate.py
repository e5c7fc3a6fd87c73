"""DynamicResources end to end on the in-memory cluster (``simulate``) with the default profile: claims
from templates, shared claims, in-flight allocations within one run, prioritized lists, constraints,
and the reasons bad input gives."""

from __future__ import annotations

from typing import Any

import yaml

from apis.config import parse_scheduler_config
from apis.feature_gates import SchedulerFeatureGates, parse_feature_gates_flag
from apis.resource import parse_resource_claim
from koord_scheduler.app.plugin_loading import build_registry
from koord_scheduler.app.simulate import SimulationResult, run_simulation
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.scheduler import Scheduler
from tests import dra_builders as dra
from tests.builders import make_node, make_pod

DEFAULT = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
NOW = 1_700_000_000.0


def node(name: str, **labels: str) -> dict[str, Any]:
    builder = make_node(name).allocatable(cpu="8", memory="16Gi", pods="110").label("kubernetes.io/hostname", name)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder.obj()


def pod(name: str, **claims: str) -> dict[str, Any]:
    """``claims``: pod claim name -> ``template:<name>`` or ``claim:<name>``."""
    builder = make_pod(name).req(cpu="100m")
    for claim_name, ref in claims.items():
        kind, _, target = ref.partition(":")
        builder = builder.resource_claim(claim_name, **{"template" if kind == "template" else "claim": target})
    return builder.obj()


async def simulate(
    *objects: dict[str, Any], config: str = DEFAULT, gates: str = ""
) -> tuple[SimulationResult, Scheduler]:
    text = yaml.safe_dump_all(objects)
    return await run_simulation(
        None,
        parse_scheduler_config(config, source="test"),
        build_registry(use_entry_points=False),
        now=NOW,
        cluster_text=text,
        feature_gates=SchedulerFeatureGates.resolve(parse_feature_gates_flag(gates)),
    )


def placements(result: SimulationResult) -> dict[str, str | None]:
    return {p.name: p.node for p in result.placements}


def message(result: SimulationResult, name: str) -> str:
    return next(p.message for p in result.placements if p.name == name)


def claims_in(scheduler: Scheduler) -> dict[str, Any]:
    raw = scheduler_cluster(scheduler).objects.get("ResourceClaim", {})
    return {key: parse_resource_claim(obj) for key, obj in raw.items()}


def scheduler_cluster(scheduler: Scheduler) -> Any:
    return scheduler.source


GPU_CLASS = dra.device_class(dra.DRIVER, f'device.driver == "{dra.DRIVER}"')
ONE_GPU = dra.template("one-gpu", dra.request())


async def test_a_claim_that_cannot_be_allocated_keeps_the_pod_pending() -> None:
    """The correctness hole: the pod used to be parsed without its claims and bound to a node whose
    devices nobody allocated. No node has a device of the class here."""
    result, _ = await simulate(node("n1"), GPU_CLASS, ONE_GPU, pod("trainer", gpu="template:one-gpu"))

    assert placements(result) == {"trainer": None}
    assert message(result, "trainer").startswith("0/1 nodes are available: 1 cannot allocate all claims.")


async def test_template_claims_are_created_allocated_and_reserved() -> None:
    result, scheduler = await simulate(
        node("n1"),
        node("n2"),
        GPU_CLASS,
        ONE_GPU,
        dra.gpus("n2", 2),
        pod("a", gpu="template:one-gpu"),
        pod("b", gpu="template:one-gpu"),
        pod("c", gpu="template:one-gpu"),
        pod("plain"),
    )

    assert placements(result) == {"a": "n2", "b": "n2", "c": None, "plain": "n1"}
    claims = claims_in(scheduler)
    allocated = {
        key: ([r.device for r in c.allocation.results], [ref.name for ref in c.reserved_for])
        for key, c in claims.items()
        if c.allocation is not None
    }
    assert sorted(allocated.values()) == [(["gpu-0"], ["a"]), (["gpu-1"], ["b"])]
    for claim in claims.values():
        if claim.allocation is not None:
            assert claim.finalizers == ("resource.kubernetes.io/delete-protection",)
            assert claim.allocation.node_selector is not None
    rows = result.extra_sections["ResourceClaims"]
    assert [(row["node"], row["reservedFor"]) for row in rows] == [("n2", "a"), ("n2", "b")]


async def test_a_shared_claim_puts_both_pods_where_its_devices_are() -> None:
    shared = dra.claim("shared", dra.request())
    result, scheduler = await simulate(
        node("n1"),
        node("n2"),
        node("n3"),
        GPU_CLASS,
        shared,
        dra.gpus("n3", 1),
        pod("p1", gpu="claim:shared"),
        pod("p2", gpu="claim:shared"),
    )

    assert placements(result) == {"p1": "n3", "p2": "n3"}
    claim = claims_in(scheduler)["default/shared"]
    assert claim.allocation is not None
    assert sorted(ref.name for ref in claim.reserved_for) == ["p1", "p2"]


async def test_a_missing_claim_keeps_the_pod_in_pre_enqueue() -> None:
    result, _ = await simulate(node("n1"), GPU_CLASS, pod("p", gpu="claim:nowhere"))

    assert placements(result) == {"p": None}
    assert message(result, "p") == ('waiting in PreEnqueue: resourceclaim.resource.k8s.io "nowhere" not found')


async def test_a_missing_class_is_named() -> None:
    result, _ = await simulate(node("n1"), dra.claim("c", dra.request("gpu", "no-such-class")), pod("p", gpu="claim:c"))

    assert message(result, "p") == (
        "0/1 nodes are available: request gpu: device class no-such-class does not exist. no new claims to "
        "deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


async def test_selectors_over_attributes_and_capacity_choose_the_node() -> None:
    big = dra.template(
        "big",
        dra.request(
            "gpu",
            dra.DRIVER,
            f'device.capacity["{dra.DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0',
            f'device.attributes["{dra.DRIVER}"].model.startsWith("H")',
        ),
    )
    small_slice = dra.resource_slice("n1-gpus", "n1", [dra.device("gpu-0", capacity={"memory": "40Gi"}, model="A100")])
    big_slice = dra.resource_slice("n2-gpus", "n2", [dra.device("gpu-0", capacity={"memory": "80Gi"}, model="H100")])
    result, _ = await simulate(
        node("n1"), node("n2"), GPU_CLASS, big, small_slice, big_slice, pod("p", gpu="template:big")
    )

    assert placements(result) == {"p": "n2"}


async def test_match_attribute_keeps_two_devices_on_one_numa_node() -> None:
    pair = dra.template(
        "pair",
        dra.request("gpu", count=2),
        constraints=[{"matchAttribute": f"{dra.DRIVER}/numa"}],
    )
    # n1 has two GPUs but on different NUMA nodes; n2 has a matching pair.
    n1 = dra.resource_slice("n1-gpus", "n1", [dra.device("gpu-0", numa=0), dra.device("gpu-1", numa=1)])
    n2 = dra.resource_slice(
        "n2-gpus", "n2", [dra.device("gpu-0", numa=0), dra.device("gpu-1", numa=1), dra.device("gpu-2", numa=1)]
    )
    result, scheduler = await simulate(node("n1"), node("n2"), GPU_CLASS, pair, n1, n2, pod("p", gpu="template:pair"))

    assert placements(result) == {"p": "n2"}
    (claim,) = claims_in(scheduler).values()
    assert claim.allocation is not None
    assert [r.device for r in claim.allocation.results] == ["gpu-1", "gpu-2"]


async def test_first_available_prefers_the_earlier_alternative() -> None:
    prioritized = dra.template(
        "prio",
        dra.first_available(
            "gpu",
            dra.request("big", dra.DRIVER, f'device.attributes["{dra.DRIVER}"].model == "H100"'),
            dra.request("small", dra.DRIVER, count=2),
        ),
    )
    n1 = dra.resource_slice("n1-gpus", "n1", [dra.device("gpu-0", model="A100"), dra.device("gpu-1", model="A100")])
    n2 = dra.resource_slice("n2-gpus", "n2", [dra.device("gpu-0", model="H100")])
    result, scheduler = await simulate(
        node("n1"),
        node("n2"),
        GPU_CLASS,
        prioritized,
        n1,
        n2,
        pod("p", gpu="template:prio"),
        pod("q", gpu="template:prio"),
    )

    # p: both nodes fit, n2 (the first alternative) scores higher; q: only n1's second alternative is left.
    assert placements(result) == {"p": "n2", "q": "n1"}
    requests = sorted(
        tuple(r.request for r in c.allocation.results) for c in claims_in(scheduler).values() if c.allocation
    )
    assert requests == [("gpu/big",), ("gpu/small", "gpu/small")]


async def test_all_mode_takes_every_matching_device() -> None:
    everything = dra.template("all", dra.request("gpu", all_devices=True))
    result, scheduler = await simulate(
        node("n1"), GPU_CLASS, everything, dra.gpus("n1", 3), pod("p", gpu="template:all"), pod("q", gpu="template:all")
    )

    assert placements(result)["p"] == "n1"
    assert placements(result)["q"] is None
    allocated = [c for c in claims_in(scheduler).values() if c.allocation]
    assert [r.device for r in allocated[0].allocation.results] == ["gpu-0", "gpu-1", "gpu-2"]  # type: ignore[union-attr]


async def test_admin_access_uses_devices_already_in_use() -> None:
    admin = dra.template("admin", dra.request("gpu", admin=True))
    result, _ = await simulate(
        node("n1"),
        GPU_CLASS,
        ONE_GPU,
        admin,
        dra.gpus("n1", 1),
        pod("user", gpu="template:one-gpu"),
        pod("monitor", gpu="template:admin"),
    )

    assert placements(result) == {"user": "n1", "monitor": "n1"}


async def test_a_bad_class_selector_is_an_error_naming_the_class_and_other_pods_go_on() -> None:
    broken = dra.device_class("broken", "device.attributes[")
    missing_attribute = dra.device_class("strict", f'device.attributes["{dra.DRIVER}"].model == "x"')
    result, _ = await simulate(
        node("n1"),
        GPU_CLASS,
        broken,
        missing_attribute,
        dra.gpus("n1", 2),
        dra.claim("c1", dra.request("gpu", "broken")),
        dra.claim("c2", dra.request("gpu", "strict")),
        pod("bad-cel", gpu="claim:c1"),
        pod("no-attribute", gpu="claim:c2"),
        pod("fine", gpu="template:one-gpu"),
        ONE_GPU,
    )

    assert placements(result) == {"bad-cel": None, "no-attribute": None, "fine": "n1"}
    assert message(result, "bad-cel").startswith("class broken: selector #0: CEL compile error: compilation failed")
    assert message(result, "no-attribute") == (
        "class strict: selector #0: CEL runtime error: no such member in mapping: 'model'"
    )


async def test_duplicate_device_names_in_a_pool_make_it_invalid() -> None:
    first = dra.resource_slice("pool-a", "n1", [dra.device("gpu-0")], pool="shared", count=2)
    second = dra.resource_slice("pool-b", "n1", [dra.device("gpu-0")], pool="shared", count=2)
    result, _ = await simulate(node("n1"), GPU_CLASS, ONE_GPU, first, second, pod("p", gpu="template:one-gpu"))

    assert placements(result) == {"p": None}
    assert message(result, "p").startswith(
        "0/1 nodes are available: 1 invalid resource pools were encountered: gpu.example.com/shared: duplicate "
        "device name gpu-0 (ResourceSlice pool-a spec.devices[0].name, ResourceSlice pool-b spec.devices[0].name)."
    )


async def test_an_allocated_claim_brings_the_pod_to_its_node() -> None:
    allocated = dra.claim("done", dra.request())
    allocated["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": dra.DRIVER, "pool": "n2", "device": "gpu-0"}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
            },
        }
    }
    result, scheduler = await simulate(
        node("n1"), node("n2"), GPU_CLASS, allocated, dra.gpus("n1", 1), dra.gpus("n2", 1), pod("p", gpu="claim:done")
    )

    assert placements(result) == {"p": "n2"}
    assert [ref.name for ref in claims_in(scheduler)["default/done"].reserved_for] == ["p"]


async def test_prioritized_lists_follow_their_feature_gate() -> None:
    prioritized = dra.template("prio", dra.first_available("gpu", dra.request("any", dra.DRIVER)))
    objects = (node("n1"), GPU_CLASS, prioritized, dra.gpus("n1", 1), pod("p", gpu="template:prio"))

    on, _ = await simulate(*objects)
    off, _ = await simulate(*objects, gates="DRAPrioritizedList=false")

    assert placements(on) == {"p": "n1"}
    assert placements(off) == {"p": None}
    assert message(off, "p").startswith("0/1 nodes are available: resource claim default/p-gpu-")
    assert "request gpu: has subrequests, but the DRAPrioritizedList feature is disabled" in message(off, "p")


async def test_a_selector_over_its_cost_budget_names_the_claim_and_others_go_on() -> None:
    runaway = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, " * 5 + "a > 0" + ")" * 5
    result, _ = await simulate(
        node("n1"),
        GPU_CLASS,
        ONE_GPU,
        dra.gpus("n1", 2),
        dra.claim("costly", dra.request("gpu", dra.DRIVER, runaway)),
        pod("costly-pod", gpu="claim:costly"),
        pod("fine", gpu="template:one-gpu"),
    )

    assert placements(result) == {"costly-pod": None, "fine": "n1"}
    assert message(result, "costly-pod").startswith(
        "claim default/costly: selector #0: CEL compile error: compilation failed: estimated cost "
    )
    assert message(result, "costly-pod").endswith("exceeds the budget of 1000000 (CELSelectorExpressionMaxCost)")


async def test_deleting_a_pod_releases_its_claims_in_the_simulator() -> None:
    """The in-memory cluster's resourceclaim controller: a generated claim goes with its pod, a shared claim
    keeps its other consumer, a claim nobody uses any more is deallocated, and the freed device serves the
    next pod."""
    shared = dra.claim("shared", dra.request())
    result, scheduler = await simulate(
        node("n1"),
        GPU_CLASS,
        ONE_GPU,
        shared,
        dra.gpus("n1", 2),
        pod("gen", gpu="template:one-gpu"),
        pod("s1", gpu="claim:shared"),
        pod("s2", gpu="claim:shared"),
    )
    assert placements(result) == {"gen": "n1", "s1": "n1", "s2": "n1"}
    cluster = scheduler_cluster(scheduler)
    generated = next(k for k in claims_in(scheduler) if k.startswith("default/gen-gpu-"))

    await cluster.delete_pod(cluster.pods["default/gen"], reason="test")
    await cluster.delete_pod(cluster.pods["default/s1"], reason="test")
    claims = claims_in(scheduler)
    assert generated not in claims
    assert [ref.name for ref in claims["default/shared"].reserved_for] == ["s2"]

    await cluster.delete_pod(cluster.pods["default/s2"], reason="test")
    released = claims_in(scheduler)["default/shared"]
    assert released.allocation is None and released.finalizers == ()

    late = make_pod("late").req(cpu="100m").resource_claim("gpu", claim="shared").build()
    cluster.pods[late.key] = late
    scheduler.on_pod(EventType.ADDED, None, late)
    await scheduler.run_until_idle()
    assert cluster.pods["default/late"].node_name == "n1"
