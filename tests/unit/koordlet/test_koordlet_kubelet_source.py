"""The kubelet pod source against a real local HTTP(S) server of the test's own serving a PodList."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import logging
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from koordlet_fakes import make_raw_pod

from apis.extension import QoSClass
from koordlet.app.cli import build_parser
from koordlet.statesinformer import RegisterType, StatesInformer
from koordlet.statesinformer.kubelet import KubeletOptions, KubeletPodSource
from koordlet.system import CgroupDriver, CgroupLayout


class FakeKubelet:
    """``GET /pods`` returns ``self.items`` as a PodList; records each request's Authorization header."""

    def __init__(self, port: int = 0) -> None:
        self.items: list[Any] = []
        self.status = 200
        self.auth: list[str | None] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.auth.append(self.headers.get("Authorization"))
                if self.path.rstrip("/") != "/pods":
                    self.send_error(404)
                    return
                body = json.dumps({"kind": "PodList", "apiVersion": "v1", "items": fake.items}).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]

    def serve(self) -> None:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    fake = FakeKubelet()
    fake.serve()
    yield fake
    fake.close()


def _informer() -> StatesInformer:
    return StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.CGROUPFS))


def _source(informer: StatesInformer, port: int, **kw: Any) -> KubeletPodSource:
    opts = {"address": "127.0.0.1", "port": port, "scheme": "http", "timeout": 2.0, "sync_interval": 0.05}
    return KubeletPodSource(KubeletOptions(**{**opts, **kw}), informer)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_pods_parsed_like_the_apiserver_source_and_callbacks_fire(kubelet: FakeKubelet, tmp_path: Path) -> None:
    kubelet.items = [
        make_raw_pod("web", "uid-web", qos="Guaranteed", priority=9500),
        make_raw_pod("job", "uid-job", qos="BestEffort", labels={"koordinator.sh/qosClass": "BE"}, priority=5500),
    ]
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    informer = _informer()
    fired: list[int] = []
    informer.register_callback(RegisterType.ALL_PODS, "count", lambda _t, inf: fired.append(len(inf.get_all_pods())))
    source = _source(informer, kubelet.port, token_file=token)

    assert source.sync_once()
    assert informer.has_synced(RegisterType.ALL_PODS)
    assert fired == [2]
    assert kubelet.auth == ["Bearer s3cret"]
    reference = _informer()
    reference.replace_pods(kubelet.items)
    assert {p.uid: p for p in informer.get_all_pods()} == {p.uid: p for p in reference.get_all_pods()}
    assert informer.get_pod("uid-job") is not None and informer.get_pod("uid-job").qos is QoSClass.BE  # type: ignore[union-attr]

    kubelet.items = kubelet.items[:1]  # the job finished
    assert source.sync_once()
    assert [p.uid for p in informer.get_all_pods()] == ["uid-web"]
    assert fired == [2, 1]


def test_bad_pod_is_logged_and_skipped(kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture) -> None:
    kubelet.items = [
        "not-a-pod",
        {"metadata": "broken", "spec": {}},
        {"metadata": {"name": "no-uid"}},
        make_raw_pod("ok", "uid-ok"),
    ]
    informer = _informer()
    source = _source(informer, kubelet.port)
    with caplog.at_level(logging.WARNING, logger="koordlet.statesinformer.kubelet"):
        assert source.sync_once()
    assert [p.uid for p in informer.get_all_pods()] == ["uid-ok"]
    assert source.skipped_pods == 3
    assert sum("skipping item" in r.getMessage() for r in caplog.records) == 3


def test_empty_list_and_http_errors_keep_the_last_pods(kubelet: FakeKubelet) -> None:
    kubelet.items = [make_raw_pod("web", "uid-web")]
    informer = _informer()
    source = _source(informer, kubelet.port)
    assert source.sync_once()
    kubelet.items = []  # kubelet just restarted: not trusted
    assert not source.sync_once()
    kubelet.items, kubelet.status = [make_raw_pod("web", "uid-web")], 401
    assert not source.sync_once()
    assert "401" in (source.last_error or "")
    assert [p.uid for p in informer.get_all_pods()] == ["uid-web"]
    assert source.failures == 2


async def test_unreachable_kubelet_is_reported_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    port = _free_port()
    informer = _informer()
    source = _source(informer, port)
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="koordlet.statesinformer.kubelet"):
        task = asyncio.create_task(source.run(stop))
        for _ in range(200):
            if source.failures >= 2:
                break
            await asyncio.sleep(0.02)
        assert source.failures >= 2 and not task.done()
        assert not informer.has_synced(RegisterType.ALL_PODS)
        assert any("kubelet pod sync" in r.getMessage() for r in caplog.records)

        # The kubelet comes up on that port: the next poll succeeds.
        late = FakeKubelet(port)
        late.items = [make_raw_pod("web", "uid-web")]
        late.serve()
        try:
            for _ in range(200):
                if source.syncs:
                    break
                await asyncio.sleep(0.02)
            assert [p.uid for p in informer.get_all_pods()] == ["uid-web"]
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=5)
            late.close()


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A cert for 127.0.0.1 and its key: via ``cryptography`` if installed, else the openssl CLI, else skip."""
    cert, key = tmp_path / "kubelet.crt", tmp_path / "kubelet.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor openssl is available")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=kubelet",
             "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True, capture_output=True,
        )  # fmt: skip
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubelet")])
    now = datetime.datetime.now(datetime.UTC)
    built = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


def test_https_with_ca_file_and_insecure_skip_verify(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    fake = FakeKubelet()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    fake.server.socket = tls.wrap_socket(fake.server.socket, server_side=True)
    fake.items = [make_raw_pod("web", "uid-web")]
    fake.serve()
    try:
        unverified = _source(_informer(), fake.port, scheme="https")
        assert not unverified.sync_once()  # self-signed, not trusted: refused
        assert "CERTIFICATE_VERIFY_FAILED" in (unverified.last_error or "")
        for kw in ({"ca_file": cert}, {"insecure_skip_verify": True}):
            informer = _informer()
            assert _source(informer, fake.port, scheme="https", **kw).sync_once(), kw
            assert [p.uid for p in informer.get_all_pods()] == ["uid-web"]
    finally:
        fake.close()


def test_cli_flags(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text("secret")
    args = build_parser().parse_args(["--node-name", "n"])
    assert args.pods_source == "apiserver" and args.kubelet_port == 10250 and args.kubelet_scheme == "https"
    args = build_parser().parse_args(
        ["--pods-source=kubelet", "--kubelet-address", "10.0.0.5", "--kubelet-insecure-skip-verify",
         "--kubelet-token-file", str(token)]
    )  # fmt: skip
    assert args.pods_source == "kubelet" and args.kubelet_address == "10.0.0.5"
    assert args.kubelet_insecure_skip_verify and args.kubelet_token_file == token
    assert KubeletOptions(address="fd00::1").url == "https://[fd00::1]:10250/pods"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--pods-source=cadvisor"])
