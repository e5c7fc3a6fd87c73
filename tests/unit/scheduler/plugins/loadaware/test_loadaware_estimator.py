"""LoadAwareScheduling estimator (Koordinator pkg/scheduler/plugins/loadaware/estimator): hand-computed
estimates; ids name the rule."""

from __future__ import annotations

import pytest

from apis.core.types import Pod
from koord_scheduler.plugins.loadaware.estimator import (
    ANNOTATION_ESTIMATED_SCALING_FACTORS,
    estimate_pod,
    estimate_resource,
    go_round,
    is_daemonset_pod,
    is_reserve_pod,
)
from tests.builders import make_pod

MI = 1024**2
GI = 1024**3
RESOURCES = ("cpu", "memory")
FACTORS = {"cpu": 85, "memory": 70}
BATCH = {"koordinator.sh/priority-class": "koord-batch"}
MID = {"koordinator.sh/priority-class": "koord-mid"}


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod("p").req(cpu="1", memory="1Gi").build(), (850, 751_619_277), id="request-times-factor"),
        pytest.param(
            make_pod("p").req(cpu="1").limit(cpu="2").build(), (1700, 200 * MI), id="limit-above-request-uses-limit"
        ),
        pytest.param(make_pod("p").build(), (250, 200 * MI), id="zero-request-defaults-250m-200Mi"),
        pytest.param(make_pod("p").req(cpu="10m").build(), (9, 200 * MI), id="go-round-half-away-from-zero"),
        pytest.param(
            make_pod("p")
            .labels(BATCH)
            .req({"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"})
            .build(),
            (850, 751_619_277),
            id="batch-pod-estimates-batch-resources",
        ),
        pytest.param(make_pod("p").labels(BATCH).build(), (250, 200 * MI), id="batch-pod-zero-request-defaults"),
        pytest.param(
            make_pod("p").labels(BATCH).req(cpu="2").build(), (250, 200 * MI), id="batch-pod-ignores-native-cpu"
        ),
        pytest.param(make_pod("p").labels(MID).build(), (0, 0), id="mid-pod-zero-request-estimates-zero"),
        pytest.param(
            make_pod("p").labels(MID).req({"kubernetes.io/mid-cpu": "2000"}).build(), (1700, 0), id="mid-pod-mid-cpu"
        ),
    ],
)
def test_estimate_pod(pod: Pod, want: tuple[int, int]) -> None:
    assert estimate_pod(pod, RESOURCES, FACTORS) == want


def test_estimate_capped_at_limit() -> None:
    # Only reachable with request > limit (which the API server rejects) or a factor over 100.
    assert estimate_resource({"cpu": 2000}, {"cpu": 1000}, "cpu", 100) == 1000


def test_resource_without_factor_estimates_zero() -> None:
    pod = make_pod("p").req(cpu="1", memory="1Gi").build()
    assert estimate_pod(pod, ("cpu", "ephemeral-storage", "memory"), FACTORS) == (850, 0, 751_619_277)


@pytest.mark.parametrize(
    ("allow", "want"),
    [
        pytest.param(True, (1000, 751_619_277), id="annotation-honoured"),
        pytest.param(False, (850, 751_619_277), id="annotation-ignored"),
    ],
)
def test_custom_scaling_factors(allow: bool, want: tuple[int, int]) -> None:
    pod = (
        make_pod("p")
        .req(cpu="1", memory="1Gi")
        .annotation(ANNOTATION_ESTIMATED_SCALING_FACTORS, '{"cpu": 100}')
        .build()
    )
    assert estimate_pod(pod, RESOURCES, FACTORS, allow_customize=allow) == want


@pytest.mark.parametrize(
    ("x", "want"),
    [(0.5, 1), (1.5, 2), (2.5, 3), (2.4999, 2), (-0.5, -1), (0.49999999999999994, 0), (0.0, 0)],
)
def test_go_round(x: float, want: int) -> None:
    assert go_round(x) == want


def test_pod_kinds() -> None:
    assert is_daemonset_pod(make_pod("p").owner("DaemonSet", "ds").build())
    assert not is_daemonset_pod(make_pod("p").owner("ReplicaSet", "rs").build())
    assert is_reserve_pod(make_pod("p").annotation("scheduling.koordinator.sh/reserve-pod", "true").build())
