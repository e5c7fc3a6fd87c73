"""What each gate decides for a container at creation, against Koordinator's hook test tables (rows named
after the upstream case they transcribe: ``pkg/koordlet/runtimehooks/hooks/<gate>/*_test.go``), and that
the decisions are the reconcilers' own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from qos_helpers import pod

from apis.extension.numa import ANNOTATION_RESOURCE_STATUS, CPUSharedPool
from apis.slo import merge_node_slo_spec
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES, FeatureGates
from koordlet.qosmanager.plugins.batchresource.policy import ANNOTATION_EXTENDED_RESOURCE_SPEC, BatchRule
from koordlet.qosmanager.plugins.cpunormalization.policy import NormalizedQuotas, normalized_quotas
from koordlet.qosmanager.plugins.cpuset.policy import CPUSetRule
from koordlet.qosmanager.plugins.oomscoreadj.policy import (
    ANNOTATION_OOM_SCORE_ADJ,
    ANNOTATION_OOM_SCORE_ADJ_SPEC,
    OOMScoreAdjError,
    oom_score_adj,
)
from koordlet.runtimehooks.hooks import (
    ContainerResources,
    HookRules,
    KubeletResources,
    Mount,
    container_resources,
)
from koordlet.runtimehooks.nri.handlers import to_adjustment
from koordlet.statesinformer.pods import PodMeta, parse_pod
from koordlet.system import CgroupDriver
from koordlet.system.layout import CgroupLayout

CPU, MEM = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
GiB = 1 << 30
LAYOUT = CgroupLayout(CgroupDriver.CGROUPFS, "kubepods")
ALL_HOOK_GATES = {"CPUNormalization": True, "OOMScoreAdj": True, "GPUEnvInject": True, "CgroupReconcile": True}
GATES = FeatureGates.resolve(KOORDLET_FEATURES, ALL_HOOK_GATES)
NONE = ContainerResources()

# batch_resource_test.go Test_plugin_SetContainerResources: container-0 requests and limits 500 batch-cpu
# and 2Gi batch-memory; container-1 only limits, 1000 and 2Gi.
SPEC = {
    "containers": {
        "container-0": {"requests": {CPU: "500", MEM: "2Gi"}, "limits": {CPU: "500", MEM: "2Gi"}},
        "container-1": {"limits": {CPU: "1000", MEM: "2Gi"}},
    }
}


def meta(raw: dict[str, Any]) -> PodMeta:
    return parse_pod(raw, LAYOUT)


def be_with_spec(spec: dict[str, Any] = SPEC) -> PodMeta:
    return meta(pod("be").be().annotation(ANNOTATION_EXTENDED_RESOURCE_SPEC, json.dumps(spec)).build())


def decide(p: PodMeta, container: str, *, rules: HookRules | None = None, quota: int | None = None) -> dict[str, Any]:
    got = container_resources(p, container, kubelet=KubeletResources(cfs_quota=quota), rules=rules or HookRules(GATES))
    return {name: getattr(got, name) for name in got.decided_by} | ({"errors": got.errors} if got.errors else {})


@pytest.mark.parametrize(
    ("p", "container", "batch", "want"),
    [
        pytest.param(
            meta(
                pod("ls").qos("Burstable", "LS").annotation(ANNOTATION_EXTENDED_RESOURCE_SPEC, json.dumps(SPEC)).build()
            ),
            "container-0",
            BatchRule(),
            {},
            id="upstream-not-a-Batch-container",
        ),
        pytest.param(
            meta(pod("be").be().build()),
            "container-0",
            BatchRule(),
            {},
            id="upstream-a-Batch-container-without-requests",
        ),
        pytest.param(
            be_with_spec(),
            "container-0",
            BatchRule(cfs_quota_enabled=False),
            {"cpu_shares": 512, "cfs_quota": -1, "memory_limit": 2 * GiB},
            id="upstream-a-Batch-container-with-cfs-quota-unset",
        ),
        pytest.param(
            be_with_spec({"containers": {"container-0": SPEC["containers"]["container-0"]}}),
            "container-1",
            BatchRule(),
            {},
            id="upstream-a-Batch-container-with-requests-not-matched",
        ),
        pytest.param(
            be_with_spec(),
            "container-0",
            BatchRule(),
            {"cpu_shares": 1024 * 500 // 1000, "cfs_quota": 100000 * 500 // 1000, "memory_limit": 2 * GiB},
            id="upstream-a-Batch-container-with-requests",
        ),
        pytest.param(
            be_with_spec(),
            "container-1",
            BatchRule(),
            {"cpu_shares": 2, "cfs_quota": 100000, "memory_limit": 2 * GiB},
            id="upstream-a-Batch-container-with-requests-1",
        ),
        pytest.param(
            be_with_spec(),
            "container-0",
            BatchRule(normalization_ratio=1.2),
            {"cpu_shares": 512, "cfs_quota": 41667, "memory_limit": 2 * GiB},
            id="upstream-a-Batch-container-scaled-by-ratio",
        ),
        pytest.param(
            meta(
                pod("be")
                .be()
                .container("container-0", requests={CPU: "2000"}, limits={CPU: "4000", MEM: "4Gi"})
                .build()
            ),
            "container-0",
            BatchRule(),
            {"cpu_shares": 2048, "cfs_quota": 400000, "memory_limit": 4 * GiB},
            id="own-batch-resources-before-the-annotation",
        ),
    ],
)
def test_batch_resource(p: PodMeta, container: str, batch: BatchRule, want: dict[str, Any]) -> None:
    assert decide(p, container, rules=HookRules(GATES, batch=batch)) == want


LS_POOL = CPUSetRule((CPUSharedPool(0, 0, "2-3"), CPUSharedPool(1, 1, "6-7")))


@pytest.mark.parametrize(
    ("p", "rule", "want"),
    [
        pytest.param(
            meta(
                pod("lsr")
                .qos("Guaranteed", "LSR")
                .annotation(ANNOTATION_RESOURCE_STATUS, json.dumps({"cpuset": "0-1"}))
                .build()
            ),
            LS_POOL,
            {"cpuset_cpus": "0-1", "cfs_quota": -1},
            id="upstream-LSR-with-cpuset-and-unset-quota",
        ),
        pytest.param(
            meta(pod("ls").qos("Burstable", "LS").build()),
            LS_POOL,
            {"cpuset_cpus": "2-3,6-7"},
            id="upstream-LS-share-pool",
        ),
        pytest.param(
            meta(
                pod("ls")
                .qos("Burstable", "LS")
                .annotation(
                    ANNOTATION_RESOURCE_STATUS,
                    json.dumps({"numaNodeResources": [{"node": 1, "resources": {"cpu": "2"}}]}),
                )
                .build()
            ),
            LS_POOL,
            {"cpuset_cpus": "6-7"},
            id="upstream-LS-numa-aware-pool",
        ),
        pytest.param(meta(pod("be").be().build()), LS_POOL, {}, id="upstream-BE-left-to-cpu-suppress"),
        pytest.param(
            meta(pod("plain").qos("Burstable").build()),
            CPUSetRule(LS_POOL.ls_pools, kubelet_static=True),
            {},
            id="upstream-kubelet-static-keeps-its-cpuset",
        ),
    ],
)
def test_cpuset_allocator(p: PodMeta, rule: CPUSetRule, want: dict[str, Any]) -> None:
    assert decide(p, "main", rules=HookRules(GATES, cpuset=rule)) == want


@pytest.mark.parametrize(
    ("p", "quota", "ratio", "want"),
    [
        pytest.param(
            meta(pod("ls").qos("Burstable", "LS").build()),
            50000,
            1.2,
            {"cfs_quota": 41667},
            id="upstream-LS-container-scaled",
        ),
        pytest.param(
            meta(pod("none").qos("Burstable").build()),
            50000,
            1.2,
            {"cfs_quota": 41667},
            id="upstream-QoSNone-counts-as-LS",
        ),
        pytest.param(meta(pod("ls").qos("Burstable", "LS").build()), -1, 1.2, {}, id="upstream-unset-quota-kept"),
        pytest.param(meta(pod("ls").qos("Burstable", "LS").build()), 50000, -1.0, {}, id="upstream-rule-disabled"),
        pytest.param(meta(pod("lsr").qos("Guaranteed", "LSR").build()), 50000, 1.2, {}, id="upstream-LSR-skipped"),
        pytest.param(
            meta(
                pod("none")
                .qos("Guaranteed")
                .annotation(ANNOTATION_RESOURCE_STATUS, json.dumps({"cpuset": "0"}))
                .build()
            ),
            50000,
            1.2,
            {},
            id="upstream-QoSNone-with-cpuset-is-LSR",
        ),
    ],
)
def test_cpu_normalization(p: PodMeta, quota: int, ratio: float, want: dict[str, Any]) -> None:
    assert decide(p, "main", rules=HookRules(GATES, normalization_ratio=ratio), quota=quota) == want


def test_cpu_normalization_reconciler_computes_the_same_container_quota_from_the_spec() -> None:
    ls = meta(
        pod("ls")
        .qos("Burstable", "LS")
        .container("main", limits={"cpu": "500m"})
        .container("side", limits={"cpu": "250m"})
        .build()
    )
    assert normalized_quotas(ls, 1.2) == NormalizedQuotas(pod=62500, containers={"main": 41667, "side": 20834})
    hook = decide(ls, "main", rules=HookRules(GATES, normalization_ratio=1.2), quota=50000)
    assert hook == {"cfs_quota": normalized_quotas(ls, 1.2).containers["main"]}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("annotations", "container", "want"),
    [
        pytest.param({}, "c1", None, id="upstream-no-oom-score-adj-annotations"),
        pytest.param({ANNOTATION_OOM_SCORE_ADJ: "-500"}, "c1", -500, id="upstream-pod-level-default-applied"),
        pytest.param(
            {ANNOTATION_OOM_SCORE_ADJ: "-500", ANNOTATION_OOM_SCORE_ADJ_SPEC: '{"c1": 100}'},
            "c1",
            100,
            id="upstream-container-spec-overrides-pod-level-default",
        ),
        pytest.param(
            {ANNOTATION_OOM_SCORE_ADJ: "-500", ANNOTATION_OOM_SCORE_ADJ_SPEC: '{"c2": 100}'},
            "c1",
            -500,
            id="upstream-container-not-in-spec-falls-back",
        ),
        pytest.param(
            {ANNOTATION_OOM_SCORE_ADJ_SPEC: '{"c2": 100}'},
            "c1",
            None,
            id="upstream-container-not-in-spec-and-no-default",
        ),
    ],
)
def test_oom_score_adj(annotations: dict[str, str], container: str, want: int | None) -> None:
    assert oom_score_adj(annotations, container) == want


@pytest.mark.parametrize(
    ("annotations", "match"),
    [
        pytest.param({ANNOTATION_OOM_SCORE_ADJ_SPEC: "{invalid}"}, "not JSON", id="upstream-invalid-spec-JSON"),
        pytest.param(
            {ANNOTATION_OOM_SCORE_ADJ: "not-a-number"}, "not an integer", id="upstream-invalid-pod-level-default-value"
        ),
        pytest.param({ANNOTATION_OOM_SCORE_ADJ: "1001"}, "outside", id="upstream-out-of-range-skipped"),
        pytest.param({ANNOTATION_OOM_SCORE_ADJ_SPEC: '{"c1": "100"}'}, "integer", id="spec-values-are-json-numbers"),
    ],
)
def test_oom_score_adj_errors_name_the_annotation(annotations: dict[str, str], match: str) -> None:
    with pytest.raises(OOMScoreAdjError, match=match):
        oom_score_adj(annotations, "c1")


def test_a_failing_gate_leaves_the_others_values() -> None:
    """Koordinator runs its hooks with the Ignore policy: a bad oom-score-adj does not cost BatchResource."""
    p = meta(
        pod("be")
        .be()
        .annotation(ANNOTATION_EXTENDED_RESOURCE_SPEC, json.dumps(SPEC))
        .annotation(ANNOTATION_OOM_SCORE_ADJ, "oops")
        .build()
    )
    got = decide(p, "container-0")
    assert got["errors"] == ("OOMScoreAdj: annotation koordinator.sh/oom-score-adj: 'oops' is not an integer",)
    assert (got["cpu_shares"], got["cfs_quota"], got["memory_limit"]) == (512, 50000, 2 * GiB)


HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
LIB = "/usr/local/vgpu/libvgpu.so"
HAMI_MOUNTS = (Mount(LIB, LIB, "bind", ("rbind",)), Mount("/tmp/vgpulock", "/tmp/vgpulock", "bind", ("rbind",)))


def gpu(minor: int, **resources: str) -> dict[str, Any]:
    return {"minor": minor, "resources": {f"koordinator.sh/{k.replace('_', '-')}": v for k, v in resources.items()}}


@pytest.mark.parametrize(
    ("labels", "allocated", "library", "want"),
    [
        pytest.param(
            {},
            {"gpu": [gpu(0, gpu_core="100"), gpu(1, gpu_core="100")]},
            LIB,
            {"env": (("NVIDIA_VISIBLE_DEVICES", "0,1"),)},
            id="upstream-test-normal-gpu-alloc",
        ),
        pytest.param(
            HAMI,
            {"gpu": [gpu(1, gpu_core="50", gpu_memory="16Gi", gpu_memory_ratio="50")]},
            LIB,
            {
                "env": (
                    ("NVIDIA_VISIBLE_DEVICES", "1"),
                    ("CUDA_DEVICE_MEMORY_LIMIT", str(16 * GiB)),
                    ("CUDA_DEVICE_SM_LIMIT", "50"),
                    ("LD_PRELOAD", LIB),
                ),
                "mounts": HAMI_MOUNTS,
            },
            id="upstream-gpu-share-with-HAMi",
        ),
        pytest.param(
            HAMI,
            {"gpu": [gpu(3, gpu_memory="8Gi", gpu_memory_ratio="25")]},
            "/opt/hami/libvgpu.so",
            {
                "env": (
                    ("NVIDIA_VISIBLE_DEVICES", "3"),
                    ("CUDA_DEVICE_MEMORY_LIMIT", str(8 * GiB)),
                    ("LD_PRELOAD", "/opt/hami/libvgpu.so"),
                ),
                "mounts": (
                    Mount("/opt/hami/libvgpu.so", "/opt/hami/libvgpu.so", "bind", ("rbind",)),
                    HAMI_MOUNTS[1],
                ),
            },
            id="hami-no-gpu-core-and-a-library-path-flag",
        ),
        pytest.param(
            HAMI,
            {"gpu": [gpu(0, gpu_core="100", gpu_memory="80Gi", gpu_memory_ratio="100")]},
            LIB,
            {"env": (("NVIDIA_VISIBLE_DEVICES", "0"),)},
            id="hami-whole-gpu-is-not-shared-no-preload",
        ),
        pytest.param(
            {"koordinator.sh/gpu-isolation-provider": "other"},
            {"gpu": [gpu(1, gpu_core="50", gpu_memory="16Gi", gpu_memory_ratio="50")]},
            LIB,
            {"env": (("NVIDIA_VISIBLE_DEVICES", "1"),)},
            id="another-isolation-provider-no-preload",
        ),
        pytest.param({}, {"rdma": [{"minor": 0}]}, LIB, {}, id="upstream-test-empty-gpu-alloc"),
        pytest.param(
            HAMI,
            {"gpu": [gpu(1, gpu_core="50", gpu_memory="16Gi")]},
            LIB,
            {
                "errors": (
                    "GPUEnvInject: annotation scheduling.koordinator.sh/device-allocated: no "
                    "koordinator.sh/gpu-memory-ratio for HAMi-core",
                )
            },
            id="hami-without-memory-ratio-is-an-error",
        ),
        pytest.param(
            HAMI,
            {"gpu": [gpu(1, gpu_core="50", gpu_memory_ratio="50")]},
            LIB,
            {
                "errors": (
                    "GPUEnvInject: annotation scheduling.koordinator.sh/device-allocated: no "
                    "koordinator.sh/gpu-memory for HAMi-core",
                )
            },
            id="hami-shared-without-memory-is-an-error",
        ),
    ],
)
def test_gpu_env_inject(labels: dict[str, str], allocated: dict[str, Any], library: str, want: Any) -> None:
    """Koordinator's ``hooks/gpu/gpu_test.go`` rows, plus the HAMi-core edges; env order is kept."""
    builder = (
        pod("gpu")
        .qos("Burstable", "LS")
        .annotation("scheduling.koordinator.sh/device-allocated", json.dumps(allocated))
    )
    for key, value in labels.items():
        builder.label(key, value)
    rules = HookRules(GATES, hami_core_library=library)
    assert decide(meta(builder.build()), "main", rules=rules) == want


def test_hami_core_values_become_env_and_mounts_of_the_adjustment() -> None:
    values = ContainerResources(env=(("LD_PRELOAD", LIB),), mounts=HAMI_MOUNTS, decided_by={"env": "GPUEnvInject"})
    adjust = to_adjustment(values)
    assert [(e.key, e.value) for e in adjust.env] == [("LD_PRELOAD", LIB)]
    assert [(m.destination, m.source, m.type, list(m.options)) for m in adjust.mounts] == [
        (LIB, LIB, "bind", ["rbind"]),
        ("/tmp/vgpulock", "/tmp/vgpulock", "bind", ["rbind"]),
    ]
    assert not to_adjustment(NONE).mounts


def test_memory_qos_on_cgroup_v2_goes_into_unified_and_not_on_v1() -> None:
    slo = merge_node_slo_spec(
        NodeSLOSpec.model_validate(
            {
                "resourceQOSStrategy": {
                    "lsClass": {
                        "memoryQOS": {
                            "enable": True,
                            "minLimitPercent": 50,
                            "lowLimitPercent": 80,
                            "throttlingPercent": 90,
                        }
                    }
                }
            }
        )
    )
    ls = meta(
        pod("ls").qos("Burstable", "LS").container("main", requests={"memory": "1Gi"}, limits={"memory": "2Gi"}).build()
    )
    v2 = HookRules(GATES, node_slo=slo, cgroup_v2=True, node_memory_allocatable=8 * GiB)
    high = (GiB + GiB * 90 // 100) // 4096 * 4096
    assert decide(ls, "main", rules=v2) == {
        "unified": {"memory.min": str(GiB // 2), "memory.low": str(GiB * 80 // 100), "memory.high": str(high)}
    }
    assert decide(ls, "main", rules=HookRules(GATES, node_slo=slo, cgroup_v2=False)) == {}


def test_adjustment_carries_every_field_a_gate_set() -> None:
    values = ContainerResources(
        cpu_shares=512,
        cfs_quota=-1,
        memory_limit=GiB,
        cpuset_cpus="0-1",
        oom_score_adj=-500,
        env=(("A", "1"),),
        unified={"memory.min": "1"},
        decided_by={"cpu_shares": "x"},
    )
    adjust = to_adjustment(values)
    resources = adjust.linux.resources
    assert (resources.cpu.shares.value, resources.cpu.quota.value, resources.memory.limit.value) == (512, -1, GiB)
    assert resources.cpu.cpus == "0-1" and dict(resources.unified) == {"memory.min": "1"}
    assert adjust.linux.oom_score_adj.value == -500
    assert [(e.key, e.value) for e in adjust.env] == [("A", "1")]
    assert not to_adjustment(NONE).HasField("linux") and not to_adjustment(NONE).env


def test_disabled_gates_decide_nothing() -> None:
    off = FeatureGates.resolve(KOORDLET_FEATURES, {"BatchResource": False, "CPUSetAllocator": False})
    assert decide(be_with_spec(), "container-0", rules=HookRules(off, cpuset=LS_POOL)) == {}
