"""The kopf side of the Reservation controller: indexes owner pods and nodes, runs :func:`decide` on a
timer per Reservation, and applies the decision. Only the leader acts (``is_leader``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED, GROUP, VERSION
from koord_scheduler.plugins.reservation.matching import parse_allocated_annotation
from koord_scheduler.scheduler.reservation_controller.decide import (
    ControllerOptions,
    OwnerPod,
    decide,
    owner_pod_from_raw,
)

log = logging.getLogger(__name__)

PLURAL = "reservations"


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """How to reach the API server: a kubeconfig file (None: the in-cluster service account)."""

    kubeconfig: str | None = None
    context: str | None = None


def _configuration(api: ApiSettings) -> k8s.Configuration:
    cfg = k8s.Configuration()
    if api.kubeconfig:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=api.kubeconfig, context=api.context, client_configuration=cfg
        )
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


def build_registry(
    api: ApiSettings,
    options: ControllerOptions,
    *,
    is_leader: Callable[[], bool],
    clock: Callable[[], float] = time.time,
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    cfg = _configuration(api)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        token = (cfg.api_key or {}).get("authorization", "")
        return kopf.ConnectionInfo(
            server=cfg.host,
            ca_path=cfg.ssl_ca_cert,
            insecure=not cfg.verify_ssl,
            certificate_path=cfg.cert_file,
            private_key_path=cfg.key_file,
            token=token.removeprefix("Bearer ") or None,
        )

    @kopf.index("pods", id="reservation_owners", registry=registry)
    def reservation_owners(body: kopf.Body, **_: Any) -> dict[str, OwnerPod] | None:
        annotations = body.get("metadata", {}).get("annotations") or {}
        if ANNOTATION_RESERVATION_ALLOCATED not in annotations:
            return None
        phase = (body.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") or body.get("metadata", {}).get("deletionTimestamp"):
            return None
        ref = parse_allocated_annotation(annotations)
        if ref is None:
            return None
        try:
            return {ref[1]: owner_pod_from_raw(dict(body))}
        except ValueError:
            return None

    @kopf.index("nodes", id="node_names", registry=registry)
    def node_names(name: str, **_: Any) -> dict[str, bool]:
        return {name: True}

    @kopf.timer(GROUP, VERSION, PLURAL, id="sync", interval=options.sync_interval_seconds, registry=registry)  # type: ignore[arg-type]
    async def sync(
        body: kopf.Body,
        name: str,
        reservation_owners: kopf.Index[str, OwnerPod],
        node_names: kopf.Index[str, bool],
        **_: Any,
    ) -> None:
        if not is_leader():
            return
        uid = body.get("metadata", {}).get("uid", "")
        node = (body.get("status") or {}).get("nodeName") or ""
        owners = list(reservation_owners.get(uid, []))
        decision = decide(dict(body), owners, node_exists=not node or node in node_names, now=clock(), options=options)
        if decision.delete:
            await asyncio.to_thread(_delete, cfg, name)
        elif decision.status_patch is not None:
            await asyncio.to_thread(_patch_status, cfg, name, dict(decision.status_patch))

    return registry


def _api(cfg: k8s.Configuration) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(k8s.ApiClient(cfg))


def _patch_status(cfg: k8s.Configuration, name: str, body: dict[str, Any]) -> None:
    api = _api(cfg)
    try:
        api.api_client.set_default_header("Content-Type", "application/merge-patch+json")
        api.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, name, body)
    except k8s.ApiException as exc:
        if exc.status != 404:
            log.warning("patching reservation %s status failed: %s", name, exc.reason)
    finally:
        api.api_client.close()


def _delete(cfg: k8s.Configuration, name: str) -> None:
    api = _api(cfg)
    try:
        api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        log.info("garbage-collected reservation %s", name)
    except k8s.ApiException as exc:
        if exc.status != 404:
            log.warning("deleting reservation %s failed: %s", name, exc.reason)
    finally:
        api.api_client.close()


async def run_reservation_controller(
    api: ApiSettings,
    options: ControllerOptions,
    stop: asyncio.Event,
    *,
    is_leader: Callable[[], bool] = lambda: True,
    clock: Callable[[], float] = time.time,
) -> None:
    """Run until ``stop`` is set. Acts only while ``is_leader()``; the caller owns leader election."""
    registry = build_registry(api, options, is_leader=is_leader, clock=clock)
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.persistence.finalizer = "scheduling.koordinator.sh/pykoord-reservation-controller"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="pykoord.koordinator.sh")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="pykoord.koordinator.sh")
    await kopf.operator(
        registry=registry,
        settings=settings,
        clusterwide=True,
        standalone=True,
        stop_flag=stop,
    )
