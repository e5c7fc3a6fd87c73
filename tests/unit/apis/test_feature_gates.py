"""``--feature-gates`` on koord-scheduler: kube-scheduler v1.35.8's gate names and defaults plus Koordinator's
scheduler gates; unknown gates, locked gates and unimplemented values are refused naming the gate."""

from __future__ import annotations

import pytest

from apis.feature_gates import (
    DEFAULT_FEATURE_GATES,
    FeatureGateError,
    SchedulerFeatureGates,
    parse_feature_gates_flag,
)
from koord_scheduler.app.cli import new_scheduler_command


@pytest.mark.parametrize(
    ("gate", "want"),
    [
        pytest.param("DynamicResourceAllocation", True, id="dra-ga-locked"),
        pytest.param("DRAAdminAccess", True, id="dra-admin-access-beta"),
        pytest.param("DRAPrioritizedList", True, id="dra-prioritized-list-beta"),
        pytest.param("DRASchedulerFilterTimeout", True, id="dra-filter-timeout-beta"),
        pytest.param("DRAPartitionableDevices", False, id="dra-partitionable-alpha"),
        pytest.param("DRADeviceTaints", False, id="dra-device-taints-alpha"),
        pytest.param("DRAConsumableCapacity", False, id="dra-consumable-capacity-alpha"),
        pytest.param("InPlacePodVerticalScaling", True, id="in-place-resize-ga"),
        pytest.param("NominatedNodeNameForExpectation", True, id="nnn-for-expectation-beta"),
        pytest.param("SchedulerAsyncAPICalls", False, id="async-api-calls-off"),
        pytest.param("DynamicSchedulerCheck", True, id="koordinator-default-on"),
        pytest.param("LazyReservationRestore", False, id="koordinator-default-off"),
    ],
)
def test_defaults_are_v1_35s(gate: str, want: bool) -> None:
    assert DEFAULT_FEATURE_GATES.enabled(gate) is want


def test_implemented_gates_switch_both_ways() -> None:
    gates = SchedulerFeatureGates.resolve(
        parse_feature_gates_flag("DRAPrioritizedList=false, DRADeviceTaints=true,DRAAdminAccess=false")
    )
    assert (gates.enabled("DRAPrioritizedList"), gates.enabled("DRADeviceTaints"), gates.enabled("DRAAdminAccess")) == (
        False,
        True,
        False,
    )


def test_gates_the_scheduler_never_reads_are_accepted() -> None:
    gates = SchedulerFeatureGates.resolve({"KubeletPodResourcesDynamicResources": "false"})
    assert not gates.enabled("KubeletPodResourcesDynamicResources")


@pytest.mark.parametrize(
    ("flag", "want"),
    [
        pytest.param("NoSuchGate=true", "unrecognized feature gate: NoSuchGate", id="unknown"),
        pytest.param("DRAAdminAccess", "missing bool value for DRAAdminAccess", id="no-value"),
        pytest.param("DRAAdminAccess=yes", "invalid value of DRAAdminAccess=yes", id="not-bool"),
        pytest.param(
            "DynamicResourceAllocation=false",
            "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true",
            id="locked",
        ),
        pytest.param(
            "DRAPartitionableDevices=true",
            "feature gate DRAPartitionableDevices=true is not implemented by koord-scheduler",
            id="unimplemented",
        ),
        pytest.param(
            "LazyReservationRestore=true",
            "feature gate LazyReservationRestore=true is not implemented by koord-scheduler",
            id="koordinator-unimplemented",
        ),
    ],
)
def test_refused_naming_the_gate(flag: str, want: str) -> None:
    with pytest.raises(FeatureGateError) as err:
        SchedulerFeatureGates.resolve(parse_feature_gates_flag(flag))
    assert str(err.value).startswith(want)


def test_simulate_refuses_an_unknown_gate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        new_scheduler_command().run(["simulate", "--feature-gates", "NoSuchGate=true"])
    assert exit_info.value.code == 2
    assert "argument --feature-gates: unrecognized feature gate: NoSuchGate" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("gate", "want"),
    [
        pytest.param("PodMutatingWebhook", True, id="pod-mutating-webhook-beta"),
        pytest.param("PodValidatingWebhook", True, id="pod-validating-webhook-beta"),
        pytest.param("ElasticQuotaMutatingWebhook", True, id="quota-mutating-webhook-beta"),
        pytest.param("ElasticQuotaValidatingWebhook", True, id="quota-validating-webhook-beta"),
        pytest.param("ColocationProfileSkipValidatingPriority", False, id="skip-validating-priority-alpha"),
        pytest.param("ElasticQuotaEnableUpdateResourceKey", False, id="update-resource-key-alpha"),
        pytest.param("ColocationProfileController", False, id="colocation-profile-controller-alpha"),
        pytest.param("NodeMutatingWebhook", False, id="node-webhook-alpha"),
    ],
)
def test_koord_manager_gates_have_koordinators_defaults(gate: str, want: bool) -> None:
    assert DEFAULT_FEATURE_GATES.enabled(gate) is want


def test_the_webhooks_and_colocationprofile_gates_switch_both_ways() -> None:
    flag = (
        "PodValidatingWebhook=false,ElasticQuotaValidatingWebhook=false,ColocationProfileSkipValidatingPriority=true,"
        "ElasticQuotaEnableUpdateResourceKey=true,ColocationProfileController=true,PodMutatingWebhook=false,"
        "ElasticQuotaMutatingWebhook=false"
    )
    gates = SchedulerFeatureGates.resolve(parse_feature_gates_flag(flag))
    assert [gates.enabled(name) for name in parse_feature_gates_flag(flag)] == [
        False,
        False,
        True,
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "gate",
    [
        "NodeMutatingWebhook",
        "ColocationProfileSkipMutatingResources",
        "EnableQuotaAdmission",
        "ValidatePodDeviceResource",
        "SupportParentQuotaSubmitPod",
    ],
)
def test_koord_manager_gates_pykoord_does_not_implement_are_refused(gate: str) -> None:
    with pytest.raises(FeatureGateError) as err:
        SchedulerFeatureGates.resolve({gate: "true"})
    assert str(err.value).startswith(f"feature gate {gate}=true is not implemented by koord-scheduler")
