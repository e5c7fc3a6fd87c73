"""The kubelet pod source: poll the kubelet's ``GET /pods`` (a PodList) instead of watching the API server.

Selected with ``koordlet --pods-source=kubelet``. As in Koordinator's ``kubelet_stub.go``/``states_pods.go``:

- HTTPS to ``<address>:10250/pods`` with a bearer token (the in-cluster ServiceAccount token, or
  ``--kubelet-token-file``), re-read on every request because projected tokens rotate;
- every successful sync **replaces** the whole pod set and fires the ``AllPods`` callbacks;
- an empty list is treated as a failure ("kubelet may have just restarted"): the last pods are kept;
- each pod is parsed from raw JSON exactly as the API-server source does (:func:`parse_pod`); a pod that
  cannot be parsed is logged and skipped, the rest are kept;
- an unreachable kubelet is logged and retried next interval; nothing escapes the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordlet.statesinformer.informer import StatesInformer
from koordlet.statesinformer.pods import PodMeta, parse_pod
from koordlet.system.errorlog import FailureLog

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
DEFAULT_KUBELET_PORT = 10250


@dataclass(frozen=True, slots=True)
class KubeletOptions:
    address: str = "127.0.0.1"
    port: int = DEFAULT_KUBELET_PORT
    scheme: str = "https"
    insecure_skip_verify: bool = False
    ca_file: Path | None = None
    token_file: Path | None = None
    """``None``: the in-cluster ServiceAccount token if present, else no Authorization header."""
    timeout: float = 3.0
    sync_interval: float = 10.0

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{host}:{self.port}/pods"


def _describe(err: Exception) -> str:
    """``HTTP Error 401: Unauthorized``; for a transport error its reason (``[Errno 111] Connection refused``)."""
    if isinstance(err, urllib.error.URLError) and not isinstance(err, urllib.error.HTTPError):
        return str(err.reason)
    return str(err)


class KubeletPodSource:
    """Feeds a :class:`StatesInformer`'s pods from the kubelet. ``sync_once`` is one poll; ``run`` loops."""

    def __init__(self, options: KubeletOptions, informer: StatesInformer) -> None:
        if options.scheme not in ("http", "https"):
            raise ValueError(f"kubelet scheme must be http or https, not {options.scheme!r}")
        self.options = options
        self._informer = informer
        self._ssl: ssl.SSLContext | None = None
        if options.scheme == "https":
            ctx = ssl.create_default_context(cafile=str(options.ca_file) if options.ca_file else None)
            if options.insecure_skip_verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._ssl = ctx
        self.syncs = 0
        self.failures = 0
        self.failure_log = FailureLog(log)
        self.skipped_pods = 0
        self.last_error: str | None = None

    def _token(self) -> str | None:
        path = self.options.token_file
        if path is None:
            if not SERVICE_ACCOUNT_TOKEN.is_file():
                return None
            path = SERVICE_ACCOUNT_TOKEN
        return path.read_text().strip() or None

    def fetch(self) -> dict[str, Any]:
        """``GET /pods`` as raw JSON. Raises on any transport, HTTP or decoding error."""
        request = urllib.request.Request(self.options.url, headers={"Accept": "application/json"})
        token = self._token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=self.options.timeout, context=self._ssl) as response:
            data = json.loads(response.read())
        if not isinstance(data, dict):
            raise ValueError(f"kubelet /pods returned {type(data).__name__}, not a PodList object")
        return data

    def _parse(self, items: list[Any]) -> list[PodMeta]:
        pods: list[PodMeta] = []
        for index, raw in enumerate(items):
            try:
                if not isinstance(raw, Mapping):
                    raise TypeError(f"a {type(raw).__name__}, not an object")
                pod = parse_pod(raw, self._informer.layout)
            except Exception as err:
                self.skipped_pods += 1
                log.warning("kubelet /pods: skipping item %d that is not a valid pod: %s", index, err)
                continue
            if pod.uid:
                pods.append(pod)
            else:
                self.skipped_pods += 1
                log.warning("kubelet /pods: skipping item %d without metadata.uid", index)
        return pods

    def sync_once(self) -> bool:
        """One poll. True when the informer's pods were replaced; False (logged) on any failure."""
        try:
            data = self.fetch()
            items = data.get("items") or []
            if not isinstance(items, list):
                raise ValueError("kubelet /pods: items is not a list")
            if not items:
                raise ValueError("kubelet /pods returned no pods (kubelet may have just restarted)")
        except Exception as err:
            self.failures += 1
            self.last_error = _describe(err)
            self.failure_log.failed(f"kubelet pod sync from {self.options.url}", err)
            return False
        self.failure_log.succeeded(f"kubelet pod sync from {self.options.url}")
        self._informer.replace_pod_metas(self._parse(items))
        self.syncs += 1
        self.last_error = None
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Poll every ``sync_interval`` until ``stop``; a blocking fetch runs in a worker thread."""
        if self.options.sync_interval <= 0:
            log.warning("kubelet sync interval <= 0: pod sync disabled")
            return
        while not stop.is_set():
            await asyncio.to_thread(self.sync_once)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.options.sync_interval)
