"""charts/pykoord rendered by the pinned Helm: lint, deploy/ is the chart with default values, and a
Koordinator v1.8 values file keeps its meaning (the server-side checks are in tests/integration/deploy/)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.config import parse_scheduler_config
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koordlet.qosmanager import KOORDLET_FEATURES, builtin_registry
from tests.helmchart import CHART, KOORDINATOR_VALUES, REPO, find, helm, helm_path, notes, objects, template

KOORDINATOR = yaml.safe_load(KOORDINATOR_VALUES.read_text())
Docs = list[dict[str, Any]]


def scheduler_config(docs: Docs) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(
        find(docs, "ConfigMap", "koord-scheduler-config")["data"]["koord-scheduler-config"]
    )
    return config


def container(docs: Docs, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = find(docs, kind, name)["spec"]["template"]["spec"]["containers"][0]
    return spec


def plugin_args(config: dict[str, Any], plugin: str) -> dict[str, Any]:
    args: dict[str, Any] = next(c["args"] for c in config["profiles"][0]["pluginConfig"] if c["name"] == plugin)
    return args


@pytest.mark.parametrize("values", [[], ["-f", str(KOORDINATOR_VALUES)]], ids=["defaults", "koordinator-v1.8"])
def test_helm_lint(values: list[str]) -> None:
    result = helm("lint", "--strict", str(CHART), *values)
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_deploy_is_the_chart_rendered_with_default_values() -> None:
    spec = importlib.util.spec_from_file_location("render_deploy", REPO / "scripts" / "render-deploy.py")
    assert spec is not None and spec.loader is not None
    render_deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render_deploy)
    want = render_deploy.deploy_files(render_deploy.helm_template(helm_path()))
    on_disk = {str(p.relative_to(REPO / "deploy")): p.read_text() for p in (REPO / "deploy").rglob("*.yaml")}
    assert sorted(on_disk) == sorted(want), "run scripts/render-deploy.py"
    for path, text in want.items():
        assert on_disk[path] == text, f"deploy/{path} differs from the chart: run scripts/render-deploy.py"


def test_koordinator_values_keep_their_meaning() -> None:
    docs = objects(template("-f", str(KOORDINATOR_VALUES)))
    scheduler = container(docs, "Deployment", "koord-scheduler")
    koordlet = container(docs, "DaemonSet", "koordlet")
    ks, kl = KOORDINATOR["scheduler"], KOORDINATOR["koordlet"]
    assert find(docs, "Namespace", "koordinator-system")
    assert find(docs, "Deployment", "koord-scheduler")["spec"]["replicas"] == ks["replicas"]
    assert (scheduler["resources"], koordlet["resources"]) == (ks["resources"], kl["resources"])
    assert {f"--v={ks['log']['level']}", f"--metrics-port={ks['port']}"} <= set(scheduler["args"])
    assert {f"--v={kl['log']['level']}", f"--metrics-port={kl['metrics']['port']}"} <= set(koordlet["args"])
    assert scheduler["image"] == koordlet["image"] == f"{KOORDINATOR['imageRepositoryHost']}/pykoord:0.1.0"
    webhook = find(docs, "MutatingWebhookConfiguration", "koord-scheduler-mutating-webhook-configuration")
    assert (webhook["webhooks"][0]["failurePolicy"], webhook["webhooks"][0]["timeoutSeconds"]) == (
        KOORDINATOR["webhookConfiguration"]["failurePolicy"]["pods"],
        KOORDINATOR["webhookConfiguration"]["timeoutSeconds"],
    )
    quota_webhook = find(docs, "ValidatingWebhookConfiguration", "koord-scheduler-validating-webhook-configuration")
    assert (quota_webhook["webhooks"][0]["failurePolicy"], quota_webhook["webhooks"][0]["timeoutSeconds"]) == (
        KOORDINATOR["webhookConfiguration"]["failurePolicy"]["elasticquotas"],
        KOORDINATOR["webhookConfiguration"]["timeoutSeconds"],
    )
    config = scheduler_config(docs)
    assert (
        plugin_args(config, "DeviceShare")["gpuShareUnsupportedModels"]
        == ks["deviceShare"]["gpuShareUnsupportedModels"]
    )
    # enableJobPreemption: true, as Koordinator's values say: Coscheduling's job preemption, no DefaultPreemption.
    assert plugin_args(config, "Coscheduling")["enablePreemption"] is True
    assert {"name": "DefaultPreemption"} not in config["profiles"][0]["plugins"]["postFilter"]["enabled"]
    parsed = parse_scheduler_config(config, source="chart")
    build_scheduler(parsed, in_tree_registry(), MemoryCluster.from_objects([], []), clock=lambda: 1.0)


def namespaced_in(namespace: str) -> Callable[[Docs], None]:
    def check(docs: Docs) -> None:
        for d in docs:
            if d["kind"] not in {
                "Namespace",
                "PriorityClass",
                "ClusterRole",
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration",
            }:
                if d["kind"] == "ClusterRoleBinding":
                    assert {s["namespace"] for s in d["subjects"]} == {namespace}
                else:
                    assert d["metadata"]["namespace"] == namespace, (d["kind"], d["metadata"]["name"])
        config = scheduler_config(docs)
        assert config["leaderElection"]["resourceNamespace"] == namespace
        assert plugin_args(config, "ElasticQuota")["quotaGroupNamespace"] == namespace
        assert f"--config-namespace={namespace}" in container(docs, "Deployment", "koord-scheduler")["args"]
        webhook = find(docs, "MutatingWebhookConfiguration", "koord-scheduler-mutating-webhook-configuration")
        assert webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] == namespace
        excluded = webhook["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
        assert excluded == [namespace, "kube-system"]
        quota_webhook = find(docs, "ValidatingWebhookConfiguration", "koord-scheduler-validating-webhook-configuration")
        assert quota_webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] == namespace

    return check


def koordlet_gates(docs: Docs) -> dict[str, bool]:
    data = find(docs, "ConfigMap", "koordlet-config")["data"]["koordlet-config.yaml"]
    gates: dict[str, bool] = yaml.safe_load(data)["featureGates"]
    return gates


def kinds(docs: Docs) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


KONNECTIVITY = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}},
}


def webhook_sources(docs: Docs) -> list[dict[str, Any]] | None:
    """The ``from`` of the NetworkPolicy rule for the webhook port (None: any source)."""
    rules = find(docs, "NetworkPolicy", "koord-scheduler")["spec"]["ingress"]
    rule = next(r for r in rules if [p["port"] for p in r["ports"]] == [9443])
    sources: list[dict[str, Any]] | None = rule.get("from")
    return sources


@pytest.mark.parametrize(
    ("sets", "check"),
    [
        pytest.param(["installation.namespace=pykoord"], namespaced_in("pykoord"), id="installation.namespace"),
        pytest.param(
            ["installation.createNamespace=false"],
            lambda docs: ("Namespace", "koordinator-system") not in kinds(docs),
            id="createNamespace-false",
        ),
        pytest.param(
            ["koordlet.features=CPUEvict=true\\,BECPUEvict=false"],
            lambda docs: (
                koordlet_gates(docs) | {"CPUEvict": True, "BECPUEvict": False} == koordlet_gates(docs)
                and koordlet_gates(docs)["CPUEvict"]
                and not koordlet_gates(docs)["BECPUEvict"]
            ),
            id="koordlet.features-over-gates",
        ),
        pytest.param(
            ["manager.webhook.port=0"],
            lambda docs: (
                not {
                    ("Service", "koord-scheduler-webhook"),
                    ("MutatingWebhookConfiguration", "koord-scheduler-mutating-webhook-configuration"),
                    ("ValidatingWebhookConfiguration", "koord-scheduler-validating-webhook-configuration"),
                }
                & kinds(docs)
                and not any(
                    a.startswith("--webhook-port") for a in container(docs, "Deployment", "koord-scheduler")["args"]
                )
            ),
            id="webhook-off",
        ),
        pytest.param(
            ["manager.controllers=-nodeslo\\,-noderesource"],
            lambda docs: (
                "--controllers=-nodeslo,-noderesource" in container(docs, "Deployment", "koord-scheduler")["args"]
            ),
            id="manager.controllers",
        ),
        pytest.param(
            ["scheduler.replicas=1"],
            lambda docs: ("PodDisruptionBudget", "koord-scheduler") not in kinds(docs),
            id="one-replica-no-pdb",
        ),
        pytest.param(
            [], lambda docs: find(docs, "PodDisruptionBudget", "koord-scheduler")["spec"]["minAvailable"] == 1, id="pdb"
        ),
        pytest.param(
            ["scheduler.monitorEnabled=true", "koordlet.enableServiceMonitor=true"],
            lambda docs: (
                {("PodMonitor", "koord-scheduler"), ("ServiceMonitor", "koordlet"), ("Service", "koordlet-metrics")}
                <= kinds(docs)
            ),
            id="monitors",
        ),
        pytest.param(
            [], lambda docs: not {"PodMonitor", "ServiceMonitor"} & {d["kind"] for d in docs}, id="no-monitors"
        ),
        pytest.param(
            ["networkPolicy.enabled=false"],
            lambda docs: "NetworkPolicy" not in {d["kind"] for d in docs},
            id="no-networkpolicy",
        ),
        pytest.param(
            ["networkPolicy.webhookSources.apiServerCIDRs={10.0.0.10/32,10.0.0.11/32}"],
            lambda docs: (
                webhook_sources(docs)
                == [KONNECTIVITY, {"ipBlock": {"cidr": "10.0.0.10/32"}}, {"ipBlock": {"cidr": "10.0.0.11/32"}}]
            ),
            id="webhook-from-the-api-server-only",
        ),
        pytest.param(
            [
                "networkPolicy.webhookSources.podCIDRs={10.244.0.0/16,fd00:10:244::/56}",
                "networkPolicy.webhookSources.konnectivityAgents=false",
            ],
            lambda docs: (
                webhook_sources(docs)
                == [
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.244.0.0/16"]}},
                    {"ipBlock": {"cidr": "::/0", "except": ["fd00:10:244::/56"]}},
                ]
            ),
            id="webhook-from-anything-but-pods",
        ),
        pytest.param([], lambda docs: webhook_sources(docs) is None, id="webhook-sources-unset"),
        pytest.param(
            ["koordlet.hostDirs.kubeletLibDir=/data/kubelet/"],
            lambda docs: (
                next(
                    v
                    for v in find(docs, "DaemonSet", "koordlet")["spec"]["template"]["spec"]["volumes"]
                    if v["name"] == "host-kubelet"
                )["hostPath"]["path"]
                == "/data/kubelet"
            ),
            id="kubeletLibDir",
        ),
        pytest.param(
            ["koordlet.cgroupKubepodsDir=pykoord-ab12/kubepods"],
            lambda docs: (
                "--cgroup-kubepods-dir=pykoord-ab12/kubepods" in container(docs, "DaemonSet", "koordlet")["args"]
            ),
            id="cgroupKubepodsDir",
        ),
        pytest.param(
            [],
            lambda docs: (
                not any(a.startswith("--cgroup-kubepods-dir") for a in container(docs, "DaemonSet", "koordlet")["args"])
            ),
            id="cgroupKubepodsDir-found-from-the-mount",
        ),
    ],
)
def test_value_changes_render(sets: list[str], check: Callable[[Docs], bool | None]) -> None:
    args = [a for s in sets for a in ("--set", s)]
    assert check(objects(template(*args))) is not False


def test_chart_knows_koordlets_feature_gates() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    listed = helpers.split('define "pykoord.koordletGateNames" -}}', 1)[1].split("{{- end", 1)[0].split()
    assert listed == sorted({**KOORDLET_FEATURES, **builtin_registry().feature_specs()})


def test_unknown_koordlet_gate_is_refused_by_name() -> None:
    result = helm("template", "pykoord", str(CHART), "--set", "koordlet.features=NoSuchGate=true", check=False)
    assert result.returncode != 0
    assert '"NoSuchGate" is not a koordlet feature gate' in result.stderr


def test_standard_labels_on_every_object() -> None:
    for d in objects(template()):
        labels = d["metadata"]["labels"]
        assert {labels[f"app.kubernetes.io/{k}"] for k in ("part-of", "instance", "managed-by")} == {
            "pykoord",
            "Helm",
        }, (d["kind"], d["metadata"]["name"])


def test_helm_test_hooks() -> None:
    hooks = {
        (d["kind"], d["metadata"]["name"]): d
        for d in objects(template())
        if d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"
    }
    assert hooks[("Pod", "pykoord-test-scheduler-binds")]["spec"]["schedulerName"] == "koord-scheduler"
    assert hooks[("Pod", "pykoord-test-components-ready")]["spec"]["serviceAccountName"] == "pykoord-test"
    assert hooks[("Role", "pykoord-test")]["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "daemonsets"],
            "resourceNames": ["koord-scheduler", "koordlet"],
            "verbs": ["get"],
        }
    ]
    assert not [
        d
        for d in objects(template("--set", "tests.enabled=false"))
        if d["metadata"].get("annotations", {}).get("helm.sh/hook")
    ]


def test_notes_report_the_koordinator_keys_pykoord_ignores(tmp_path: Path) -> None:
    text = notes(tmp_path, "-f", str(KOORDINATOR_VALUES))
    reported = {line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")}
    assert {
        "descheduler.image",
        "deviceDaemon",
        "installation.roleListGroups",
        "manager.replicas",
        "manager.resources",
        "scheduler.image",
        "koordlet.image",
        "koordlet.hostDirs.koordletSockDir",
        "webhookConfiguration.failurePolicy.reservations",
    } <= reported
    # Keys pykoord uses are never reported, nor empty ones (Koordinator's featureGates: "").
    assert (
        not {
            "scheduler.replicas",
            "scheduler.resources",
            "koordlet.resources",
            "featureGates",
            "descheduler.replicas",
            "installation.namespace",
            "koordlet.hostDirs.kubeletLibDir",
            "manager.webhook.port",
            "webhookConfiguration.failurePolicy.elasticquotas",
        }
        & reported
    )
    assert "enableJobPreemption" not in text


def test_notes_are_quiet_with_default_values(tmp_path: Path) -> None:
    text = notes(tmp_path)
    assert "Pods opt in with spec.schedulerName: koord-scheduler." in text
    assert "WARNING" not in text
    assert "The webhook port (9443) accepts connections from any address" in text
    configured = notes(tmp_path / "configured", "--set", "networkPolicy.webhookSources.apiServerCIDRs={10.0.0.10/32}")
    assert "accepts connections from any address" not in configured


def test_crds_false_is_reported(tmp_path: Path) -> None:
    assert "crds.nodeslos=false" in notes(tmp_path, "--set", "crds.nodeslos=false")


def test_strict_values_refuses_unused_keys() -> None:
    result = helm(
        "template", "pykoord", str(CHART), "-f", str(KOORDINATOR_VALUES), "--set", "strictValues=true", check=False
    )
    assert result.returncode != 0
    assert "strictValues" in result.stderr and "descheduler" in result.stderr


@pytest.mark.parametrize(
    ("bad", "want_in_error"),
    [
        pytest.param("scheduler.replicas=-1", "replicas", id="negative-replicas"),
        pytest.param("scheduler.port=70000", "port", id="port-range"),
        pytest.param("webhookConfiguration.failurePolicy.pods=Sometimes", "failurePolicy", id="failure-policy"),
        pytest.param(
            "webhookConfiguration.failurePolicy.elasticquotas=Never", "elasticquotas", id="quota-failure-policy"
        ),
        pytest.param("webhookConfiguration.timeoutSeconds=31", "timeoutSeconds", id="webhook-timeout"),
        pytest.param("koordlet.features=BECPUEvict", "features", id="feature-gate-syntax"),
        pytest.param("installation.namespace=Not_A_Name", "namespace", id="namespace-name"),
        pytest.param("scheduler.resources.requests.cpu=lots", "cpu", id="quantity"),
        pytest.param("manager.controllers=node slo", "controllers", id="controllers-list"),
        pytest.param(
            "networkPolicy.webhookSources.apiServerCIDRs={10.0.0.1}", "apiServerCIDRs", id="cidr-without-mask"
        ),
        pytest.param("networkPolicy.webhookSources.podCIDRs={all}", "podCIDRs", id="not-a-cidr"),
    ],
)
def test_schema_refuses_bad_values(bad: str, want_in_error: str) -> None:
    result = helm("template", "pykoord", str(CHART), "--set", bad, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert want_in_error in result.stderr
