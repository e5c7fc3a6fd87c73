"""NodeResourceTopology content and the CPU share pools koordlet computes (pure functions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apis.extension.numa import CPUSharedPool
from apis.extension.priority import PriorityClass
from apis.extension.qos import KubeQOSClass, QoSClass
from koordlet.qosmanager.plugins.cpuset.policy import CPUSetRule, container_cpuset, unset_cfs_quota
from koordlet.statesinformer.nodetopology import (
    KubeletCPUManager,
    build_node_resource_topology,
    kubelet_topology_policy,
    merge_zones,
    needs_update,
    parse_cpu_manager_state,
    topology_annotations,
    topology_zones,
)
from koordlet.statesinformer.pods import PodMeta
from koordlet.system.cputopology import CPUTopology, read_cpu_topology
from tests.unit.koordlet.topology.sysfs_tree import write_sysfs


@pytest.fixture
def topo(tmp_path: Path) -> CPUTopology:
    return read_cpu_topology(write_sysfs(tmp_path, sockets=2, nodes_per_socket=1, cores_per_node=4, threads=2))


def pod(name: str, qos: str = "", cpuset: str = "", kube_qos: KubeQOSClass = KubeQOSClass.GUARANTEED) -> PodMeta:
    annotations = {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpuset})} if cpuset else {}
    return PodMeta(
        uid=f"uid-{name}", namespace="default", name=name, kube_qos=kube_qos,
        qos=QoSClass(qos) if qos else QoSClass.NONE, priority_class=PriorityClass.PROD, priority=None,
        cgroup_dir=f"kubepods/pod{name}", labels={"koordinator.sh/qosClass": qos} if qos else {},
        annotations=annotations,
    )  # fmt: skip


def pools(annotations: dict[str, str], key: str) -> list[str]:
    return [p["cpuset"] for p in json.loads(annotations[f"node.koordinator.sh/{key}"])]


def test_lse_leaves_both_pools_lsr_only_the_ls_pool(topo: CPUTopology) -> None:
    """After the scheduler bound LSR 0-1,8-9, LSE 4-5,12-13 and LSR 2-3: the fact sheet's pools."""
    pods = [pod("a", "LSR", "0-1,8-9"), pod("b", "LSE", "4-5,12-13"), pod("c", "LSR", "2-3"), pod("d", "LS")]
    got = topology_annotations(topo, pods, KubeletCPUManager(), {})
    assert pools(got, "cpu-shared-pools") == ["10-11", "6-7,14-15"]
    assert pools(got, "be-cpu-shared-pools") == ["0-3,8-11", "6-7,14-15"]
    assert json.loads(got["node.koordinator.sh/cpu-shared-pools"])[1] == {"socket": 1, "node": 1, "cpuset": "6-7,14-15"}
    assert got["node.koordinator.sh/pod-cpu-allocs"] == "null"
    detail = json.loads(got["node.koordinator.sh/cpu-topology"])["detail"]
    assert detail[8] == {"id": 8, "core": 0, "socket": 0, "node": 0}
    assert detail[12] == {"id": 12, "core": 0, "socket": 1, "node": 1}


def test_kubelet_static_pods_and_reserved(topo: CPUTopology) -> None:
    policy, entries = parse_cpu_manager_state(
        json.dumps({"policyName": "static", "defaultCpuSet": "0,2-15", "entries": {"uid-k": {"main": "1,9"},
                    "uid-ls": {"main": "3"}}})
    )  # fmt: skip
    kubelet = KubeletCPUManager(policy, {"full-pcpus-only": "true"}, frozenset({0, 8}), entries)
    node_annotations = {"node.koordinator.sh/reservation": json.dumps({"reservedCPUs": "15"})}
    got = topology_annotations(topo, [pod("k"), pod("ls", "LS")], kubelet, node_annotations)
    assert pools(got, "cpu-shared-pools") == ["0,2-3,8,10-11", "4-7,12-14"]
    assert json.loads(got["node.koordinator.sh/pod-cpu-allocs"]) == [
        {"namespace": "default", "name": "k", "uid": "uid-k", "cpuset": "1,9", "managedByKubelet": True}
    ]
    assert json.loads(got["kubelet.koordinator.sh/cpu-manager-policy"]) == {
        "policy": "static",
        "options": {"full-pcpus-only": "true"},
        "reservedCPUs": "0,8",
    }


def test_nrt_object_zones_and_update_detection(topo: CPUTopology) -> None:
    annotations = topology_annotations(topo, [], KubeletCPUManager(), {})
    obj = build_node_resource_topology("n1", "u1", annotations=annotations, zones=topology_zones(topo))
    assert [z["name"] for z in obj["zones"]] == ["node-0", "node-1"]
    assert obj["zones"][0]["resources"][0] == {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}
    assert obj["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert not needs_update(obj, json.loads(json.dumps(obj)))
    moved = topology_annotations(topo, [pod("a", "LSR", "0-1")], KubeletCPUManager(), {})
    assert needs_update(obj, build_node_resource_topology("n1", "u1", annotations=moved, zones=obj["zones"]))


def test_zone_resources_of_others_are_kept(topo: CPUTopology) -> None:
    """The noderesource controller's batch resources in the zones are neither a difference nor dropped."""
    annotations = topology_annotations(topo, [], KubeletCPUManager(), {})
    desired = build_node_resource_topology("n1", "u1", annotations=annotations, zones=topology_zones(topo))
    current = json.loads(json.dumps(desired))
    batch = {"name": "kubernetes.io/batch-cpu", "capacity": "5000", "allocatable": "5000", "available": "5000"}
    current["zones"][0]["resources"].append(batch)
    current["zones"][0]["resources"].sort(key=lambda r: r["name"])
    assert not needs_update(current, desired)
    merged = merge_zones(current["zones"], desired["zones"])
    assert batch in merged[0]["resources"] and batch not in merged[1]["resources"]
    current["zones"][0]["resources"][0]["allocatable"] = "7"  # the koordlet's own cpu moved: rewrite, keep batch
    assert needs_update(current, desired)
    assert batch in merge_zones(current["zones"], desired["zones"])[0]["resources"]


@pytest.mark.parametrize(
    ("policy", "scope", "want"),
    [
        pytest.param("single-numa-node", "pod", "SingleNUMANodePodLevel", id="single-pod"),
        pytest.param("restricted", "container", "RestrictedContainerLevel", id="restricted-container"),
        pytest.param("none", "container", "None", id="none"),
    ],
)
def test_kubelet_topology_policy(policy: str, scope: str, want: str) -> None:
    assert kubelet_topology_policy(policy, scope) == want


RULE = CPUSetRule((CPUSharedPool(0, 0, "10-11"), CPUSharedPool(1, 1, "6-7,14-15")), system_qos_cpuset="0")


@pytest.mark.parametrize(
    ("target", "rule", "want"),
    [
        pytest.param(pod("a", "LSR", "0-1,8-9"), RULE, "0-1,8-9", id="lsr-gets-its-cpuset"),
        pytest.param(pod("b", "LSE", "4-5,12-13"), RULE, "4-5,12-13", id="lse-gets-its-cpuset"),
        pytest.param(pod("d", "LS", kube_qos=KubeQOSClass.BURSTABLE), RULE, "6-7,10-11,14-15", id="ls-whole-pool"),
        pytest.param(pod("e", "BE", kube_qos=KubeQOSClass.BEST_EFFORT), RULE, None, id="be-left-to-cpu-suppress"),
        pytest.param(pod("s", "SYSTEM"), RULE, "0", id="system-qos-cpuset"),
        pytest.param(pod("g"), RULE, "6-7,10-11,14-15", id="unlabelled-guaranteed-ls-pool"),
        pytest.param(pod("g"), CPUSetRule(RULE.ls_pools, kubelet_static=True), None, id="kubelet-static-left-alone"),
        pytest.param(pod("x", "LSR"), CPUSetRule(()), None, id="no-pool-yet-nothing-written"),
    ],
)
def test_container_cpuset(target: PodMeta, rule: CPUSetRule, want: str | None) -> None:
    assert container_cpuset(target, rule) == want


def test_cfs_quota_unset_only_for_bound_pods() -> None:
    assert unset_cfs_quota(pod("a", "LSR", "0-1"))
    assert not unset_cfs_quota(pod("d", "LS"))
