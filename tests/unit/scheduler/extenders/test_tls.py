"""``enableHTTPS`` and ``tlsConfig`` against a TLS extender whose certificate a generated CA signed."""

from __future__ import annotations

import base64
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from apis.config.extender import Extender
from koord_scheduler.extenders import ExtenderError, HTTPExtender
from tests.builders import make_node, make_pod
from tests.extender_fake import node_names, serve_extender

POD = make_pod("p").req(cpu="1").build()
NODES = [make_node("a").capacity(cpu="4").build()]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _issue(folder: Path, name: str, subject: str, ca: str, ext: str = "") -> None:
    key, csr, crt = (str(folder / f"{name}.{s}") for s in ("key", "csr", "crt"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-subj", subject, "-out", csr)
    extra = ["-extfile", str(folder / f"{name}.ext")] if ext else []
    if ext:
        (folder / f"{name}.ext").write_text(ext)
    _openssl(
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        f"{folder}/{ca}.crt",
        "-CAkey",
        f"{folder}/{ca}.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        crt,
        *extra,
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{folder}/{ca}.key",
            "-subj",
            f"/CN={ca}",
            "-days",
            "1",
            "-out",
            f"{folder}/{ca}.crt",
        )
    _issue(folder, "server", "/CN=extender", "ca", "subjectAltName=DNS:extender.test,IP:127.0.0.1\n")
    _issue(folder, "client", "/CN=scheduler", "ca", "extendedKeyUsage=clientAuth\n")
    return folder


def server_context(pki: Path, *, require_client: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
    if require_client:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki / "ca.crt")
    return ctx


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def call(url: str, **fields: Any) -> tuple[str, ...] | None:
    ext = HTTPExtender(
        Extender.model_validate(
            {"urlPrefix": url, "filterVerb": "filter", "httpTimeout": "2s", "nodeCacheCapable": True, **fields}
        )
    )
    return ext.filter(POD, NODES).node_names


ANSWER = {"filter": lambda b: {"NodeNames": node_names(b)}}


def test_ca_file_verifies_the_server(pki: Path) -> None:
    with serve_extender(ANSWER, tls=server_context(pki)) as f:
        assert call(f.url, enableHTTPS=True, tlsConfig={"caFile": str(pki / "ca.crt")}) == ("a",)


def test_ca_data_and_server_name(pki: Path) -> None:
    with serve_extender(ANSWER, tls=server_context(pki)) as f:
        tls = {"caData": b64(pki / "ca.crt"), "serverName": "extender.test"}
        assert call(f.url, enableHTTPS=True, tlsConfig=tls) == ("a",)


def test_wrong_ca_is_refused(pki: Path) -> None:
    with serve_extender(ANSWER, tls=server_context(pki)) as f, pytest.raises(ExtenderError, match=f.url):
        call(f.url, enableHTTPS=True, tlsConfig={"caFile": str(pki / "other-ca.crt")})


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"enableHTTPS": True}, id="https-without-ca-skips-verification"),
        pytest.param({"tlsConfig": {"insecure": True}}, id="insecure"),
    ],
)
def test_unverified_connections(pki: Path, fields: dict[str, Any]) -> None:
    with serve_extender(ANSWER, tls=server_context(pki)) as f:
        assert call(f.url, **fields) == ("a",)


@pytest.mark.parametrize("inline", [True, False], ids=["cert-data", "cert-file"])
def test_client_certificate(pki: Path, inline: bool) -> None:
    if inline:
        tls = {"caData": b64(pki / "ca.crt"), "certData": b64(pki / "client.crt"), "keyData": b64(pki / "client.key")}
    else:
        tls = {"caFile": str(pki / "ca.crt"), "certFile": str(pki / "client.crt"), "keyFile": str(pki / "client.key")}
    with serve_extender(ANSWER, tls=server_context(pki, require_client=True)) as f:
        assert call(f.url, enableHTTPS=True, tlsConfig=tls) == ("a",)
        with pytest.raises(ExtenderError):
            call(f.url, enableHTTPS=True, tlsConfig={"caFile": str(pki / "ca.crt")})
