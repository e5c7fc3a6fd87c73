"""kubeapi's own kubeconfig and in-cluster loaders: each field, bad input naming the field, TLS with
the resolved certificates (a local TLS server that asks for a client certificate), token rotation, the
kubernetes client's loader for ``exec`` users only, and no ``kubernetes`` import on the serve path."""

from __future__ import annotations

import base64
import json
import queue
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeapi import connection
from kubeapi.connection import KubeConfigError, load_connection, load_in_cluster
from kubeapi.kubeconfig import KubeconfigEntry, parse_kubeconfig, read_kubeconfig

ROOT = Path(__file__).resolve().parents[3]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt/key; server.crt/key for 127.0.0.1 and kube.test; client.crt/key."""
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/ca.key", "-subj", "/CN=ca",
             "-days", "1", "-out", f"{d}/ca.crt")  # fmt: skip
    for name, ext in (
        ("server", "subjectAltName=DNS:kube.test,IP:127.0.0.1\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        (d / f"{name}.ext").write_text(ext)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/{name}.key", "-subj", f"/CN={name}",
                 "-out", f"{d}/{name}.csr")  # fmt: skip
        _openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
                 "-CAcreateserial", "-days", "1", "-out", f"{d}/{name}.crt", "-extfile", f"{d}/{name}.ext")  # fmt: skip
    return d


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    return doc


def write(tmp_path: Path, doc: Any, name: str = "kubeconfig") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


# --- parsing, one field at a time --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        pytest.param(kubeconfig(), {"server": "https://127.0.0.1:6443", "context": "x", "user": "u"}, id="minimal"),
        pytest.param(kubeconfig({"server": "https://h:1/"}), {"server": "https://h:1"}, id="trailing-slash"),
        pytest.param(
            kubeconfig({"server": "http://h:8080", "certificate-authority": "no/such/ca"}),
            {"server": "http://h:8080", "ca_file": None},
            id="http-ignores-tls",
        ),
        pytest.param(kubeconfig({"insecure-skip-tls-verify": True}), {"insecure": True}, id="insecure"),
        pytest.param(kubeconfig({"tls-server-name": "kube.test"}), {"tls_server_name": "kube.test"}, id="sni"),
        pytest.param(
            kubeconfig({"certificate-authority-data": base64.b64encode(b"PEM").decode()}),
            {"ca_data": b"PEM", "ca_file": None},
            id="ca-data",
        ),
        pytest.param(
            kubeconfig({"certificate-authority-data": "UE\nVN", "certificate-authority": "ignored"}),
            {"ca_data": b"PEM", "ca_file": None},
            id="ca-data-wins-over-file",
        ),
        pytest.param(
            kubeconfig({"certificate-authority": "ca.crt"}), {"ca_file": "BASE/ca.crt"}, id="ca-file-relative"
        ),
        pytest.param(
            kubeconfig(user={"client-certificate": "client.crt", "client-key": "../base/client.key"}),
            {"cert_file": "BASE/client.crt", "key_file": "BASE/client.key"},
            id="client-cert-files-relative",
        ),
        pytest.param(
            kubeconfig(user={"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}),
            {"cert_data": b"CERT", "key_data": b"KEY"},
            id="client-cert-data",
        ),
        pytest.param(kubeconfig(user={"token": "t0"}), {"token": "t0", "token_file": None}, id="token"),
        pytest.param(
            kubeconfig(user={"tokenFile": "token"}), {"token": "from-file", "token_file": "BASE/token"}, id="token-file"
        ),
        pytest.param(
            kubeconfig(user={"token": "inline", "tokenFile": "token"}),
            {"token": "inline", "token_file": None},
            id="token-wins-over-file",
        ),
        pytest.param(
            kubeconfig(user={"username": "a", "password": "b"}), {"basic": ("a", "b"), "token": None}, id="basic"
        ),
        pytest.param(kubeconfig(user={"exec": {"command": "x"}}), {"plugin": "exec"}, id="exec"),
        pytest.param(kubeconfig(user={"auth-provider": {"name": "oidc"}}), {"plugin": "auth-provider"}, id="provider"),
        pytest.param(
            {**kubeconfig(), "contexts": [{"name": "x", "context": {"cluster": "c"}}]}, {"user": ""}, id="no-user"
        ),
    ],
)
def test_fields(tmp_path: Path, doc: dict[str, Any], want: dict[str, Any]) -> None:
    base = tmp_path / "base"
    base.mkdir()
    for name in ("ca.crt", "client.crt", "client.key"):
        (base / name).write_text("x")
    (base / "token").write_text("from-file\n")
    entry = parse_kubeconfig(doc, base_dir=str(base))
    got = {field: getattr(entry, field) for field in want}
    expected = {k: v.replace("BASE", str(base)) if isinstance(v, str) else v for k, v in want.items()}
    assert got == expected


def test_a_named_context_wins_over_current_context() -> None:
    doc = kubeconfig()
    doc["clusters"].append({"name": "c2", "cluster": {"server": "https://other:1"}})
    doc["contexts"].append({"name": "y", "context": {"cluster": "c2"}})
    assert parse_kubeconfig(doc, base_dir="/").server == "https://127.0.0.1:6443"
    assert parse_kubeconfig(doc, base_dir="/", context="y").server == "https://other:1"


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        pytest.param("- a\n- list\n", "not a kubeconfig: want a mapping", id="not-a-mapping"),
        pytest.param("clusters: [\n", "invalid YAML: ", id="bad-yaml"),
        pytest.param({**kubeconfig(), "current-context": ""}, "current-context is not set", id="no-current-context"),
        pytest.param({**kubeconfig(), "current-context": "nope"}, "context 'nope' is not in contexts", id="no-context"),
        pytest.param({**kubeconfig(), "clusters": []}, "cluster 'c' is not in clusters", id="missing-cluster"),
        pytest.param({**kubeconfig(), "users": []}, "user 'u' is not in users", id="missing-user"),
        pytest.param(
            {**kubeconfig(), "contexts": [{"name": "x", "context": {"user": "u"}}]},
            "context 'x': cluster is not set",
            id="context-without-cluster",
        ),
        pytest.param(
            {**kubeconfig(), "clusters": [{"name": "c", "cluster": {}}]},
            "cluster 'c': server is not set",
            id="no-server",
        ),
        pytest.param(
            kubeconfig({"server": "h:6443"}), "cluster 'c': server 'h:6443': want an https://", id="no-scheme"
        ),
        pytest.param(
            kubeconfig({"proxy-url": "http://proxy:3128"}), "cluster 'c': proxy-url is not supported", id="proxy-url"
        ),
        pytest.param(
            kubeconfig({"insecure-skip-tls-verify": "yes"}),
            "cluster 'c': insecure-skip-tls-verify: want true or false",
            id="insecure",
        ),
        pytest.param(
            kubeconfig({"certificate-authority-data": "not base64!"}),
            "cluster 'c': certificate-authority-data: not valid base64",
            id="bad-base64-ca",
        ),
        pytest.param(
            kubeconfig(user={"client-key-data": "%%%"}),
            "user 'u': client-key-data: not valid base64",
            id="bad-base64-key",
        ),
        pytest.param(
            kubeconfig({"certificate-authority": "missing-ca.crt"}),
            "cluster 'c': certificate-authority 'DIR/missing-ca.crt': no such file",
            id="missing-ca-file",
        ),
        pytest.param(
            kubeconfig(user={"client-certificate": "/nonexistent/c.crt"}),
            "user 'u': client-certificate '/nonexistent/c.crt': no such file",
            id="missing-cert-file",
        ),
        pytest.param(
            kubeconfig(user={"client-key-data": "S0VZ"}),
            "user 'u': client-key is set without client-certificate",
            id="key-only",
        ),
        pytest.param(
            kubeconfig(user={"tokenFile": "nothing-here"}),
            "user 'u': tokenFile 'DIR/nothing-here': cannot read: ",
            id="missing-token-file",
        ),
        pytest.param(
            kubeconfig(user={"tokenFile": "empty"}), "user 'u': tokenFile 'DIR/empty': the file is empty", id="empty"
        ),
        pytest.param(kubeconfig(user={"username": "a"}), "user 'u': username and password go together", id="basic"),
        pytest.param(kubeconfig(user={"token": 7}), "user 'u': token: want a string", id="token-not-a-string"),
        pytest.param(
            {**kubeconfig(), "clusters": [{"name": "c", "cluster": {"server": "https://a"}}] * 2},
            "clusters: two entries are named 'c'",
            id="duplicate",
        ),
        pytest.param({**kubeconfig(), "users": [{"user": {}}]}, "users[0]: want a mapping with a name", id="nameless"),
    ],
)
def test_bad_input_names_the_file_and_field(tmp_path: Path, doc: Any, reason: str) -> None:
    (tmp_path / "empty").write_text("\n")
    path = write(tmp_path, doc)
    reason = reason.replace("DIR", str(tmp_path))
    with pytest.raises(KubeConfigError) as info:
        load_connection(path)
    assert str(info.value).startswith(f"kubeconfig {path!r}: {reason}"), str(info.value)
    assert info.value.reason.startswith(reason) and "\n" not in info.value.reason


def test_unreadable_certificate_file_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "client.crt").write_text("not a certificate\n")
    path = write(tmp_path, kubeconfig(user={"client-certificate": "client.crt", "token": "t"}))
    with pytest.raises(KubeConfigError, match=r"user 'u': client-certificate/client-key: TLS setup failed"):
        load_connection(path)
    path = write(tmp_path, kubeconfig({"certificate-authority-data": base64.b64encode(b"-----BEGIN junk").decode()}))
    with pytest.raises(KubeConfigError, match=r"cluster 'c': certificate-authority-data: TLS setup failed"):
        load_connection(path)


# --- connections: TLS handshakes and credentials ---------------------------------------------------


class TlsServer:
    """Accepts one TLS connection at a time on 127.0.0.1, asking for a client certificate signed by the
    CA; records the client's certificate subject (or the handshake error)."""

    def __init__(self, pki: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(pki / "server.crt", pki / "server.key")
        self.context.load_verify_locations(pki / "ca.crt")
        self.context.verify_mode = ssl.CERT_OPTIONAL
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.peers: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    self.peers.put(tls.getpeercert())
            except (ssl.SSLError, OSError) as exc:
                self.peers.put(exc)

    def handshake(self, ctx: ssl.SSLContext | None, server_name: str | None = None) -> None:
        assert ctx is not None
        with (
            socket.create_connection(("127.0.0.1", self.port)) as raw,
            ctx.wrap_socket(raw, server_hostname=server_name or "127.0.0.1") as tls,
        ):
            tls.do_handshake()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def tls_server(pki: Path) -> Any:
    server = TlsServer(pki)
    yield server
    server.close()


def _subject(peer: Any) -> str:
    return dict(pair[0] for pair in peer["subject"])["commonName"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("inline", [False, True], ids=["files", "data"])
def test_client_certificate_and_ca_reach_the_handshake(
    tmp_path: Path, pki: Path, tls_server: TlsServer, inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    if inline:
        cluster = {"certificate-authority-data": _b64(pki / "ca.crt")}
        user = {"client-certificate-data": _b64(pki / "client.crt"), "client-key-data": _b64(pki / "client.key")}
    else:
        (tmp_path / "certs").symlink_to(pki)
        cluster = {"certificate-authority": "certs/ca.crt"}
        user = {"client-certificate": "certs/client.crt", "client-key": "certs/client.key"}
    conn = load_connection(
        write(tmp_path, kubeconfig({"server": f"https://127.0.0.1:{tls_server.port}", **cluster}, user))
    )
    assert conn.server == f"https://127.0.0.1:{tls_server.port}" and conn.authorization() is None
    assert conn.description == f"kubeconfig {tmp_path / 'kubeconfig'}"
    tls_server.handshake(conn.ssl_context)
    assert _subject(tls_server.peers.get(timeout=10)) == "client"
    tls_server.handshake(conn.h2_ssl_context())  # the HTTP/2 context has the same CA and client certificate
    assert _subject(tls_server.peers.get(timeout=10)) == "client"
    assert not list(scratch.iterdir()), "temporary key files are removed"


def test_wrong_ca_fails_the_handshake_and_insecure_skips_it(tmp_path: Path, pki: Path, tls_server: TlsServer) -> None:
    other = tmp_path / "other-ca.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "o.key"), "-subj", "/CN=o",
             "-days", "1", "-out", str(other))  # fmt: skip
    server = f"https://127.0.0.1:{tls_server.port}"
    conn = load_connection(write(tmp_path, kubeconfig({"server": server, "certificate-authority": str(other)})))
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_server.handshake(conn.ssl_context)
    insecure = {"server": server, "certificate-authority": str(other), "insecure-skip-tls-verify": True}
    conn = load_connection(write(tmp_path, kubeconfig(insecure)))
    tls_server.handshake(conn.ssl_context)  # no verification at all


def test_tls_server_name_is_the_name_checked(tmp_path: Path, pki: Path, tls_server: TlsServer) -> None:
    cluster = {"server": f"https://127.0.0.1:{tls_server.port}", "certificate-authority": str(pki / "ca.crt")}
    conn = load_connection(write(tmp_path, kubeconfig({**cluster, "tls-server-name": "kube.test"})))
    assert conn.tls_server_name == "kube.test"
    tls_server.handshake(conn.ssl_context, conn.tls_server_name)
    conn = load_connection(write(tmp_path, kubeconfig({**cluster, "tls-server-name": "wrong.test"})))
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_server.handshake(conn.ssl_context, conn.tls_server_name)


@pytest.mark.parametrize(
    ("user", "want"),
    [
        pytest.param({"token": "abc"}, "Bearer abc", id="token"),
        pytest.param(
            {"username": "admin", "password": "s:cret"},
            "Basic " + base64.b64encode(b"admin:s:cret").decode(),
            id="basic",
        ),
        pytest.param({}, None, id="none"),
    ],
)
def test_authorization_header(tmp_path: Path, user: dict[str, Any], want: str | None) -> None:
    assert load_connection(write(tmp_path, kubeconfig(user=user))).authorization() == want


def test_token_file_is_read_again_as_it_rotates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    conn = load_connection(write(tmp_path, kubeconfig(user={"tokenFile": "token"})))
    token.write_text("two\n")
    assert conn.authorization() == "Bearer one"  # reused for TOKEN_CACHE_SECONDS
    monkeypatch.setattr(connection, "TOKEN_CACHE_SECONDS", -1.0)
    assert conn.authorization() == "Bearer two"
    token.unlink()
    assert conn.authorization() == "Bearer two"  # a failed re-read keeps the token read before


def test_exec_users_go_through_the_kubernetes_client(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.sh"
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "from-exec"}}  # fmt: skip
    plugin.write_text(f"#!/bin/sh\necho '{json.dumps(credential)}'\n")
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                     "interactiveMode": "Never"}}  # fmt: skip
    conn = load_connection(write(tmp_path, kubeconfig({"insecure-skip-tls-verify": True}, user)))
    assert conn.authorization() == "Bearer from-exec"


def test_read_kubeconfig_returns_the_entry(tmp_path: Path) -> None:
    entry = read_kubeconfig(write(tmp_path, kubeconfig(user={"token": "t"})))
    assert entry == KubeconfigEntry(server="https://127.0.0.1:6443", context="x", cluster="c", user="u", token="t")


# --- in-cluster -----------------------------------------------------------------------------------


@pytest.fixture
def service_account(tmp_path: Path, pki: Path) -> dict[str, str]:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes((pki / "ca.crt").read_bytes())
    return {"token_file": str(tmp_path / "token"), "ca_file": str(tmp_path / "ca.crt")}


@pytest.mark.parametrize(
    ("host", "want"),
    [
        ("10.96.0.1", "https://10.96.0.1:443"),
        ("fd00::1", "https://[fd00::1]:443"),
        ("kube.test", "https://kube.test:443"),
    ],
)
def test_in_cluster_server(service_account: dict[str, str], host: str, want: str) -> None:
    conn = load_in_cluster({"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}, **service_account)
    assert conn.server == want and conn.description == "in-cluster service account"
    assert conn.authorization() == "Bearer sa-token"


def test_in_cluster_token_rotation(service_account: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    conn = load_in_cluster({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, **service_account)
    Path(service_account["token_file"]).write_text("rotated")
    assert conn.authorization() == "Bearer sa-token"
    monkeypatch.setattr(connection, "TOKEN_CACHE_SECONDS", -1.0)
    assert conn.authorization() == "Bearer rotated"


def test_in_cluster_handshake(service_account: dict[str, str], tls_server: TlsServer) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(tls_server.port)}
    conn = load_in_cluster(env, **service_account)
    tls_server.handshake(conn.ssl_context)
    tls_server.handshake(conn.h2_ssl_context())


@pytest.mark.parametrize(
    ("env", "change", "reason"),
    [
        ({"KUBERNETES_SERVICE_HOST": "h"}, None, "KUBERNETES_SERVICE_PORT is unset or empty"),
        ({"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": "1"}, None, "KUBERNETES_SERVICE_HOST is unset"),
        (None, "no-token", "service account token TOKEN: cannot read: "),
        (None, "empty-token", "service account token TOKEN: the file is empty"),
        (None, "no-ca", "service account CA <CA>: "),
        (None, "empty-ca", "service account CA <CA>: the file is empty"),
    ],
)
def test_in_cluster_errors(
    service_account: dict[str, str], env: dict[str, str] | None, change: str | None, reason: str
) -> None:
    token, ca = Path(service_account["token_file"]), Path(service_account["ca_file"])
    if change == "no-token":
        token.unlink()
    elif change == "empty-token":
        token.write_text("\n")
    elif change == "no-ca":
        ca.unlink()
    elif change == "empty-ca":
        ca.write_text("")
    reason = reason.replace("TOKEN", str(token)).replace("<CA>", str(ca))
    environ = env if env is not None else {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
    with pytest.raises(KubeConfigError) as info:
        load_in_cluster(environ, **service_account)
    assert str(info.value) == f"in-cluster configuration: {info.value.reason}"
    assert info.value.reason.startswith(reason), info.value.reason


# --- no kubernetes import ---------------------------------------------------------------------------


def test_serve_path_and_a_certificate_kubeconfig_do_not_import_kubernetes(tmp_path: Path, pki: Path) -> None:
    user = {"client-certificate-data": _b64(pki / "client.crt"), "client-key-data": _b64(pki / "client.key")}
    path = write(tmp_path, kubeconfig({"certificate-authority-data": _b64(pki / "ca.crt")}, user))
    code = (
        "import sys\n"
        "import koord_scheduler.app.serve, koord_scheduler.app.serve_run, kubeapi.prefetch\n"
        "from kubeapi import load_connection\n"
        f"conn = load_connection({path!r})\n"
        "assert conn.ssl_context is not None\n"
        "print(sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
