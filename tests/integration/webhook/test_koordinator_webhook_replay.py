"""Koordinator's webhook test tables replayed with ``kubectl apply`` against the real API server.

The facts are in ``tests/fixtures/koordinator_{pod,quota}_webhook_cases.py``. The admission server runs
in-process (one per set of feature gates a case needs) behind a ValidatingWebhookConfiguration
(``vpod.koordinator.sh``, ``velasticquota.koordinator.sh``) and a MutatingWebhookConfiguration
(``melasticquota.koordinator.sh``), as the chart registers them but on loopback and limited to namespaces
labelled ``pykoord-replay=<gates>``. Each case must get Koordinator's answer: created, or refused with
``admission webhook "<name>" denied the request: <Koordinator's message>`` in kubectl's error.

The cluster is this module's own (Koordinator's tables use quota names such as ``temp`` and
``koordinator-root-quota`` that other tests' quotas must not meet). Last, with the servers stopped and
``failurePolicy: Ignore``, a pod and a quota that the webhooks refuse are admitted.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from colocation_webhook import VWC_PATH, WebhookThread
from controlplane import ControlPlane, session_control_plane

from koord_scheduler.webhook.gates import AdmissionGates
from tests.fixtures.koordinator_pod_webhook_cases import ALL_CASES, QUOTA_POD_CASES, QUOTA_POD_TOPOLOGY, PodCase
from tests.fixtures.koordinator_quota_webhook_cases import (
    DEFAULTS,
    PREFIX,
    SELF_ITEM,
    SEQUENCES,
    SHARED_WEIGHT,
    VALIDATING_HANDLER,
    Step,
)

pytestmark = pytest.mark.integration

MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
LABEL = "pykoord-replay"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with session_control_plane(tmp_path_factory.mktemp("replay-cluster")) as own:
        yield own


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(plane.binaries.kubectl), f"--kubeconfig={plane.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def apply(plane: ControlPlane, obj: Json) -> subprocess.CompletedProcess[str]:
    return kubectl(plane, "apply", "-o", "json", "-f", "-", stdin=yaml.safe_dump(obj))


def denial(result: subprocess.CompletedProcess[str], webhook: str) -> str | None:
    """The message ``webhook`` refused with (the rest of kubectl's error line), None if it did not refuse."""
    match = re.search(rf'admission webhook "{re.escape(webhook)}" denied the request: (.*)$', result.stderr, re.M)
    return match.group(1) if match else None


def namespace(plane: ControlPlane, name: str, gates_key: str = "") -> None:
    kubectl(plane, "create", "namespace", name)
    if gates_key:
        assert kubectl(plane, "label", "--overwrite", "namespace", name, f"{LABEL}={gates_key}").returncode == 0


def register(plane: ControlPlane, key: str, server: WebhookThread, *, validating: bool = True) -> None:
    """The chart's webhooks, on loopback, for namespaces labelled ``pykoord-replay=<key>``; without
    ``validating`` only the mutating one."""
    ca = base64.b64encode(server.bundle.ca_pem).decode()

    def hook(name: str, path: str, group: str, resource: str, operations: list[str]) -> Json:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 10,
            "clientConfig": {"url": f"https://127.0.0.1:{server.port}{path}", "caBundle": ca},
            "namespaceSelector": {"matchLabels": {LABEL: key}},
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": ["v1" if not group else "v1alpha1"],
                    "operations": operations,
                    "resources": [resource],
                    "scope": "Namespaced",
                }
            ],
        }

    validating_configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"replay-{key}"},
        "webhooks": [
            hook("vpod.koordinator.sh", "/validate-pod", "", "pods", ["CREATE", "UPDATE"]),
            hook(
                "velasticquota.koordinator.sh",
                "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
                "scheduling.sigs.k8s.io",
                "elasticquotas",
                ["CREATE", "UPDATE", "DELETE"],
            ),
        ],
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": f"replay-{key}"},
        "webhooks": [
            hook(
                "melasticquota.koordinator.sh",
                "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
                "scheduling.sigs.k8s.io",
                "elasticquotas",
                ["CREATE"],
            )
        ],
    }
    configurations: list[tuple[str, Json]] = [(VWC_PATH, validating_configuration), (MWC_PATH, mutating)]
    for path, body in configurations:
        if path == VWC_PATH and not validating:
            continue
        plane.request("DELETE", f"{path}/{body['metadata']['name']}")
        result = plane.request("POST", path, body)
        assert result.status == 201, result.body[:300]


def wait_until(what: str, check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def wait_serving(plane: ControlPlane, key: str) -> None:
    """Until the API server calls the webhook for namespace ``probe-<key>`` (configuration and namespace
    label seen): a pod with the reserve-pod annotation is refused."""
    probe = f"probe-{key}"
    namespace(plane, probe, key)
    pod = live_pod(
        {"metadata": {"annotations": {"scheduling.koordinator.sh/reserve-pod": ""}}, "spec": {}}, "probe", probe
    )

    def refusing() -> bool:
        result = apply(plane, pod)
        if result.returncode == 0:
            kubectl(plane, "delete", "pod", "probe", "-n", probe, "--wait=false")
        return denial(result, "vpod.koordinator.sh") is not None

    wait_until(f"the webhook serving namespace {probe}", refusing)


# ----- pods -----


def live_pod(pod: Json, name: str, ns: str) -> Json:
    """Koordinator's test pod as the API server takes it: a name and image for every container (one when
    it has none), and the priority through the PriorityClass of that value."""
    obj = json.loads(json.dumps(pod))
    meta = obj.setdefault("metadata", {})
    meta["name"], meta["namespace"] = meta.get("name") or name, ns
    spec = obj.setdefault("spec", {})
    containers = spec.get("containers") or [{}]
    for i, c in enumerate(containers):
        c.setdefault("name", f"c{i}")
        c.setdefault("image", "busybox")
        if not c.get("resources"):
            c.pop("resources", None)
    spec["containers"] = containers
    if "priority" in spec:
        spec["priorityClassName"] = f"replay-p{spec.pop('priority')}"
    return {"apiVersion": "v1", "kind": "Pod", **obj}


def gates_key(case: PodCase) -> str:
    return "-".join(sorted(f"{k.lower()}" for k, on in case.gates.items() if on)) or "default"


def test_pod_tables_replayed(plane: ControlPlane, tmp_path: Path) -> None:
    cases = ALL_CASES + QUOTA_POD_CASES
    keys = {gates_key(c): c.gates for c in cases}
    servers = {
        key: WebhookThread(plane, tmp_path / key, gates=AdmissionGates.resolve(gates)).start()
        for key, gates in keys.items()
    }
    try:
        for value in sorted(
            {c.get("spec", {}).get("priority") for case in cases for c in (case.new, case.old or {})} - {None}
        ):
            pc = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"replay-p{value}"},
                "value": value,
            }
            assert apply(plane, pc).returncode == 0
        # The quotas of TestQuotaTopology_AddPod_UpdatePod, added without the quota webhook (as OnQuotaAdd).
        namespace(plane, "replay-quotas")
        for q in QUOTA_POD_TOPOLOGY:
            labels = {
                PREFIX + "parent": q.get("parent", "koordinator-root-quota"),
                PREFIX + "is-parent": "true" if q.get("is_parent") else "false",
            }
            body = {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": q["name"], "namespace": "replay-quotas", "labels": labels},
                "spec": {"min": q["min"], "max": q["max"]},
            }
            assert apply(plane, body).returncode == 0
        for server in servers.values():
            wait_until("the quotas in the webhook's watch", lambda s=server: len(s.runtime.quota_lookup.quotas()) == 3)

        # Old pods of UPDATE cases go in before their namespace is served (some are refused on CREATE).
        for i, case in enumerate(cases):
            namespace(plane, f"rp-{i}")
            if case.old is not None:
                result = apply(plane, live_pod(case.old, "case", f"rp-{i}"))
                assert result.returncode == 0, (case.id, result.stderr)
        for key, server in servers.items():
            register(plane, key, server)
        for i, case in enumerate(cases):
            assert kubectl(plane, "label", "namespace", f"rp-{i}", f"{LABEL}={gates_key(case)}").returncode == 0
        for key in servers:
            wait_serving(plane, key)

        failures = []
        got: tuple[object, ...]
        want: tuple[object, ...]
        for i, case in enumerate(cases):
            result = apply(plane, live_pod(case.new, "case", f"rp-{i}"))
            message = denial(result, "vpod.koordinator.sh")
            if case.api_refuses_first:
                got = ("refused by the API server", result.returncode != 0 and message is None)
                want = ("refused by the API server", True)
            else:
                got = (result.returncode == 0, message or "")
                want = (case.want_allowed, case.want_message)
            if got != want:
                failures.append((case.id, got, want, result.stderr[-300:]))
        assert failures == []
    finally:
        for server in servers.values():
            server.stop()
        # Koordinator's quota names (temp, sub-1) recur in the quota tables: nothing of this test may stay.
        kubectl(plane, "delete", "elasticquotas", "--all", "-n", "replay-quotas")
        kubectl(plane, "delete", "pods", "--all", "--all-namespaces", "--wait=false")

    # The webhook down, failurePolicy Ignore: a pod it refuses is admitted, as written.
    forbidden = live_pod(
        {"metadata": {"labels": {"koordinator.sh/qosClass": "BE"}}, "spec": {"priority": 9999}}, "after", "rp-0"
    )
    result = apply(plane, forbidden)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metadata"]["labels"] == {"koordinator.sh/qosClass": "BE"}


# ----- ElasticQuotas -----


def live_quota(obj: Json, ns: str) -> Json:
    out = json.loads(json.dumps(obj))
    meta = out["metadata"]
    meta["namespace"] = f"{ns}-{meta['namespace']}" if meta.get("namespace") else ns
    return out


class QuotaReplay:
    def __init__(self, plane: ControlPlane, server: WebhookThread, ns: str, key: str = "quota") -> None:
        self.plane, self.server, self.ns, self.key = plane, server, ns, key
        self.namespaces: set[str] = set()

    def ensure(self, ns: str, served: bool = True) -> str:
        if ns not in self.namespaces:
            namespace(self.plane, ns, self.key if served else "")
            self.namespaces.add(ns)
        return ns

    def step(self, step: Step) -> tuple[bool, str, Json]:
        """(allowed, the velasticquota or melasticquota message, the stored object)."""
        if step.action in ("pod", "delete-pod"):
            meta = step.obj["metadata"]
            ns = self.ensure(meta["namespace"] or self.ns, served=not meta["namespace"])
            if step.action == "pod":
                assert (
                    apply(
                        self.plane,
                        {"apiVersion": "v1", "kind": "Pod", **step.obj, "metadata": {**meta, "namespace": ns}},
                    ).returncode
                    == 0
                )
            else:
                assert kubectl(self.plane, "delete", "pod", meta["name"], "-n", ns).returncode == 0
            return True, "", {}
        if step.action == "delete":
            result = kubectl(self.plane, "delete", "elasticquota", step.obj["name"], "-n", self.ns)
            stored: Json = {}
        else:
            obj = live_quota(step.obj, self.ns)
            self.ensure(obj["metadata"]["namespace"])
            result = apply(self.plane, obj)
            stored = json.loads(result.stdout) if result.returncode == 0 else {}
        message = denial(result, "velasticquota.koordinator.sh") or denial(result, "melasticquota.koordinator.sh")
        if result.returncode != 0 and message is None:
            raise AssertionError(f"refused by something else than the webhooks: {result.stderr}")
        return result.returncode == 0, message or "", stored

    def clean(self) -> None:
        """Every quota and pod of the replay gone, from the API and from the webhook's watch (the webhook
        stops serving the namespaces first, so it does not refuse the deletes)."""
        for ns in self.namespaces:
            kubectl(self.plane, "label", "namespace", ns, f"{LABEL}-")
        time.sleep(1)  # the API server's namespace cache follows the label
        for ns in self.namespaces:
            assert kubectl(self.plane, "delete", "elasticquotas,pods", "--all", "-n", ns).returncode == 0
        wait_until("the webhook's watch to drop the quotas", lambda: not self.server.runtime.quota_lookup.quotas())
        self.namespaces.clear()


def test_quota_tables_replayed(plane: ControlPlane, tmp_path: Path) -> None:
    server = WebhookThread(plane, tmp_path / "quota").start()
    register(plane, "quota", server)
    failures: list[Any] = []
    replayed: list[str] = []
    try:
        replay = QuotaReplay(plane, server, "rq-probe")
        replay.ensure("rq-probe")
        probe = {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "probe", "namespace": "rq-probe"},
            "spec": {"min": {"cpu": "2"}, "max": {"cpu": "1"}},
        }

        def refusing() -> bool:
            result = apply(plane, probe)
            if result.returncode == 0:  # created before the webhook was called: take it away, try again
                kubectl(plane, "delete", "elasticquota", "probe", "-n", "rq-probe")
            return denial(result, "velasticquota.koordinator.sh") is not None

        wait_until("the quota webhook serving", refusing)
        replay.clean()

        for name, steps in SEQUENCES.items():
            replay = QuotaReplay(plane, server, "rq-" + name.removeprefix("TestQuotaTopology_").lower())
            replay.ensure(replay.ns)
            for i, step in enumerate(steps):
                if not step.via_api:
                    continue
                allowed, message, stored = replay.step(step)
                replayed.append(f"{name}[{i}]")
                want_allowed = step.live_allowed if step.live_allowed is not None else step.want_allowed
                want_message = "" if step.live_allowed else step.want_message
                if (allowed, message) != (want_allowed, want_message):
                    failures.append((name, i, (allowed, message), (want_allowed, want_message)))
                labels = stored.get("metadata", {}).get("labels", {})
                for key, value in {**step.want_labels, **step.live_labels}.items():
                    if labels.get(key) != value:
                        failures.append((name, i, f"label {key}={labels.get(key)!r}", value))
            replay.clean()

        replay = QuotaReplay(plane, server, "rq-items")
        for case in SELF_ITEM:
            replay.ensure(replay.ns)
            allowed, message, _ = replay.step(Step("apply", case.quota))
            replayed.append(case.id)
            if (allowed, message) != (not case.want_message, case.want_message):
                failures.append(("basicItemCheck", case.id, (allowed, message), case.want_message))
            replay.clean()

        # Koordinator's test fills the defaults without validating (a child of a quota that is not a parent):
        # only the mutating webhook serves these namespaces.
        register(plane, "defaults", server, validating=False)
        for default_case in DEFAULTS:
            replay = QuotaReplay(plane, server, "rq-defaults", "defaults")
            replay.ensure(replay.ns)
            for obj, want_parent, want_weight, want_tree in default_case.quotas:
                allowed, message, stored = replay.step(Step("apply", obj))
                replayed.append(default_case.id)
                meta = stored.get("metadata", {})
                got = (
                    allowed,
                    meta.get("labels", {}).get(PREFIX + "parent"),
                    meta.get("annotations", {}).get(SHARED_WEIGHT),
                    meta.get("labels", {}).get(PREFIX + "tree-id", ""),
                )
                if got != (True, want_parent, want_weight, want_tree):
                    failures.append(("fillQuotaDefaultInformation", default_case.id, got, message))
            replay.clean()

        replay = QuotaReplay(plane, server, "rq-handler")
        replay.ensure(replay.ns)
        for handler_case in VALIDATING_HANDLER:
            if handler_case.obj is None:
                continue  # an empty object: the API server never sends one
            body = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", **handler_case.obj}
            allowed, message, _ = replay.step(Step("apply", body))
            replayed.append(handler_case.id)
            if allowed != handler_case.want_allowed:
                failures.append(("ElasticQuotaValidatingHandler", handler_case.id, allowed, message))
        replay.clean()
    finally:
        server.stop()
    assert failures == [], "\n".join(map(str, failures))
    steps = [s for seq in SEQUENCES.values() for s in seq if s.via_api]
    want_count = (
        len(steps)
        + len(SELF_ITEM)
        + sum(len(c.quotas) for c in DEFAULTS)
        + len([c for c in VALIDATING_HANDLER if c.obj is not None])
    )
    assert len(replayed) == want_count

    # The webhook down, failurePolicy Ignore: a quota it refuses is admitted (without defaults).
    replay.ensure(replay.ns)
    bad = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "bad", "namespace": replay.ns},
        "spec": {"min": {"cpu": "2"}, "max": {"cpu": "1"}},
    }
    result = apply(plane, bad)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metadata"].get("labels") is None
