import pytest

from apis.extension import (
    KubeQOSClass,
    PriorityClass,
    QoSClass,
    kube_qos_class,
    priority_class_by_value,
    priority_class_with_default,
    qos_class_with_default,
    resource_name_for,
)


@pytest.mark.parametrize(
    ("labels", "kube_qos", "want"),
    [
        pytest.param({"koordinator.sh/qosClass": "BE"}, "Guaranteed", QoSClass.BE, id="label-wins"),
        pytest.param({"koordinator.sh/qosClass": "LSE"}, "", QoSClass.LSE, id="label-lse"),
        pytest.param({}, "Guaranteed", QoSClass.LSR, id="guaranteed-is-LSR"),
        pytest.param({}, "Burstable", QoSClass.LS, id="burstable-is-LS"),
        pytest.param({}, "BestEffort", QoSClass.BE, id="besteffort-is-BE"),
        pytest.param({"koordinator.sh/qosClass": "bogus"}, "Burstable", QoSClass.LS, id="unknown-label-ignored"),
        pytest.param({}, "", QoSClass.NONE, id="nothing"),
    ],
)
def test_qos_class_with_default(labels: dict[str, str], kube_qos: str, want: QoSClass) -> None:
    assert qos_class_with_default(labels, kube_qos) is want


@pytest.mark.parametrize(
    ("priority", "want"),
    [
        pytest.param(9000, PriorityClass.PROD, id="prod-low-edge"),
        pytest.param(9999, PriorityClass.PROD, id="prod-high-edge"),
        pytest.param(10000, PriorityClass.NONE, id="above-prod"),
        pytest.param(7500, PriorityClass.MID, id="mid"),
        pytest.param(5999, PriorityClass.BATCH, id="batch-high-edge"),
        pytest.param(3000, PriorityClass.FREE, id="free"),
        pytest.param(4000, PriorityClass.NONE, id="gap"),
        pytest.param(None, PriorityClass.NONE, id="unset"),
    ],
)
def test_priority_class_by_value(priority: int | None, want: PriorityClass) -> None:
    assert priority_class_by_value(priority) is want


@pytest.mark.parametrize(
    ("labels", "priority", "qos", "want"),
    [
        pytest.param(
            {"koordinator.sh/priority-class": "koord-mid"},
            9500,
            QoSClass.LS,
            PriorityClass.MID,
            id="label-wins",
        ),
        pytest.param({}, 5500, QoSClass.LS, PriorityClass.BATCH, id="range"),
        pytest.param({}, 0, QoSClass.LS, PriorityClass.PROD, id="from-qos-LS"),
        pytest.param({}, None, QoSClass.BE, PriorityClass.BATCH, id="from-qos-BE"),
        pytest.param({}, None, QoSClass.NONE, PriorityClass.NONE, id="none"),
    ],
)
def test_priority_class_with_default(
    labels: dict[str, str], priority: int | None, qos: QoSClass, want: PriorityClass
) -> None:
    assert priority_class_with_default(labels, priority, qos) is want


@pytest.mark.parametrize(
    ("containers", "want"),
    [
        pytest.param([({}, {})], KubeQOSClass.BEST_EFFORT, id="besteffort"),
        pytest.param([({"cpu": 1, "memory": 2}, {"cpu": 1, "memory": 2})], KubeQOSClass.GUARANTEED, id="guaranteed"),
        pytest.param([({}, {"cpu": 1, "memory": 2})], KubeQOSClass.GUARANTEED, id="limits-only-guaranteed"),
        pytest.param([({"cpu": 1}, {})], KubeQOSClass.BURSTABLE, id="request-only"),
        pytest.param([({"cpu": 1, "memory": 2}, {"cpu": 2, "memory": 2})], KubeQOSClass.BURSTABLE, id="req-lt-lim"),
    ],
)
def test_kube_qos_class(containers: list[tuple[dict[str, int], dict[str, int]]], want: KubeQOSClass) -> None:
    assert kube_qos_class(containers) is want


def test_resource_name_for() -> None:
    got = [
        resource_name_for(pc, r)
        for pc in (PriorityClass.BATCH, PriorityClass.MID, PriorityClass.PROD)
        for r in ("cpu", "memory")
    ]
    assert got == [
        "kubernetes.io/batch-cpu",
        "kubernetes.io/batch-memory",
        "kubernetes.io/mid-cpu",
        "kubernetes.io/mid-memory",
        "cpu",
        "memory",
    ]
