"""CoschedulingArgs: Koordinator's defaults; validation messages; unimplemented features refused, job
preemption accepted."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config import IN_TREE_ARGS, ConfigError, CoschedulingArgs, decode_args


def test_defaults_are_koordinators() -> None:
    args = decode_args("Coscheduling", None, IN_TREE_ARGS)
    assert isinstance(args, CoschedulingArgs)
    got = (
        args.default_timeout,
        args.controller_workers,
        args.skip_check_schedule_cycle,
        args.enable_preemption,
        args.aware_network_topology,
        args.default_match_policy,
    )
    assert got == (600.0, 1, False, False, False, "once-satisfied")


def test_wire_form_decodes() -> None:
    raw = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "CoschedulingArgs",
        "defaultTimeout": "30s",
        "controllerWorkers": 1,
        "awareNetworkTopology": True,
        "defaultMatchPolicy": "waiting-and-running",
    }
    args = decode_args("Coscheduling", raw, IN_TREE_ARGS)
    assert isinstance(args, CoschedulingArgs)
    assert (args.default_timeout, args.controller_workers, args.aware_network_topology, args.default_match_policy) == (
        30.0,
        1,
        True,
        "waiting-and-running",
    )


def test_job_preemption_is_accepted() -> None:
    args = decode_args("Coscheduling", {"enablePreemption": True}, IN_TREE_ARGS)
    assert isinstance(args, CoschedulingArgs)
    assert args.enable_preemption is True


NEGATIVE = "args.defaultTimeout: Invalid value: -1: coeSchedulingArgs DefaultTimeoutSeconds invalid"
NO_WORKERS = "args.controllerWorkers: Invalid value: 0: coeSchedulingArgs ControllerWorkers invalid"
BAD_POLICY = (
    'args.defaultMatchPolicy: Unsupported value: "sometimes": supported values: "once-satisfied", "only-waiting", '
    '"waiting-and-running"'
)


@pytest.mark.parametrize(
    ("raw", "want_errors"),
    [
        pytest.param({"defaultTimeout": "-1s"}, [NEGATIVE], id="negative-timeout"),
        pytest.param({"controllerWorkers": 0}, [NO_WORKERS], id="no-workers"),
        pytest.param({"defaultMatchPolicy": "sometimes"}, [BAD_POLICY], id="bad-policy"),
        pytest.param(
            {"skipCheckScheduleCycle": True},
            [
                "args.skipCheckScheduleCycle: Forbidden: deprecated upstream "
                "and has no effect (gang rounds replaced schedule cycles); "
                "remove it"
            ],
            id="skip-check-refused",
        ),
    ],
)
def test_bad_args(raw: dict[str, Any], want_errors: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        decode_args("Coscheduling", raw, IN_TREE_ARGS)
    assert [str(e) for e in caught.value.errors] == want_errors
