"""The typed ``extenders[]`` of KubeSchedulerConfiguration: wire names, defaults, refusals."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from apis.config import ConfigError, parse_scheduler_config
from apis.config.extender import DEFAULT_EXTENDER_TIMEOUT_SECONDS, Extender, ignored_extender_resources
from koord_scheduler.extenders.build import with_ignored_extender_resources


def config(*extenders: dict[str, Any], **fields: Any) -> Any:
    return parse_scheduler_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "extenders": list(extenders),
            **fields,
        },
        source="test",
    )


def test_wire_names_and_defaults() -> None:
    ca = b"-----BEGIN CERTIFICATE-----\n"
    [ext] = config(
        {
            "urlPrefix": "https://e:8443/x",
            "filterVerb": "f",
            "prioritizeVerb": "p",
            "weight": 3,
            "bindVerb": "b",
            "preemptVerb": "pre",
            "enableHTTPS": True,
            "httpTimeout": "1500ms",
            "nodeCacheCapable": True,
            "ignorable": True,
            "tlsConfig": {"serverName": "e", "caData": base64.b64encode(ca).decode()},
            "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
        }
    ).extenders
    assert (ext.url_prefix, ext.enable_https, ext.timeout_seconds, ext.weight) == ("https://e:8443/x", True, 1.5, 3)
    assert ext.tls_config is not None and ext.tls_config.ca_data == ca and ext.tls_config.server_name == "e"
    assert Extender(url_prefix="http://e").timeout_seconds == DEFAULT_EXTENDER_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    ("extender", "want"),
    [
        pytest.param({"urlPrefix": "http://e", "enableHttps": True}, "enableHttps", id="wire-name-is-enableHTTPS"),
        pytest.param({"urlPrefix": "http://e", "tlsConfig": {"caData": "not base64!"}}, "caData", id="bad-base64"),
        pytest.param({"urlPrefix": "http://e", "httpTimeout": "5"}, "httpTimeout", id="duration-without-unit"),
        pytest.param(
            {"urlPrefix": "http://e", "prioritizeVerb": "p"},
            "must have a positive weight",
            id="prioritizer-without-weight",
        ),
    ],
)
def test_refused(extender: dict[str, Any], want: str) -> None:
    with pytest.raises(ConfigError, match=want):
        config(extender)


@pytest.mark.parametrize(
    ("plugin_config", "want_fit_args"),
    [
        pytest.param([], {"ignoredResources": ["example.com/gpu"]}, id="added-when-absent"),
        pytest.param(
            [
                {
                    "name": "NodeResourcesFit",
                    "args": {"ignoredResources": ["example.com/other"], "ignoredResourceGroups": ["example.org"]},
                }
            ],
            {"ignoredResources": ["example.com/gpu"], "ignoredResourceGroups": ["example.org"]},
            id="replaces-the-profile-list",
        ),
    ],
)
def test_ignored_by_scheduler_becomes_fit_args(plugin_config: list[Any], want_fit_args: dict[str, Any]) -> None:
    cfg = config(
        {
            "urlPrefix": "http://e",
            "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}, {"name": "example.com/fpga"}],
        },
        profiles=[{"schedulerName": "s", "pluginConfig": plugin_config}],
    )
    assert ignored_extender_resources(cfg.extenders) == ("example.com/gpu",)
    [profile] = with_ignored_extender_resources(cfg).profiles
    fit = profile.plugin_config_for("NodeResourcesFit")
    assert fit is not None and fit.args == want_fit_args
