"""deploy/: what the cluster admin applies, checked without a cluster (the server-side checks are in
tests/integration/deploy/)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm import CHART, render

from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates, builtin_registry, parse_feature_gate_flag

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"


def docs(rel: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / rel).read_text()) if d]


def kustomize_resources() -> list[str]:
    resources: list[str] = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    return resources


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for rel in kustomize_resources() for d in docs(rel) if d["kind"] == kind}


def test_kustomization_lists_every_manifest() -> None:
    on_disk = sorted(str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomize_resources()) == on_disk


def test_everything_namespaced_is_in_koordinator_system() -> None:
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
    for rel in kustomize_resources():
        for d in docs(rel):
            if d["kind"] not in cluster_scoped:
                assert d["metadata"].get("namespace") == "koordinator-system", (rel, d["metadata"]["name"])


@pytest.mark.parametrize(
    "name, want_value",
    [
        pytest.param("koord-prod", 9000, id="prod"),
        pytest.param("koord-mid", 7000, id="mid"),
        pytest.param("koord-batch", 5000, id="batch"),
        pytest.param("koord-free", 3000, id="free"),
    ],
)
def test_priority_classes_have_koordinators_values(name: str, want_value: int) -> None:
    pc = by_kind("PriorityClass")[name]
    assert (pc["value"], pc["preemptionPolicy"]) == (want_value, "PreemptLowerPriority")
    chart_file = CHART / f"priority_{name}.yaml"
    if chart_file.exists():
        chart = yaml.safe_load(chart_file.read_text())
        assert {k: pc[k] for k in ("value", "preemptionPolicy", "description")} == {
            k: chart[k] for k in ("value", "preemptionPolicy", "description")
        }


@pytest.mark.parametrize("rel", ["koord-scheduler/rbac.yaml", "koordlet/rbac.yaml"])
def test_every_rbac_rule_says_which_code_needs_it(rel: str) -> None:
    """Each rule (or run of rules) is preceded by a comment naming a source file."""
    lines = (DEPLOY / rel).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("- apiGroups:"):
            block = []
            j = i - 1
            while j >= 0 and lines[j].strip().startswith("#"):
                block.append(lines[j])
                j -= 1
            assert block, f"{rel}:{i + 1}: rule without a comment"
            assert re.search(r"\w+\.py|kopf", " ".join(block)), f"{rel}:{i + 1}: comment names no code: {block}"


def test_rbac_is_narrower_than_koordinators() -> None:
    for role in by_kind("ClusterRole").values():
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], (role["metadata"]["name"], rule)
    chart_roles = [
        d
        for d in yaml.safe_load_all(render((CHART / "rbac_koordlet.yaml").read_text()))
        if d and d["kind"] == "ClusterRole"
    ]
    assert any("*" in rule["verbs"] for rule in chart_roles[0]["rules"])  # what we improve on


def test_scheduler_deployment() -> None:
    dep = by_kind("Deployment")["koord-scheduler"]
    spec = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2
    container = spec["containers"][0]
    assert spec["serviceAccountName"] == "koord-scheduler"
    config_arg = next(a for a in container["args"] if a.startswith("--config="))
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    configmap_name = next(v for v in spec["volumes"] if v["name"] == "config")["configMap"]["name"]
    configmap = by_kind("ConfigMap")[configmap_name]
    key = config_arg.removeprefix("--config=").removeprefix(mount["mountPath"] + "/")
    config = yaml.safe_load(configmap["data"][key])
    assert config["leaderElection"]["leaderElect"] is True
    assert config["leaderElection"]["resourceNamespace"] == dep["metadata"]["namespace"]
    role = by_kind("Role")["koord-scheduler-leader-election"]
    assert config["leaderElection"]["resourceName"] in role["rules"][1]["resourceNames"]


def test_koordlet_daemonset() -> None:
    ds = by_kind("DaemonSet")["koordlet"]
    spec = ds["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert spec["hostPID"] is True
    assert spec.get("hostNetwork") is not True
    assert spec["serviceAccountName"] == "koordlet"
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    security = container["securityContext"]
    assert (security["privileged"], security["allowPrivilegeEscalation"], security["capabilities"]) == (
        False,
        False,
        {"drop": ["ALL"]},
    )
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"cpu": "200m", "memory": "256Mi"},
    }
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    args = dict(a.split("=", 1) for a in container["args"])
    assert host_paths["host-cgroup"] == "/sys/fs/cgroup" and mounts["host-cgroup"]["mountPath"] == args["--cgroup-root"]
    assert host_paths["host-proc"] == "/proc" and mounts["host-proc"]["mountPath"] == args["--proc-root"]
    assert mounts["host-proc"]["readOnly"] and mounts["host-sys"]["readOnly"]


def test_koordlet_feature_gates_are_set_in_one_place_and_valid() -> None:
    ds = by_kind("DaemonSet")["koordlet"]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--feature-gates") for a in args), "gates belong in the ConfigMap only"
    config = yaml.safe_load(by_kind("ConfigMap")["koordlet-config"]["data"]["koordlet-config.yaml"])
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, config["featureGates"], parse_feature_gate_flag("")
    )
    chart_args = yaml.safe_load(render((CHART / "koordlet.yaml").read_text()))["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    chart_flag = next(a for a in chart_args if a.startswith("-feature-gates=")).split("=", 1)[1]
    for name, value in parse_feature_gate_flag(chart_flag).items():
        assert gates.enabled(name) == value, name


@pytest.mark.parametrize(("policy", "workload_kind"), [("koord-scheduler", "Deployment"), ("koordlet", "DaemonSet")])
def test_network_policy_admits_only_the_metrics_port(policy: str, workload_kind: str) -> None:
    """The metrics port only from scrapers; koord-scheduler's webhook port (TLS) from any address with the
    default values, since the API server that calls it is not a pod and only the cluster's addresses
    (networkPolicy.webhookSources, tested in test_chart.py) can name it."""
    netpol = by_kind("NetworkPolicy")[policy]
    workload = by_kind(workload_kind)[policy]
    pod_labels = workload["spec"]["template"]["metadata"]["labels"]
    selector = netpol["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items(), "the policy selects the workload's pods"
    assert netpol["spec"]["policyTypes"] == ["Ingress"]
    container = workload["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    metrics_rule, *webhook_rules = netpol["spec"]["ingress"]
    assert [p["port"] for p in metrics_rule["ports"]] == [ports.pop("http-metrics")]
    assert metrics_rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"pykoord.koordinator.sh/metrics-scraper": "true"}}}
    ]
    assert [[p["port"] for p in r["ports"]] for r in webhook_rules] == [[port] for port in ports.values()]
    assert all("from" not in r for r in webhook_rules)


def test_scheduler_metrics_bind_the_pod_ip_and_debug_switches_stay_off() -> None:
    container = by_kind("Deployment")["koord-scheduler"]["spec"]["template"]["spec"]["containers"][0]
    assert "--bind-address=$(POD_IP)" in container["args"]
    assert not any(a.startswith("--debug-flags-port") for a in container["args"])
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
