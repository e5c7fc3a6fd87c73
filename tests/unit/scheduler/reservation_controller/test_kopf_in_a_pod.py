"""How the Reservation controller presents itself to kopf in a pod (both found on the real node).

It names itself without the passwd database: the chart runs
koord-scheduler as uid 65532, which pykoord's image has no passwd entry for, and kopf's own default
(``getpass.getuser()``) raised KeyError there, stopping the controller. tests/node/test_chart_on_node.py
runs the image as the chart does and fails on any ERROR line koord-scheduler logs."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.incluster_config import InClusterConfigLoader

from koord_scheduler.scheduler.reservation_controller.operator import connection_info, kopf_identity


def test_kopf_identity_names_host_and_process() -> None:
    assert kopf_identity() == f"koord-scheduler@{os.uname().nodename}/{os.getpid()}"


def test_kopf_gets_the_bare_in_cluster_token(tmp_path: Path) -> None:
    """In a pod the kubernetes client keeps the ServiceAccount token as ``bearer <token>``: kopf must get
    the token alone (with the scheme it sent ``Bearer bearer ...`` and every request was a 401)."""
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("the-token")
    ca.write_text("not checked here\n")
    cfg = k8s.Configuration()
    InClusterConfigLoader(str(token), str(ca), environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                                        "KUBERNETES_SERVICE_PORT": "443"}).load_and_set(cfg)
    info = connection_info(cfg)
    assert (info.server, info.token, info.ca_path) == ("https://10.0.0.1:443", "the-token", str(ca))


def test_kopf_gets_the_bare_kubeconfig_token(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": "kubeconfig-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    cfg = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    assert connection_info(cfg).token == "kubeconfig-token"
