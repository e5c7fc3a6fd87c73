"""The ``/mutate-pod`` AdmissionReview handling and the TLS server, with an in-memory lookup."""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from apis.colocation import ResolvedProfile, resolve_profile
from koord_scheduler.webhook.admission import BadReviewError, ClusterLookupError, PodMutator, WebhookMetrics
from koord_scheduler.webhook.certs import generate_bundle, server_ssl_context, write_bundle
from koord_scheduler.webhook.jsonpatch import apply_patch
from koord_scheduler.webhook.mutation import PriorityClassInfo, ProfileSkip
from koord_scheduler.webhook.server import AdmissionServing, WebhookServer

Json = dict[str, Any]


class FakeLookup:
    def __init__(
        self, profiles: list[Json], *, namespaces: Mapping[str, Mapping[str, str]] | None = None, fail: bool = False
    ) -> None:
        self._profiles = [resolve_profile(p) for p in profiles]
        self.namespaces = namespaces or {"default": {}}
        self.fail = fail
        self.skips: list[ProfileSkip] = []

    def profiles(self) -> Sequence[ResolvedProfile]:
        return self._profiles

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        if self.fail:
            raise ClusterLookupError("GET namespaces/default: connection refused")
        return self.namespaces.get(name)

    async def priority_class(self, name: str) -> PriorityClassInfo | None:
        return {"koord-batch": PriorityClassInfo("koord-batch", 5000, "PreemptLowerPriority")}.get(name)

    def profile_skipped(self, skip: ProfileSkip) -> None:
        self.skips.append(skip)


PROFILE = {
    "metadata": {"name": "be"},
    "spec": {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "schedulerName": "koord-scheduler",
    },
}
COLOCATED = {"default": {"koordinator.sh/enable-colocation": "true"}}


def review(
    obj: Any = None,
    *,
    operation: str = "CREATE",
    resource: str = "pods",
    sub: str = "",
    version: str = "admission.k8s.io/v1",
    namespace: str = "default",
) -> Json:
    request: Json = {
        "uid": "u-1",
        "operation": operation,
        "namespace": namespace,
        "resource": {"group": "", "version": "v1", "resource": resource},
    }
    if sub:
        request["subResource"] = sub
    if obj is not None:
        request["object"] = obj
    return {"apiVersion": version, "kind": "AdmissionReview", "request": request}


def pod(labels: Json | None = None) -> Json:
    return {
        "metadata": {"generateName": "p-", "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }


def mutator(lookup: FakeLookup) -> tuple[PodMutator, CollectorRegistry]:
    registry = CollectorRegistry()
    return PodMutator(lookup, metrics=WebhookMetrics.create(registry), roll=lambda: 0), registry


@pytest.mark.parametrize(
    ("body", "want_patch"),
    [
        pytest.param(review(pod({"app": "web"})), False, id="pod-unmatched"),
        pytest.param(review(pod({"koordinator.sh/enable-colocation": "true"})), True, id="pod-matched"),
    ],
)
async def test_review(body: Json, want_patch: bool) -> None:
    m, _ = mutator(FakeLookup([PROFILE], namespaces=COLOCATED))
    answer = await m.review(body)
    assert answer["apiVersion"] == body["apiVersion"]
    assert answer["response"]["uid"] == "u-1"
    assert answer["response"]["allowed"] is True
    assert ("patch" in answer["response"]) is want_patch
    if want_patch:
        assert answer["response"]["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(answer["response"]["patch"]))
        patched = apply_patch(body["request"]["object"], ops)
        assert patched["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
        assert patched["spec"]["containers"][0]["resources"]["requests"] == {
            "kubernetes.io/batch-cpu": "1k",
            "kubernetes.io/batch-memory": "1Gi",
        }
        assert {"op": "add", "path": "/metadata/labels/koordinator.sh~1priority", "value": "1000"} in ops


@pytest.mark.parametrize(
    ("body", "want_message"),
    [
        pytest.param(
            review(pod(), resource="configmaps"),
            "this webhook serves CREATE of pods; got 'CREATE' of ''/",
            id="not-a-pod",
        ),
        pytest.param(review(pod(), sub="status"), "subresource 'status'", id="pod-subresource"),
        pytest.param(
            review(pod({"koordinator.sh/enable-colocation": "true"}), operation="UPDATE"),
            "got 'UPDATE' of",
            id="update",
        ),
        pytest.param(
            review(pod(), version="admission.k8s.io/v1beta1"), "apiVersion: expected admission.k8s.io/v1", id="v1beta1"
        ),
        pytest.param(review(None), "request.object: expected the object of the CREATE", id="no-object"),
        pytest.param(review({"metadata": {}}), "request.object: expected a pod with metadata and spec", id="no-spec"),
        pytest.param(review(pod(), namespace="Default"), "request.namespace 'Default' is invalid", id="bad-namespace"),
        pytest.param(
            review({"metadata": {"name": "a b"}, "spec": {}}),
            "request.object.metadata.name 'a b' is invalid",
            id="bad-pod-name",
        ),
    ],
)
async def test_review_it_does_not_serve_is_refused_with_the_uid(body: Json, want_message: str) -> None:
    lookup = FakeLookup([PROFILE], namespaces=COLOCATED)
    m, _ = mutator(lookup)
    with pytest.raises(BadReviewError) as info:
        await m.review(body)
    assert info.value.uid == "u-1"
    assert want_message in str(info.value)


@pytest.mark.parametrize(
    ("body", "lookup", "reason"),
    [
        pytest.param(
            review(pod({"koordinator.sh/enable-colocation": "true"})),
            FakeLookup([PROFILE], fail=True),
            "LookupFailed",
            id="namespace-lookup-failed",
        ),
        pytest.param(
            review(
                {
                    "metadata": {"annotations": {"node.koordinator.sh/extended-resource-spec": "["}},
                    "spec": {"containers": []},
                }
            ),
            FakeLookup([]),
            "CannotMutate",
            id="bad-extended-resource-spec",
        ),
    ],
)
async def test_cannot_mutate_is_admitted_unchanged_and_counted(body: Json, lookup: FakeLookup, reason: str) -> None:
    m, registry = mutator(lookup)
    answer = await m.review(body)
    assert answer["response"] == {"uid": "u-1", "allowed": True}
    assert registry.get_sample_value("koord_webhook_pod_mutation_errors_total", {"reason": reason}) == 1.0


async def test_skipped_profile_is_reported() -> None:
    lookup = FakeLookup([{"metadata": {"name": "x"}, "spec": {"priorityClassName": "missing", "labels": {"a": "b"}}}])
    m, _ = mutator(lookup)
    answer = await m.review(review(pod()))
    assert "patch" not in answer["response"]
    assert [s.reason for s in lookup.skips] == ["PriorityClassNotFound"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_tls_server_answers_with_a_generated_ca(tmp_path: Path) -> None:
    bundle = generate_bundle(["127.0.0.1"])
    write_bundle(bundle, tmp_path)
    m, _ = mutator(FakeLookup([PROFILE], namespaces=COLOCATED))
    server = WebhookServer(m, server_ssl_context(tmp_path), serving=AdmissionServing("127.0.0.1", _free_port()))
    await server.start()
    try:
        client_ctx = ssl.create_default_context(cadata=bundle.ca_pem.decode())
        async with aiohttp.ClientSession() as session:
            url = f"https://127.0.0.1:{server.port}"
            async with session.post(
                f"{url}/mutate-pod", json=review(pod({"koordinator.sh/enable-colocation": "true"})), ssl=client_ctx
            ) as resp:
                assert resp.status == 200
                assert "patch" in (await resp.json())["response"]
            async with session.post(f"{url}/validate-pod", json=review(pod()), ssl=client_ctx) as resp:
                assert (await resp.json())["response"] == {"uid": "u-1", "allowed": True}
            async with session.post(f"{url}/mutate-pod", data=b"{}", ssl=client_ctx) as resp:
                assert resp.status == 400
    finally:
        await server.stop()
