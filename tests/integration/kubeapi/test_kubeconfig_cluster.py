"""kubeapi's own kubeconfig loader against a real kube-apiserver: client certificate and CA files at
paths relative to the kubeconfig, an inline token and a ``tokenFile`` each reach the server as the
identity they name (a SelfSubjectReview says who the server thinks the caller is: the static token file
gives the admin a uid, the certificate does not), and a wrong token is refused with 401."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane

from kubeapi import ApiHttp, TokenBucket, load_connection
from kubeapi.http import ApiError

pytestmark = pytest.mark.integration

REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def _kubeconfig(folder: Path, server: str, user: dict[str, Any]) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": "pki/ca.crt"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def _user_info(kubeconfig: str) -> dict[str, Any]:
    http = ApiHttp(load_connection(kubeconfig), TokenBucket(0, 0))
    try:
        review = await http.request_json("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=REVIEW)
    finally:
        await http.close()
    info: dict[str, Any] = review["status"]["userInfo"]
    return info


@pytest.fixture
def folder(tmp_path: Path, control_plane: ControlPlane) -> Path:
    (tmp_path / "pki").mkdir()
    shutil.copy(control_plane.ca_file, tmp_path / "pki" / "ca.crt")
    shutil.copy(control_plane.client_cert_file, tmp_path / "pki" / "client.crt")
    shutil.copy(control_plane.client_key_file, tmp_path / "pki" / "client.key")
    (tmp_path / "token").write_text(control_plane.token + "\n")
    return tmp_path


def _server(control_plane: ControlPlane) -> str:
    return str(load_connection(str(control_plane.kubeconfig)).server)


async def test_relative_certificate_files(folder: Path, control_plane: ControlPlane) -> None:
    user = {"client-certificate": "pki/client.crt", "client-key": "pki/client.key"}
    info = await _user_info(_kubeconfig(folder, _server(control_plane), user))
    # The certificate's user: the same name as the token's, but no uid (the token file gives one).
    assert info["username"] == "pykoord-admin" and "uid" not in info, info


@pytest.mark.parametrize("user", [{"token": "INLINE"}, {"tokenFile": "token"}], ids=["token", "tokenFile"])
async def test_tokens(folder: Path, control_plane: ControlPlane, user: dict[str, str]) -> None:
    user = {k: control_plane.token if v == "INLINE" else v for k, v in user.items()}
    info = await _user_info(_kubeconfig(folder, _server(control_plane), user))
    assert (info["username"], info.get("uid")) == ("pykoord-admin", "pykoord-admin"), info


async def test_a_wrong_token_is_refused(folder: Path, control_plane: ControlPlane) -> None:
    with pytest.raises(ApiError) as info:
        await _user_info(_kubeconfig(folder, _server(control_plane), {"token": "not-the-token"}))
    assert info.value.status == 401
