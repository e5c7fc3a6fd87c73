"""Objects nested deeper than the scheduler's JSON decoder takes, on the real API server.

What the API server accepts (kube-apiserver v1.35): a custom resource nested up to about 9,990 levels in
a field the schema leaves open (``x-kubernetes-preserve-unknown-fields``: a Reservation's
``spec.template``, a NodeMetric's ``status.podsMetric[].extensions``, a ClusterColocationProfile's
``spec.patch``); a body of 10,000 levels is refused (``exceeded max depth``). An annotation is a
string, so JSON text nested 120,000 levels deep fits the 256 KiB limit of an object's annotations.

- One Reservation, NodeMetric and ClusterColocationProfile nested 1,100 levels (past orjson's 1,024) in
  the lists a new replica starts from: it becomes ready, schedules, and names each of them once.
- A 20,000-level annotation on an ElasticQuota or a NodeResourceTopology arriving on the watch of a
  running replica: that kind's watch goes on, and the quotas and topologies created after it are used.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from colocation_webhook import PROFILES_PATH, WebhookThread, install_api
from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = REPO / "deploy" / "crds"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
QUOTAS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{ns}/elasticquotas"
NRTS = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
CRDS = {
    RESERVATIONS: "scheduling.koordinator.sh_reservations.yaml",
    NODEMETRICS: "slo.koordinator.sh_nodemetrics.yaml",
    "/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas": "scheduling.sigs.k8s.io_elasticquotas.yaml",
    NRTS: "topology.node.k8s.io_noderesourcetopologies.yaml",
}
RESERVATION_PLUGINS = {
    "multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 10}]},
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}
DEEP_OBJECT = 1100
"""Past orjson's 1,024 levels, far under the API server's 10,000."""
DEEP_ANNOTATION = 20_000


def nested(depth: int) -> str:
    """JSON text nested ``depth`` levels (``{"a":{"a":...}}``); Python's ``json`` cannot write it."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    for path, crd in CRDS.items():
        doc = next(d for d in yaml.safe_load_all((CRD_DIR / crd).read_text()) if d)
        result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert result.status in (201, 409), result.body[:300]
        wait_until(lambda path=path: control_plane.request("GET", path).status == 200, timeout=30, what="CRD served")
    s = Scope.create(control_plane, "deep")
    yield s
    for name in ("deep", "ok"):
        control_plane.request("DELETE", f"{RESERVATIONS}/{s.name}-{name}")
    for node in s.nodes:
        control_plane.request("DELETE", f"{NODEMETRICS}/{node}")
        control_plane.request("DELETE", f"{NRTS}/{node}")
    control_plane.request("DELETE", QUOTAS.format(ns=s.namespace))
    s.cleanup()


def post_raw(scope: Scope, path: str, text: str, method: str = "POST") -> None:
    """Send raw JSON text (the answer echoes the object: too deep for ``json`` to read back)."""
    result = scope.plane.request(method, path, text.encode())
    assert result.status in (200, 201), f"{method} {path}: {result.status} {result.body[:300]!r}"


def reservation(scope: Scope, name: str, *, extra: str = "") -> str:
    """A Reservation of 100m on the scope's nodes; ``extra`` is raw JSON members added to its template."""
    template = {
        "metadata": {"namespace": scope.namespace},
        "spec": {
            "schedulerName": scope.scheduler_name,
            "nodeSelector": {"pykoord.test/scope": scope.name},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "10Mi"}}}],
        },
    }
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"{scope.name}-{name}"},
        "spec": {"template": template, "owners": [{"labelSelector": {"matchLabels": {"app": name}}}], "ttl": "1h"},
    }
    text = json.dumps(body)
    if extra:
        marker = '"metadata": {"namespace"'
        text = text.replace(marker, extra + ", " + marker, 1)
    return text


def phase(scope: Scope, name: str) -> str:
    result = scope.plane.request("GET", f"{RESERVATIONS}/{scope.name}-{name}")
    return str(((result.json() or {}).get("status") or {}).get("phase", "")) if result.status == 200 else ""


def test_objects_nested_past_1024_levels_do_not_stop_a_new_leader(scope: Scope, tmp_path: Path) -> None:
    node = scope.add_node("n1")
    post_raw(scope, RESERVATIONS, reservation(scope, "deep", extra=f'"x": {nested(DEEP_OBJECT)}'))
    metric = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}, "spec": {}}
    created = scope.ok("POST", NODEMETRICS, metric)
    pods_metric = '[{"namespace":"x","name":"y","extensions":' + nested(DEEP_OBJECT) + "}]"
    status = '{"updateTime":"2026-01-01T00:00:00Z","podsMetric":' + pods_metric + "}"
    meta = json.dumps({"name": node, "resourceVersion": created["metadata"]["resourceVersion"]})
    post_raw(
        scope,
        f"{NODEMETRICS}/{node}/status",
        '{"apiVersion":"slo.koordinator.sh/v1alpha1","kind":"NodeMetric","metadata":'
        + meta
        + ',"spec":{},"status":'
        + status
        + "}",
        method="PUT",
    )
    post_raw(scope, RESERVATIONS, reservation(scope, "ok"))

    config = scheduler_config(scope, leader_elect=True)
    config["profiles"][0]["plugins"] = RESERVATION_PLUGINS
    started = time.monotonic()
    scheduler = SchedulerProcess.start(scope.plane, config, tmp_path, verbosity=0)  # waits for /readyz
    try:
        ready_after = time.monotonic() - started
        scope.add_pods([scope.pod_body("web")])
        scope.wait_all_bound(1, timeout=60)
        wait_until(lambda: phase(scope, "ok") == "Available", timeout=60, what="the valid Reservation scheduled")
        deep = scope.plane.request("GET", f"{RESERVATIONS}/{scope.name}-deep")
        assert deep.status == 200 and b'"phase"' not in deep.body  # never scheduled: it cannot be read
        assert scheduler.metric("koord_scheduler_object_errors_total", kind="Reservation", reason="Invalid") == 1
        assert scheduler.metric("koord_scheduler_object_errors_total", kind="NodeMetric", reason="Invalid") == 1
        assert scheduler.metric("koord_scheduler_task_restarts_total") == 0
        assert ready_after < 30
    finally:
        scheduler.terminate()
    log = scheduler.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    assert (
        f"Reservation {scope.name}-deep ignored (Invalid): spec.template.x.a.a.a…: nested deeper than 1024 levels"
        in log
    ), log[-4000:]
    assert (
        f"NodeMetric {node} ignored (Invalid): status.podsMetric[0].extensions.a.a…: nested deeper than 1024" in log
    ), log[-4000:]


def profile(name: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"pykoord.test/deep": label}}, "labels": {"seen": name}},
    }


def test_a_colocation_profile_nested_past_1024_levels_costs_only_itself(
    control_plane: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install_api(control_plane)
    names = ["deep-listed", "ok-listed", "deep-watched", "ok-watched"]
    for name in names:
        control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")

    def deep(name: str) -> bytes:
        body = json.dumps(profile(name, name))
        return body.replace(
            '"labels": {"seen"', '"patch": {"x": ' + nested(DEEP_OBJECT) + '}, "labels": {"seen"', 1
        ).encode()

    assert control_plane.request("POST", PROFILES_PATH, deep("deep-listed")).status == 201
    assert control_plane.request("POST", PROFILES_PATH, profile("ok-listed", "ok")).status == 201
    webhook = WebhookThread(control_plane, tmp_path / "certs").start()
    try:
        assert webhook.runtime is not None
        lookup = webhook.runtime.lookup
        wait_until(lambda: "ok-listed" in {p.name for p in lookup.profiles()}, timeout=15, what="listed profile")
        assert control_plane.request("POST", PROFILES_PATH, deep("deep-watched")).status == 201
        assert control_plane.request("POST", PROFILES_PATH, profile("ok-watched", "ok")).status == 201
        wait_until(lambda: "ok-watched" in {p.name for p in lookup.profiles()}, timeout=15, what="watched profile")
        assert not {"deep-listed", "deep-watched"} & {p.name for p in lookup.profiles()}
        assert lookup.profiles_reflector.crashes == 0
    finally:
        webhook.stop()
        for name in names:
            control_plane.request("DELETE", f"{PROFILES_PATH}/{name}")
    messages = [r.getMessage() for r in caplog.records]
    for name in ("deep-listed", "deep-watched"):
        assert any(f"ignoring ClusterColocationProfile {name} (Invalid): spec.patch.x.a" in m for m in messages), name


PLUGINS = {
    "multiPoint": {"enabled": [{"name": "ElasticQuota"}, {"name": "NodeNUMAResource"}]},
    "postFilter": {"disabled": [{"name": "*"}], "enabled": [{"name": "ElasticQuota"}]},
}
QUOTA_PREFIX = "quota.scheduling.koordinator.sh/"


def quota(scope: Scope, name: str, *, cpu: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": scope.namespace, "annotations": annotations or {}},
        "spec": {"max": {"cpu": cpu, "memory": "10Gi"}, "min": {"cpu": cpu, "memory": "10Gi"}},
    }


def cpu_topology() -> str:
    detail = [{"id": i, "core": i % 4, "socket": 0, "node": 0} for i in range(8)]
    return json.dumps({"detail": detail})


def nrt(node: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node, "annotations": annotations},
        "topologyPolicies": ["None"],
        "zones": [],
    }


def test_a_20000_level_annotation_does_not_end_the_watch_of_its_kind(scope: Scope, tmp_path: Path) -> None:
    deep = "[" * DEEP_ANNOTATION + "]" * DEEP_ANNOTATION
    plain = scope.add_node("plain", cpu="8")
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    scheduler = SchedulerProcess.start(scope.plane, config, tmp_path, verbosity=0)
    try:
        quotas = QUOTAS.format(ns=scope.namespace)
        # On the watch of a running replica: first the deep annotations, then the objects that must be used.
        scope.ok("POST", quotas, quota(scope, "deep", cpu="4", annotations={QUOTA_PREFIX + "shared-weight": deep}))
        scope.ok(
            "POST", quotas, quota(scope, "deep-namespaces", cpu="4", annotations={QUOTA_PREFIX + "namespaces": deep})
        )
        scope.ok("POST", NRTS, nrt(plain, {"kubelet.koordinator.sh/cpu-manager-policy": deep}))
        scope.ok("POST", quotas, quota(scope, "small", cpu="100m"))
        numa = scope.add_node("numa", cpu="8")
        scope.ok("POST", NRTS, nrt(numa, {"node.koordinator.sh/cpu-topology": cpu_topology()}))
        time.sleep(2)  # the watch delivers them (a scheduler that lost the watch would not wait for them anyway)

        over = scope.pod_body("over-quota", cpu="200m")
        over["metadata"]["labels"] = {QUOTA_PREFIX + "name": "small"}
        lsr = scope.pod_body("lsr", cpu="2", memory="1Gi")
        lsr["metadata"]["labels"] = {"koordinator.sh/qosClass": "LSR"}
        resources = lsr["spec"]["containers"][0]["resources"]
        resources["limits"] = dict(resources["requests"])
        in_deep = scope.pod_body("in-deep-quota", cpu="200m")
        in_deep["metadata"]["labels"] = {QUOTA_PREFIX + "name": "deep"}
        scope.add_pods([over, lsr, in_deep])

        scope.wait_all_bound(2, timeout=60)
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in scope.pods()}
        assert placed["lsr"] == numa, placed  # the topology created after the deep one was seen
        assert placed["in-deep-quota"], placed  # shared-weight unreadable: ignored, as Koordinator does
        wait_until(
            lambda: any(e["regarding"]["name"] == "over-quota" for e in scope.events(reason="FailedScheduling")),
            timeout=30,
            what="FailedScheduling for the pod over its quota",
        )
        assert not scope.pod("over-quota")["spec"].get("nodeName")  # the quota created after them is enforced
        status = json.loads(scope.pod("lsr")["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"])
        assert len(status["cpuset"].split(",")) >= 1
        errors = {
            kind: scheduler.metric("koord_scheduler_object_errors_total", kind=kind, reason="Invalid")
            for kind in ("ElasticQuota", "NodeResourceTopology")
        }
        assert errors == {"ElasticQuota": 1, "NodeResourceTopology": 1}
        assert scheduler.metric("koord_scheduler_task_restarts_total") == 0
        assert scheduler.alive
    finally:
        scheduler.terminate()
    log = scheduler.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    assert "RecursionError" not in log, log[-4000:]
    assert (
        f"ElasticQuota {scope.namespace}/deep-namespaces ignored (Invalid): ElasticQuota "
        f"{scope.namespace}/deep-namespaces: metadata.annotations[{QUOTA_PREFIX}namespaces]: not valid JSON: "
        "nested deeper than 64 levels"
    ) in log, log[-4000:]
    assert (
        f"NodeResourceTopology {plain} ignored (Invalid): NodeResourceTopology {plain}: annotation "
        "kubelet.koordinator.sh/cpu-manager-policy is not valid JSON: nested deeper than 64 levels"
    ) in log
