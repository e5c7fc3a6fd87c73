"""ElasticQuotaArgs: Koordinator's defaults; unimplemented arguments refused, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config.elasticquota_args import MAX_INT64_DIV_5, ElasticQuotaArgs
from apis.config.errors import ConfigError
from apis.config.plugin_args import IN_TREE_ARGS, decode_args


def decode(raw: dict[str, Any]) -> ElasticQuotaArgs:
    args = decode_args("ElasticQuota", raw, IN_TREE_ARGS)
    assert isinstance(args, ElasticQuotaArgs)
    return args


def test_defaults_are_koordinators() -> None:
    args = decode({"kind": "ElasticQuotaArgs", "apiVersion": "kubescheduler.config.k8s.io/v1"})
    assert (
        args.enable_runtime_quota,
        args.enable_check_parent_quota,
        args.enable_min_quota_scale,
        args.disable_default_quota_preemption,
        args.monitor_all_quotas,
        args.quota_group_namespace,
        args.delay_evict_time,
        args.revoke_pod_interval,
    ) == (True, False, True, True, False, "koordinator-system", 120.0, 1.0)
    assert args.builtin_max("default") == {"cpu": MAX_INT64_DIV_5, "memory": MAX_INT64_DIV_5}


def test_chart_args_load() -> None:
    assert decode({"quotaGroupNamespace": "koordinator-system"}).quota_group_namespace == "koordinator-system"


def test_revoke_controller_args_load() -> None:
    args = decode({"monitorAllQuotas": True, "delayEvictTime": "30s", "revokePodInterval": "2s"})
    assert (args.monitor_all_quotas, args.delay_evict_time, args.revoke_pod_interval) == (True, 30.0, 2.0)


@pytest.mark.parametrize(
    ("raw", "want_errors"),
    [
        pytest.param(
            {"hookPlugins": [{"key": "x"}]},
            ["args.hookPlugins: Invalid value: 1: quota hook plugins are not implemented"],
            id="hook-plugins-refused",
        ),
        pytest.param(
            {"defaultQuotaGroupMax": {"cpu": "-1"}},
            ['args.defaultQuotaGroupMax: Invalid value: {"cpu":"-1"}: cpu: "-1" must be greater than or equal to 0'],
            id="negative-max",
        ),
        pytest.param(
            {"quotaGroupNamespace": ""},
            ['args.quotaGroupNamespace: Invalid value: "": must not be empty'],
            id="empty-namespace",
        ),
    ],
)
def test_bad_args(raw: dict[str, Any], want_errors: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        decode(raw)
    assert [str(e) for e in caught.value.errors] == want_errors
