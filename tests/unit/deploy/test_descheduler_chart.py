"""The chart's koord-descheduler: off by default; with descheduler.enabled a Deployment of koord-scheduler
--scheduling=false running the migration and descheduler controllers on a Lease of its own, whose
arguments koord-scheduler accepts and whose DeschedulerConfiguration loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from apis.config.descheduler import parse_descheduler_config
from koord_scheduler.app.serve import _options, _parser
from tests.helmchart import KOORDINATOR_VALUES, find, objects, template

Docs = list[dict[str, Any]]


def lease_names(docs: Docs) -> list[str]:
    role = find(docs, "Role", "koord-scheduler-leader-election")
    rule = next(r for r in role["rules"] if r.get("resources") == ["leases"] and r.get("resourceNames"))
    names: list[str] = rule["resourceNames"]
    return names


def test_off_by_default_even_with_koordinators_values() -> None:
    for docs in (objects(template()), objects(template("-f", str(KOORDINATOR_VALUES)))):
        names = {(d["kind"], d["metadata"]["name"]) for d in docs}
        assert ("Deployment", "koord-descheduler") not in names
        assert ("ConfigMap", "koord-descheduler-config") not in names
        assert lease_names(docs) == ["koord-scheduler"]


def test_enabled_runs_the_descheduling_controllers_on_their_own_lease(tmp_path: Path) -> None:
    docs = objects(template("--set", "descheduler.enabled=true", "--set", "descheduler.replicas=3"))
    deployment = find(docs, "Deployment", "koord-descheduler")
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "koord-scheduler"
    [container] = pod["containers"]
    assert lease_names(docs) == ["koord-scheduler", "koord-descheduler"]
    # koord-scheduler accepts the arguments, with the two ConfigMaps where the volumes put them.
    scheduler_file = tmp_path / "koord-scheduler-config"
    scheduler_file.write_text(find(docs, "ConfigMap", "koord-scheduler-config")["data"]["koord-scheduler-config"])
    descheduler_text = find(docs, "ConfigMap", "koord-descheduler-config")["data"]["koord-descheduler-config"]
    descheduler_file = tmp_path / "koord-descheduler-config"
    descheduler_file.write_text(descheduler_text)
    args = [
        a.replace("/etc/koord-scheduler/koord-scheduler-config", str(scheduler_file))
        .replace("/etc/koord-descheduler/koord-descheduler-config", str(descheduler_file))
        .replace("$(POD_IP)", "127.0.0.1")
        for a in container["args"]
    ]
    options = _options(_parser().parse_args(args))
    assert options.controllers.scheduling is False
    assert options.controllers.enabled == {"migration", "descheduler"}
    assert options.leader_elect and options.leader_election.name == "koord-descheduler"
    assert options.metrics_port == 10251
    config, plugin_args = parse_descheduler_config(descheduler_text)
    assert [p.name for p in config.profiles or []] == ["koord-descheduler"]
    assert plugin_args["MigrationController"][0].namespaces.exclude == [  # type: ignore[attr-defined]
        "kube-system",
        "koordinator-system",
    ]


def test_config_value_replaces_the_default(tmp_path: Path) -> None:
    config = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": "60s",
        "profiles": [
            {
                "name": "lifetime",
                "plugins": {"deschedule": {"enabled": [{"name": "PodLifeTime"}]}},
                "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400}}],
            }
        ],
    }
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"descheduler": {"enabled": True, "config": config}}))
    docs = objects(template("-f", str(values)))
    text = find(docs, "ConfigMap", "koord-descheduler-config")["data"]["koord-descheduler-config"]
    assert yaml.safe_load(text) == config
    parsed, _ = parse_descheduler_config(text)
    assert parsed.profiles is not None and parsed.profiles[0].name == "lifetime"
