"""Reading one kubeconfig file into what a connection needs, without the kubernetes client package.

:func:`read_kubeconfig` resolves a context (the file's ``current-context`` unless one is named) to its
cluster and user and returns a :class:`KubeconfigEntry`: the server, TLS material (file paths resolved
against the kubeconfig's directory, or the decoded ``-data`` fields; ``-data`` wins over the path, as
the kubernetes client has it), and the credentials. Users authenticated by an ``exec`` plugin or an
``auth-provider`` are not read here: the entry says so (``plugin``) and
:func:`~kubeapi.connection.load_connection` hands the file to the kubernetes client's loader.

Not supported, and refused with the field named: ``proxy-url`` (requests always go straight to the
server). One file only: a ``KUBECONFIG``-style list of files is not merged (the callers take one path).

Every problem is a :class:`~kubeapi.connection.KubeConfigError` whose message is
``kubeconfig 'PATH': <reason>`` and whose ``reason`` names the entry and field
(``cluster 'c': certificate-authority-data: not valid base64``).
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any

import yaml

from kubeapi.errors import KubeConfigError

PLUGIN_FIELDS = ("exec", "auth-provider")
"""User fields whose credentials only the kubernetes client's loader produces."""


@dataclass(frozen=True, slots=True)
class KubeconfigEntry:
    """One context of a kubeconfig, resolved.

    ``server`` has no trailing slash and starts with ``https://`` or ``http://``. For each of the CA, the
    client certificate and the client key at most one of ``*_file`` (an absolute path that existed when
    read) and ``*_data`` (decoded bytes) is set. ``token`` is an inline token; ``token_file`` is only set
    without it (the file is re-read as the token rotates). ``basic`` is ``(username, password)``.
    ``plugin`` is ``"exec"`` or ``"auth-provider"`` when the user needs the kubernetes client's loader.
    """

    server: str
    context: str
    cluster: str
    user: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    basic: tuple[str, str] | None = None
    plugin: str | None = None


class _InvalidError(ValueError):
    """A reason, turned into a KubeConfigError naming the file by :func:`read_kubeconfig`."""


def read_kubeconfig(path: str, *, context: str = "") -> KubeconfigEntry:
    """The entry of ``context`` (default: the file's ``current-context``) in the kubeconfig at ``path``.

    Raises :class:`KubeConfigError` (``kubeconfig 'PATH': reason``) when the file cannot be read, is not a
    kubeconfig, or the context, its cluster or user is missing or malformed.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise _error(path, f"cannot read: {exc}") from None
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise _error(path, f"invalid YAML: {_first_line(str(exc))}") from None
    try:
        return parse_kubeconfig(doc, base_dir=os.path.dirname(os.path.abspath(path)), context=context)
    except _InvalidError as exc:
        raise _error(path, str(exc)) from None


def parse_kubeconfig(doc: Any, *, base_dir: str, context: str = "") -> KubeconfigEntry:
    """:func:`read_kubeconfig` of an already loaded document; relative paths are resolved against
    ``base_dir``. Raises ``_InvalidError`` with the reason (callers outside this module use
    :func:`read_kubeconfig`)."""
    if not isinstance(doc, dict):
        raise _InvalidError("not a kubeconfig: want a mapping with clusters, contexts and users")
    name = context or doc.get("current-context") or ""
    if not isinstance(name, str) or not name:
        raise _InvalidError("current-context is not set (and no context was named)")
    ctx = _named(doc, "contexts", "context", name)
    cluster_name = ctx.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise _InvalidError(f"context {name!r}: cluster is not set")
    cluster = _named(doc, "clusters", "cluster", cluster_name)
    user_name = ctx.get("user") or ""
    if not isinstance(user_name, str):
        raise _InvalidError(f"context {name!r}: user: want a name")
    user = _named(doc, "users", "user", user_name) if user_name else {}
    where_c = f"cluster {cluster_name!r}"
    where_u = f"user {user_name!r}"

    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise _InvalidError(f"{where_c}: server is not set")
    server = server.rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise _InvalidError(f"{where_c}: server {server!r}: want an https:// or http:// URL")
    if cluster.get("proxy-url"):
        raise _InvalidError(f"{where_c}: proxy-url is not supported (requests go straight to the server)")
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise _InvalidError(f"{where_c}: insecure-skip-tls-verify: want true or false, got {insecure!r}")
    tls_server_name = cluster.get("tls-server-name") or None
    if tls_server_name is not None and not isinstance(tls_server_name, str):
        raise _InvalidError(f"{where_c}: tls-server-name: want a host name")

    plugin = next((field for field in PLUGIN_FIELDS if user.get(field)), None)
    https = server.startswith("https://")
    ca_file, ca_data = _file_or_data(cluster, "certificate-authority", where_c, base_dir) if https else (None, None)
    cert_file, cert_data = _file_or_data(user, "client-certificate", where_u, base_dir) if https else (None, None)
    key_file, key_data = _file_or_data(user, "client-key", where_u, base_dir) if https else (None, None)
    if (key_file or key_data) and not (cert_file or cert_data):
        raise _InvalidError(f"{where_u}: client-key is set without client-certificate")

    token = _optional_str(user, "token", where_u)
    token_file = None
    if not token and user.get("tokenFile"):
        token_file = _path(user, "tokenFile", where_u, base_dir)
        token = read_token_file(token_file, field=f"{where_u}: tokenFile {token_file!r}")
    basic = None
    username, password = _optional_str(user, "username", where_u), _optional_str(user, "password", where_u)
    if username is not None or password is not None:
        if username is None or password is None:
            raise _InvalidError(f"{where_u}: username and password go together (basic authentication)")
        basic = (username, password)
    return KubeconfigEntry(
        server=server,
        context=name,
        cluster=cluster_name,
        user=user_name,
        ca_file=ca_file,
        ca_data=ca_data,
        insecure=insecure,
        tls_server_name=tls_server_name,
        cert_file=cert_file,
        cert_data=cert_data,
        key_file=key_file,
        key_data=key_data,
        token=token or None,
        token_file=token_file,
        basic=basic,
        plugin=plugin,
    )


def read_token_file(path: str, *, field: str) -> str:
    """The token in ``path``, surrounding white space removed (as client-go does). Raises ``ValueError``
    whose message starts with ``field`` when the file cannot be read or is empty."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _InvalidError(f"{field}: cannot read: {exc}") from None
    if not token:
        raise _InvalidError(f"{field}: the file is empty")
    return token


def _named(doc: dict[str, Any], kind: str, key: str, name: str) -> dict[str, Any]:
    """The ``key`` mapping of the ``kind`` list item named ``name``."""
    items = doc.get(kind) or []
    if not isinstance(items, list):
        raise _InvalidError(f"{kind}: want a list")
    found = None
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _InvalidError(f"{kind}[{i}]: want a mapping with a name")
        if item["name"] == name:
            if found is not None:
                raise _InvalidError(f"{kind}: two entries are named {name!r}")
            found = item
    if found is None:
        raise _InvalidError(f"{key} {name!r} is not in {kind}")
    body = found.get(key) or {}
    if not isinstance(body, dict):
        raise _InvalidError(f"{key} {name!r}: {key}: want a mapping")
    return body


def _optional_str(obj: dict[str, Any], field: str, where: str) -> str | None:
    value = obj.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _InvalidError(f"{where}: {field}: want a string")
    return value


def _path(obj: dict[str, Any], field: str, where: str, base_dir: str) -> str:
    value = obj.get(field)
    if not isinstance(value, str) or not value:
        raise _InvalidError(f"{where}: {field}: want a file path")
    return os.path.normpath(os.path.join(base_dir, value))


def _file_or_data(obj: dict[str, Any], field: str, where: str, base_dir: str) -> tuple[str | None, bytes | None]:
    """``FIELD-data`` decoded (it wins, as in the kubernetes client), else ``FIELD`` as an existing file."""
    data = obj.get(f"{field}-data")
    if data:
        if not isinstance(data, str):
            raise _InvalidError(f"{where}: {field}-data: want a base64 string")
        try:
            return None, base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            raise _InvalidError(f"{where}: {field}-data: not valid base64") from None
    if not obj.get(field):
        return None, None
    path = _path(obj, field, where, base_dir)
    if not os.path.isfile(path):
        raise _InvalidError(f"{where}: {field} {path!r}: no such file")
    return path, None


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else "unknown error"


def _error(path: str, reason: str) -> KubeConfigError:
    return KubeConfigError(f"kubeconfig {path!r}: {reason}", reason=reason)
