"""One HTTP extender (kube-scheduler ``pkg/scheduler/extender.go``, ``HTTPExtender``).

Requests are blocking, over a pooled ``urllib3`` connection pool with the configured timeout: the
scheduling cycle is synchronous, and the bind call runs in a worker thread of the binding cycle
(:meth:`HTTPExtender.bind` is called through ``asyncio.to_thread``). Every failure raises
:class:`ExtenderError` with the message kube-scheduler would give; callers decide, by ``ignorable``
and by verb, what it means for the pod.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from apis.config.extender import Extender
from apis.core.types import Node, Pod
from koord_scheduler.extenders.wire import (
    ExtenderProtocolError,
    FilterReply,
    binding_args,
    decode_binding_result,
    decode_filter_result,
    decode_host_priorities,
    decode_preemption_result,
    extender_args,
    preemption_args,
)

if TYPE_CHECKING:
    import urllib3

log = logging.getLogger(__name__)


class ExtenderError(Exception):
    """A call that gave no usable answer: transport failure, timeout, non-200, malformed reply, or an
    ``Error`` the extender reported. ``str()`` is kube-scheduler's wording; ``url`` names the extender."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(message)
        self.url = url


def tls_context(config: Extender) -> ssl.SSLContext | None:
    """client-go's TLS config for an extender (``makeTransport``): with ``enableHTTPS`` and no CA the
    server certificate is not checked; ``insecure`` turns checking off; inline data wins over files."""
    tls = config.tls_config
    if tls is None and not config.enable_https:
        return None
    has_ca = tls is not None and bool(tls.ca_file or tls.ca_data)
    insecure = (tls is not None and tls.insecure) or (config.enable_https and not has_ca)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls is None:
        return ctx
    if tls.ca_data:
        ctx.load_verify_locations(cadata=tls.ca_data.decode())
    elif tls.ca_file:
        ctx.load_verify_locations(cafile=tls.ca_file)
    if tls.cert_data or tls.key_data:
        _load_cert_data(ctx, tls.cert_data, tls.key_data)
    elif tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file or None)
    return ctx


def _load_cert_data(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl loads a client certificate only from files: write both to a private temporary directory.
    with tempfile.TemporaryDirectory() as folder:
        cert_path, key_path = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
                out.write(data)
        ctx.load_cert_chain(cert_path, key_path if key else None)


class HTTPExtender:
    """Calls one extender. ``name`` is its URL prefix, as kube-scheduler names extenders."""

    def __init__(self, config: Extender, *, pool: urllib3.PoolManager | None = None) -> None:
        self.config = config
        self.name = config.url_prefix
        self.weight = config.weight
        self.ignorable = config.ignorable
        self.managed_resources = frozenset(r.name for r in config.managed_resources)
        import urllib3  # here, not at module level: a scheduler without extenders never loads it

        timeout = config.timeout_seconds
        self._timeout = urllib3.Timeout(total=timeout)
        self._timeout_seconds = timeout
        context = tls_context(config)
        self._unverified = context is not None and context.verify_mode == ssl.CERT_NONE
        if self._unverified:
            log.warning("extender %s: the server certificate is not verified (no CA, or insecure)", self.name)
        pool_kw: dict[str, Any] = {"maxsize": 16, "retries": False}
        if context is not None:
            pool_kw["ssl_context"] = context
            if config.tls_config is not None and config.tls_config.server_name:
                pool_kw["server_hostname"] = config.tls_config.server_name
        self._pool = pool or urllib3.PoolManager(**pool_kw)

    @property
    def is_filter(self) -> bool:
        return bool(self.config.filter_verb)

    @property
    def is_prioritizer(self) -> bool:
        return bool(self.config.prioritize_verb)

    @property
    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    @property
    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_interested(self, pod: Pod) -> bool:
        """True without managed resources, else when the pod requests or limits one of them."""
        if not self.managed_resources:
            return True
        return any(r in self.managed_resources for r in pod.requests) or any(
            r in self.managed_resources for r in pod.limits
        )

    def close(self) -> None:
        self._pool.clear()

    # ----- verbs -----

    def filter(self, pod: Pod, nodes: Sequence[Node], *, names: Sequence[str] | None = None) -> FilterReply:
        """The extender's verdict on ``nodes`` (``names``: their names, when the caller has them);
        names it returns are checked by the caller."""
        args = extender_args(pod, nodes, node_cache_capable=self.config.node_cache_capable, names=names)
        raw = self._send(self.config.filter_verb, args)
        try:
            reply = decode_filter_result(raw, node_cache_capable=self.config.node_cache_capable)
        except ExtenderProtocolError as exc:
            raise self._malformed(self.config.filter_verb, exc) from exc
        if reply.error:
            raise ExtenderError(self.name, reply.error)
        return reply

    def prioritize(
        self, pod: Pod, nodes: Sequence[Node], *, names: Sequence[str] | None = None
    ) -> list[tuple[str, int]]:
        """``(host, score)`` as the extender gave them (scores nominally 0..10)."""
        args = extender_args(pod, nodes, node_cache_capable=self.config.node_cache_capable, names=names)
        raw = self._send(self.config.prioritize_verb, args)
        try:
            return decode_host_priorities(raw)
        except ExtenderProtocolError as exc:
            raise self._malformed(self.config.prioritize_verb, exc) from exc

    def bind(self, pod: Pod, node: str) -> None:
        """Bind ``pod`` to ``node`` through the extender; blocking (run it in a thread)."""
        raw = self._send(self.config.bind_verb, binding_args(pod, node))
        try:
            error = decode_binding_result(raw)
        except ExtenderProtocolError as exc:
            raise self._malformed(self.config.bind_verb, exc) from exc
        if error:
            raise ExtenderError(self.name, error)

    def process_preemption(
        self, pod: Pod, victims: Mapping[str, Sequence[Pod]], pdb_violations: Mapping[str, int]
    ) -> dict[str, tuple[tuple[str, ...], int]]:
        """The candidates the extender keeps: node -> (victim UIDs, PDB violations)."""
        args = preemption_args(pod, victims, pdb_violations, node_cache_capable=self.config.node_cache_capable)
        raw = self._send(self.config.preempt_verb, args)
        try:
            return decode_preemption_result(raw)
        except ExtenderProtocolError as exc:
            raise self._malformed(self.config.preempt_verb, exc) from exc

    # ----- transport -----

    def _url(self, verb: str) -> str:
        return self.name.rstrip("/") + "/" + verb

    def _send(self, verb: str, args: dict[str, Any]) -> Any:
        import urllib3

        url = self._url(verb)
        body = orjson.dumps(args)
        try:
            with warnings.catch_warnings():
                if self._unverified:  # configured so, and said once above; not a warning per request
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                response = self._pool.request(
                    "POST",
                    url,
                    body=body,
                    headers={"Content-Type": "application/json"},
                    timeout=self._timeout,
                    retries=False,
                    preload_content=True,
                )
        except (urllib3.exceptions.TimeoutError, TimeoutError) as exc:
            raise ExtenderError(
                self.name,
                f'Post "{url}": context deadline exceeded (Client.Timeout {self._timeout_seconds:g}s exceeded)',
            ) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ExtenderError(self.name, f'Post "{url}": {_reason(exc)}') from exc
        if response.status != 200:
            raise ExtenderError(self.name, f"failed {verb} with extender at URL {url}, code {response.status}")
        try:
            return orjson.loads(response.data)
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(self.name, f"extender at URL {url} sent malformed JSON to {verb}: {exc}") from exc

    def _malformed(self, verb: str, exc: ExtenderProtocolError) -> ExtenderError:
        return ExtenderError(self.name, f"extender at URL {self._url(verb)} sent a malformed {verb} reply: {exc}")


def _reason(exc: urllib3.exceptions.HTTPError) -> str:
    import urllib3

    reason = getattr(exc, "reason", None)
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return "context deadline exceeded"
    return str(reason or exc)
