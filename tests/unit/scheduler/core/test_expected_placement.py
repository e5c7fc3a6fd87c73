"""NominatedNodeNameForExpectation (beta, on in v1.35): when binding will take a while (a PreBind plugin has
work, or the pod waits at Permit), ``status.nominatedNodeName`` names the chosen node before PreBind; pods
whose binding is immediate are bound without it. The API server (here the in-memory cluster) clears it at
binding. Off with ``--feature-gates NominatedNodeNameForExpectation=false``."""

from __future__ import annotations

from apis.config import parse_scheduler_config
from apis.core.types import Pod
from apis.feature_gates import SchedulerFeatureGates
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import SchedulerOptions
from tests import dra_builders as dra
from tests.builders import make_node, make_pod

NOW = 1_700_000_000.0


class RecordingCluster(MemoryCluster):
    __slots__ = ("nominated",)

    def __init__(self) -> None:
        super().__init__()
        self.nominated: list[tuple[str, str, str]] = []
        """(pod, node, pod's node at the time): the writes of status.nominatedNodeName."""

    async def set_nominated_node_name(self, pod: Pod, node_name: str) -> None:
        current = self.pods.get(pod.key)
        self.nominated.append((pod.key, node_name, current.node_name if current else "?"))
        await super().set_nominated_node_name(pod, node_name)


async def run(gates: SchedulerFeatureGates) -> RecordingCluster:
    cluster = RecordingCluster()
    nodes = [make_node("n1").allocatable(cpu="4", memory="8Gi", pods="10").build()]
    pods = [
        make_pod("with-claim").req(cpu="100m").resource_claim("gpu", claim="c").build(),
        make_pod("plain").req(cpu="100m").build(),
    ]
    objects = {
        "DeviceClass": [(dra.DRIVER, dra.device_class())],
        "ResourceSlice": [("s", dra.gpus("n1", 1))],
        "ResourceClaim": [("default/c", dra.claim("c", dra.request()))],
    }
    cluster.load(nodes, pods, objects)
    config = parse_scheduler_config("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    scheduler = build_scheduler(
        config, in_tree_registry(), cluster, clock=lambda: NOW, options=SchedulerOptions(feature_gates=gates)
    )
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return cluster


async def test_pods_whose_prebind_has_work_are_nominated_first_then_cleared_at_binding() -> None:
    cluster = await run(SchedulerFeatureGates())
    assert cluster.nominated == [("default/with-claim", "n1", "")]  # before binding, only the pod with a claim
    for key in ("default/with-claim", "default/plain"):
        assert (cluster.pods[key].node_name, cluster.pods[key].nominated_node_name) == ("n1", "")


async def test_the_feature_gate_turns_it_off() -> None:
    cluster = await run(SchedulerFeatureGates.resolve({"NominatedNodeNameForExpectation": False}))
    assert cluster.nominated == []
    assert cluster.pods["default/with-claim"].node_name == "n1"
