"""koordlet's kubernetes-client ``ApiClient`` with the request-line check, for what still uses that client.

The states informer's watches and the NodeMetric and Device writes go through kubeapi (:mod:`.apiloop`),
whose HTTP stack makes the same checks. The evictions and their Events and the NodeResourceTopology writes
go through :meth:`CheckedApiClient.call_api`, which runs :func:`apis.core.paths.check_request_line` and
:func:`~apis.core.paths.check_header` on what is about to be sent: a space, CR, LF, NUL or other control
character in the request target or a header value is refused (:class:`UnsafeRequestError`) and nothing is
written. Paths koordlet builds itself come from :func:`apis.core.paths.api_path`; the generated client's own
methods percent-escape their path parameters.

Imported only where the kubernetes client is loaded anyway (the agent's start-up).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from apis.core.paths import UnsafeRequestError, check_header, check_request_line

__all__ = ["CheckedApiClient", "UnsafeRequestError", "check_outgoing"]


def check_outgoing(method: str, url: str, headers: dict[str, Any] | None) -> None:
    """Refuse a request whose request line or headers could carry a second request. Raises
    :class:`UnsafeRequestError`."""
    # Split by hand: urllib.parse drops tabs and newlines from URLs, which is what must be seen here.
    rest = url.split("://", 1)[1] if "://" in url else url
    slash = rest.find("/")
    host, target = (rest[:slash], rest[slash:]) if slash >= 0 else (rest, "/")
    check_header("Host", host)
    check_request_line(method, target)
    for name, value in (headers or {}).items():
        check_header(str(name), str(value))


class CheckedApiClient(client.ApiClient):
    """``kubernetes.client.ApiClient`` whose every request passes :func:`check_outgoing` first."""

    def call_api(
        self,
        method: str,
        url: str,
        header_params: dict[str, Any] | None = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        check_outgoing(method, url, header_params)
        return super().call_api(method, url, header_params, body, post_params, _request_timeout)
