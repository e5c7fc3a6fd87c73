"""CPU amplification (``node.koordinator.sh/resource-amplification-ratio``): bound CPUs count amplified
(Koordinator ``nodenumaresource`` ``filterAmplifiedCPUs`` / ``scoreWithAmplifiedCPUs``)."""

from __future__ import annotations

import numpy as np
import pytest

from apis.config.numa_args import NodeNUMAResourceArgs
from apis.extension.numa import CPUExclusivePolicy, parse_cpuset
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.nodenumaresource import amplification as amp
from koord_scheduler.plugins.nodenumaresource.cache import Holding
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology
from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.builders import make_node, make_pod
from tests.fwtest import make_snapshot
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import RecordingCluster, nrt_object

RATIO = amp.ANNOTATION_AMPLIFICATION_RATIO


@pytest.mark.parametrize(
    ("amount", "ratio", "want"),
    [
        pytest.param(4000, 1.5, 6000, id="one-and-a-half"),
        pytest.param(1000, 1.33, 1330, id="two-decimals"),
        pytest.param(3, 1.5, 5, id="rounds-up"),
        pytest.param(4000, 1.0, 4000, id="ratio-one-unchanged"),
        pytest.param(4000, -1.0, 4000, id="unset-unchanged"),
        pytest.param(0, 2.0, 0, id="zero"),
    ],
)
def test_amplify(amount: int, ratio: float, want: int) -> None:
    assert amp.amplify(amount, ratio) == want


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, -1.0, id="absent"),
        pytest.param({RATIO: '{"cpu": 1.5}'}, 1.5, id="cpu"),
        pytest.param({RATIO: '{"memory": 2}'}, -1.0, id="memory-only"),
        pytest.param({RATIO: '{"cpu": 2, "memory": 1.2}'}, 2.0, id="integer-ratio"),
        pytest.param({RATIO: "1.5"}, "error", id="not-an-object"),
        pytest.param({RATIO: '{"cpu": "1.5"}'}, "error", id="string-ratio"),
        pytest.param({RATIO: "{"}, "error", id="bad-json"),
    ],
)
def test_cpu_ratio(annotations: dict[str, str], want: float | str) -> None:
    try:
        got: float | str = amp.cpu_ratio(annotations)
    except ValueError:
        got = "error"
    assert got == want


@pytest.mark.parametrize(
    ("pod", "bind", "given_out", "ratio", "want"),
    [
        # 16 real CPUs at 1.5: 24 allocatable; pods request 20, 4 of them bound (count 6): 22 given out.
        pytest.param(2000, False, (20000, 4000), 1.5, True, id="shared-pod-fits-exactly"),
        pytest.param(3000, False, (20000, 4000), 1.5, False, id="shared-pod-over-by-one"),
        pytest.param(2000, True, (20000, 4000), 1.5, False, id="bound-pod-counts-amplified"),
        pytest.param(1000, True, (20000, 4000), 1.5, True, id="bound-pod-1-needs-1.5"),
        pytest.param(3000, False, (20000, 0), 1.5, True, id="no-bound-cpus-plain-sum"),
        pytest.param(2000, True, (3000, 4000), 1.5, True, id="requests-below-bound-not-adjusted"),
        pytest.param(9000, True, (20000, 4000), 1.0, True, id="no-ratio-no-check"),
        pytest.param(0, True, (24000, 4000), 1.5, True, id="no-cpu-request"),
    ],
)
def test_fits_amplified(pod: int, bind: bool, given_out: tuple[int, int], ratio: float, want: bool) -> None:
    requested, bound = given_out
    got = amp.fits_amplified(
        pod, bind, allocatable_milli=24000, requested_milli=requested, bound_milli=bound, ratio=ratio
    )
    assert got is want


@pytest.mark.parametrize(
    ("requested", "bound", "ratio", "want"),
    [
        pytest.param(20000, 4000, 1.5, 22000, id="bound-amplified"),
        pytest.param(20000, 0, 1.5, 20000, id="nothing-bound"),
        pytest.param(20000, 4000, 1.0, 20000, id="no-ratio"),
    ],
)
def test_amplified_requested(requested: int, bound: int, ratio: float, want: int) -> None:
    assert amp.amplified_requested(requested, bound, ratio) == want


def plugin_on(annotation: str, requested_cpu: str = "20") -> tuple[NodeNUMAResource, object]:
    node = make_node("n1").allocatable(cpu="24", memory="64Gi", pods="110").annotation(RATIO, annotation).build()
    running = make_pod("running").req(cpu=requested_cpu).node("n1").build()
    snap = make_snapshot([node], [running])
    plugin = NodeNUMAResource(NodeNUMAResourceArgs(), snap, RecordingCluster())  # type: ignore[arg-type]
    plugin.on_topology(EventType.ADDED, None, parse_node_resource_topology(nrt_object("n1")))
    plugin.allocations.hold("n1", "default/lsr", Holding(parse_cpuset("0-1,8-9"), CPUExclusivePolicy.NONE, "x"))
    return plugin, snap


@pytest.mark.parametrize(
    ("annotation", "qos", "cpu", "want"),
    [
        pytest.param('{"cpu": 1.5}', "LS", "2", "", id="ls-fits"),
        pytest.param('{"cpu": 1.5}', "LS", "3", "Insufficient amplified cpu", id="ls-sees-bound-cpus-amplified"),
        pytest.param('{"cpu": 1.5}', "LSR", "2", "Insufficient amplified cpu", id="lsr-asks-amplified"),
        pytest.param('{"cpu": 1.5}', "LSR", "1", "", id="lsr-one-cpu-fits"),
        pytest.param('{"cpu": 1}', "LSR", "4", "", id="ratio-one-is-no-amplification"),
        pytest.param("[1.5]", "LS", "1", "node(s) invalid CPU amplification ratio", id="malformed-ratio"),
    ],
)
def test_filter_on_an_amplified_node(annotation: str, qos: str, cpu: str, want: str) -> None:
    plugin, snap = plugin_on(annotation)
    pod = make_pod("p").req(cpu=cpu, memory="1Gi").label("koordinator.sh/qosClass", qos).build()
    state = CycleState()
    _, pre = plugin.pre_filter(state, pod, snap)  # type: ignore[arg-type]
    assert pre.is_success, pre
    status = plugin.filter(state, pod, snap.node_info("n1"))  # type: ignore[attr-defined]
    assert status.message == want if want else status.is_success, status


def test_score_counts_bound_cpus_amplified() -> None:
    plugin, _ = plugin_on('{"cpu": 2}', requested_cpu="8")
    plain, _ = plugin_on('{"cpu": 1}', requested_cpu="8")
    pod = make_pod("p").req(cpu="2", memory="1Gi").label("koordinator.sh/qosClass", "LS").build()
    scores = []
    for p in (plugin, plain):
        state = CycleState()
        p.pre_filter(state, pod, p._snapshot)
        p.pre_score(state, pod, p._snapshot, None)  # type: ignore[arg-type]
        scores.append(p.score(state, pod, p._snapshot.node_info("n1")))  # type: ignore[arg-type]
    # LeastAllocated over cpu and memory: cpu (8 + 4 amplified extra + 2) / 24 against (8 + 2) / 24.
    cpu_amplified, cpu_plain = (24000 - 14000) * 100 // 24000, (24000 - 10000) * 100 // 24000
    memory = (64 * 1024 - 1024) * 100 // (64 * 1024)
    assert scores == [(cpu_amplified + memory) // 2, (cpu_plain + memory) // 2]


def test_an_lsr_pods_score_sees_a_node_amplified_since_the_last_prefilter() -> None:
    # The set of special nodes is refreshed at every PreFilter, not only for pods without bound CPUs:
    # an LSR pod scheduled right after a node gained its ratio scores that node amplified.
    plain = make_node("n1").allocatable(cpu="24", memory="64Gi", pods="110").build()
    running = make_pod("running").req(cpu="8").node("n1").build()
    snap = make_snapshot([plain], [running])
    plugin = NodeNUMAResource(NodeNUMAResourceArgs(), snap, RecordingCluster())  # type: ignore[arg-type]
    plugin.on_topology(EventType.ADDED, None, parse_node_resource_topology(nrt_object("n1")))
    plugin.allocations.hold("n1", "default/lsr", Holding(parse_cpuset("0-1,8-9"), CPUExclusivePolicy.NONE, "x"))
    ls = make_pod("ls").req(cpu="2", memory="1Gi").label("koordinator.sh/qosClass", "LS").build()
    plugin.pre_filter(CycleState(), ls, snap)  # type: ignore[arg-type]
    snap.upsert_node(
        make_node("n1").allocatable(cpu="24", memory="64Gi", pods="110").annotation(RATIO, '{"cpu": 2}').build()
    )
    lsr = make_pod("lsr").req(cpu="2", memory="1Gi").label("koordinator.sh/qosClass", "LSR").build()
    state = CycleState()
    _, pre = plugin.pre_filter(state, lsr, snap)  # type: ignore[arg-type]
    assert pre.is_success, pre
    info = snap.node_info("n1")
    assert info is not None
    positions = np.array([info.position], dtype=np.int64)
    plugin.pre_score(state, lsr, snap, positions)  # type: ignore[arg-type]
    score = int(plugin.score_nodes(state, lsr, snap, positions)[0])  # type: ignore[arg-type]
    # LeastAllocated over cpu and memory: cpu (8 + 4 amplified extra + 2) / 24, as an amplified node scores.
    cpu_amplified = (24000 - 14000) * 100 // 24000
    memory = (64 * 1024 - 1024) * 100 // (64 * 1024)
    assert score == (cpu_amplified + memory) // 2
