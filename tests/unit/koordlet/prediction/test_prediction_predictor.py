"""The prod reclaimable and node peak predictors: Koordinator's ``peak_predictor_test.go`` facts.

The Koordinator tests mock the predict server; here the predictions are a dict by model UID. Where its
mock answers a missing node-level model with an empty result, the table gives that model a zero
prediction (the real server always has one after its first training step).
"""

from __future__ import annotations

import pytest

from apis.extension import KubeQOSClass, PriorityClass, QoSClass
from koordlet.prediction.predictor import (
    Amounts,
    PredictedProd,
    node_allocatable,
    pod_predictor,
    predict_prod,
    priority_predictor,
)
from koordlet.prediction.server import Prediction, node_item_uid
from koordlet.statesinformer.pods import ContainerMeta, PodMeta

MI, GI = 1 << 20, 1 << 30
NOW = 1_700_000_000.0
HOUR = 3600.0


def prediction(p95: tuple[int, int], p98: tuple[int, int]) -> Prediction:
    return Prediction({"p95": p95, "p98": p98})


ZERO = prediction((0, 0), (0, 0))
SYS = prediction((300, 512 * MI), (500, 512 * MI))
PROD = prediction((1000, GI), (1200, GI))
POD = prediction((500, 768 * MI), (1000, GI))


def pod(
    uid: str, cpu: int, memory: int, *, age: float, priority: PriorityClass = PriorityClass.PROD, deleting: bool = False
) -> PodMeta:
    return PodMeta(
        uid=uid,
        namespace="ns",
        name=uid,
        kube_qos=KubeQOSClass.BURSTABLE,
        qos=QoSClass.LS,
        priority_class=priority,
        priority=9000,
        cgroup_dir="",
        phase="Running",
        created=NOW - age,
        deleting=deleting,
        containers=(ContainerMeta("c", None, {"cpu": cpu, "memory": memory}, {}),),
    )


COLD = pod("pod-1-uid", 1000, GI, age=60)
NORMAL = pod("pod-2-uid", 2000, 2 * GI, age=2 * HOUR)
DELETING = pod("pod-3-uid", 2000, 2 * GI, age=2 * HOUR, priority=PriorityClass.NONE, deleting=True)
PREDICTIONS = {
    node_item_uid("koord-prod"): PROD,
    node_item_uid("koord-batch"): ZERO,
    node_item_uid(""): ZERO,
    node_item_uid("sys"): SYS,
    "pod-1-uid": POD,
    "pod-2-uid": POD,
    "pod-3-uid": ZERO,
}
POD_PEAK_MEMORY = int(1.1 * GI)
PRIORITY_PEAK_MEMORY = int(1.1 * 1536 * MI)


@pytest.mark.parametrize(
    ("allocatable", "want_pod", "want_priority"),
    [
        pytest.param(
            Amounts(3000, 3 * GI),
            Amounts(2000 - 550, 2 * GI - POD_PEAK_MEMORY),
            Amounts(3000 - 1430, 3 * GI - PRIORITY_PEAK_MEMORY),
            id="node-allocatable-equals-requests",
        ),
        pytest.param(
            Amounts(8000, 8 * GI),
            Amounts(2000 - 550, 2 * GI - POD_PEAK_MEMORY),
            Amounts(3000 - 1430, 3 * GI - PRIORITY_PEAK_MEMORY),
            id="node-allocatable-above-requests",
        ),
        pytest.param(Amounts(1000, GI), Amounts(1000 - 550, 0), Amounts(0, 0), id="node-allocatable-below-requests"),
    ],
)
def test_prod_reclaimable(allocatable: Amounts, want_pod: Amounts, want_priority: Amounts) -> None:
    pods = [COLD, NORMAL, DELETING]
    by_pod = pod_predictor(pods, PREDICTIONS.get, allocatable, margin_percent=10, cold_start=HOUR, now=NOW)
    by_priority = priority_predictor(pods, PREDICTIONS.get, allocatable, margin_percent=10)
    assert by_priority is not None
    assert (by_pod.reclaimable, by_priority.reclaimable) == (want_pod, want_priority)
    got = predict_prod(pods, PREDICTIONS.get, allocatable, margin_percent=10, cold_start=HOUR, now=NOW)
    assert got == PredictedProd(want_pod.min(want_priority), by_pod.peak.max(by_priority.peak))


def test_pod_predictor_skips_batch_and_deleted_pods() -> None:
    """``TestPodReclaimablePredictor``: every pod predicted p95 500m / p98 768Mi."""
    batch = pod("pod-4-uid", 2000, 2 * GI, age=2 * HOUR, priority=PriorityClass.BATCH)
    deleting = pod("pod-3-uid", 2000, 2 * GI, age=2 * HOUR, deleting=True)
    every = prediction((500, 512 * MI), (800, 768 * MI))
    peak_memory = int(1.1 * 768 * MI)
    for allocatable, want in (
        (Amounts(3000, 3 * GI), Amounts(2000 - 550, 2 * GI - peak_memory)),
        (Amounts(1000, GI), Amounts(1000 - 550, GI - peak_memory)),
    ):
        got = pod_predictor(
            [COLD, NORMAL, deleting, batch], lambda _: every, allocatable, margin_percent=10, cold_start=HOUR, now=NOW
        )
        assert got.reclaimable == want


def test_pod_peak_counts_unpredicted_requests() -> None:
    """HEAD's ``TestPodReclaimablePredictor_GetPeak``: cold start and failed predictions count their
    requests as peak."""
    failed = pod("pod-predict-failed-uid", 500, 512 * MI, age=2 * HOUR)
    got = pod_predictor(
        [COLD, NORMAL, failed],
        {"pod-2-uid": prediction((500, 512 * MI), (800, 768 * MI))}.get,
        Amounts(10_000, 10 * GI),
        margin_percent=10,
        cold_start=HOUR,
        now=NOW,
    )
    assert got.peak == Amounts(550 + 1000 + 500, int(1.1 * 768 * MI) + GI + 512 * MI)


def test_priority_predictor_without_margin() -> None:
    """``Test_priorityReclaimablePredictor``: a prod pod (1000m, 2Gi), a batch pod, margin 0."""
    prod_pod = pod("pod-1-uid", 1000, 2 * GI, age=60)
    batch_pod = pod("pod-2-uid", 0, 0, age=2 * HOUR, priority=PriorityClass.BATCH)
    predictions = {
        node_item_uid("sys"): SYS,
        node_item_uid(""): ZERO,
        node_item_uid("koord-prod"): prediction((500, 768 * MI), (800, GI)),
    }
    for allocatable, want in ((Amounts(3000, 3 * GI), Amounts(200, 512 * MI)), (Amounts(900, GI), Amounts(100, 0))):
        got = priority_predictor([prod_pod, batch_pod], predictions.get, allocatable, margin_percent=0)
        assert got is not None and got.reclaimable == want
        assert got.peak == Amounts(800, 1536 * MI)


def test_no_result_before_the_node_level_models_exist() -> None:
    assert (
        predict_prod(
            [NORMAL], {"pod-2-uid": POD}.get, Amounts(3000, 3 * GI), margin_percent=10, cold_start=HOUR, now=NOW
        )
        is None
    )


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, Amounts(4000, 8 * GI), id="status-allocatable"),
        pytest.param(
            {"node.koordinator.sh/raw-allocatable": '{"cpu": "2", "memory": "4Gi"}'},
            Amounts(2000, 4 * GI),
            id="raw-allocatable-annotation-wins",
        ),
        pytest.param(
            {"node.koordinator.sh/raw-allocatable": "{bad"}, Amounts(4000, 8 * GI), id="malformed-annotation-ignored"
        ),
    ],
)
def test_node_allocatable(annotations: dict[str, str], want: Amounts) -> None:
    assert node_allocatable({"cpu": 4000, "memory": 8 * GI}, annotations) == want
