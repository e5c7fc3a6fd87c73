"""API server paths and request lines, built and checked in one place for both binaries.

A name that comes from outside (an AdmissionReview, an extender request, a watched object) is never pasted
into a request line: one CR/LF would end it and smuggle a second request that runs with our identity.
So:

- :func:`api_path` is the only way either binary builds an API path. Namespaces must be DNS-1123 labels
  and object names DNS-1123 subdomains (apimachinery's ``NameIsDNSLabel`` / ``NameIsDNSSubdomain``, the
  rules the API server applies to every kind pykoord addresses by name); group, version, resource and
  subresource must be lowercase path words. Every character those rules let through (``a-z``, ``0-9``,
  ``-``, ``.``) is an RFC 3986 unreserved character, which percent-escaping leaves as it is, so a segment
  that passed its rule is a path segment as it stands: nothing but a path segment can come out of one.
  (Paths are built twice per bound pod, the binding and its Event; the checks of the words, a handful of
  constants, are remembered.)
- :func:`check_request_line` and :func:`check_header` are the check every HTTP client of the product runs
  on what it is about to send, whoever built it: the request target must be visible ASCII starting
  with ``/`` (no space, CR, LF, NUL or other control character, nothing outside ASCII), the method a plain
  token, and header values free of control characters but tab.

Both raise :class:`UnsafeRequestError` (a ``ValueError``) whose message names what was refused and shows
the value escaped (``repr``) and cut short, so it is safe to log.
"""

from __future__ import annotations

import functools
import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
SHOWN_CHARS = 80
"""A refused value is shown (``repr``) up to this many characters."""

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PATH_WORD = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_REQUEST_TARGET = re.compile(r"/[\x21-\x7e]*")
_METHOD = re.compile(r"[A-Z]{1,20}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    f"and end with an alphanumeric character, at most {DNS1123_LABEL_MAX} characters"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    f"start and end with an alphanumeric character, at most {DNS1123_SUBDOMAIN_MAX} characters"
)


class UnsafeRequestError(ValueError):
    """A name, path, method or header value that must not go into a request to the API server."""


class InvalidNameError(UnsafeRequestError):
    """``what`` (``namespace``, ``name``...) is not a Kubernetes name; ``reason`` is apimachinery's rule."""

    def __init__(self, what: str, value: object, reason: str) -> None:
        self.what = what
        self.value = value
        self.reason = reason
        super().__init__(f"{what} {shown(value)} is invalid: {reason}")


def shown(value: object) -> str:
    """``value`` for a message or a log line: ``repr`` (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def dns1123_label_problem(value: object) -> str:
    """Why ``value`` is not a DNS-1123 label (namespace names); ``""`` when it is one."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > DNS1123_LABEL_MAX or not _LABEL.fullmatch(value):
        return LABEL_MESSAGE
    return ""


def dns1123_subdomain_problem(value: object) -> str:
    """Why ``value`` is not a DNS-1123 subdomain (object names); ``""`` when it is one."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > DNS1123_SUBDOMAIN_MAX or not _SUBDOMAIN.fullmatch(value):
        return SUBDOMAIN_MESSAGE
    return ""


def check_namespace(value: object, *, what: str = "namespace") -> str:
    """``value`` when it is a valid namespace name; raises :class:`InvalidNameError` naming ``what``."""
    problem = dns1123_label_problem(value)
    if problem:
        raise InvalidNameError(what, value, problem)
    assert isinstance(value, str)
    return value


def check_name(value: object, *, what: str = "name") -> str:
    """``value`` when it is a valid object name; raises :class:`InvalidNameError` naming ``what``."""
    problem = dns1123_subdomain_problem(value)
    if problem:
        raise InvalidNameError(what, value, problem)
    assert isinstance(value, str)
    return value


@functools.lru_cache(maxsize=256)
def _word(value: str, what: str) -> str:
    """``value`` when it is a lowercase path word (group, version, resource, subresource: a few constants,
    so the answers are cached; a refusal raises and is not)."""
    if not _PATH_WORD.fullmatch(value):
        raise InvalidNameError(what, value, "must be a lowercase path word ([a-z0-9.-])")
    return value


@functools.lru_cache(maxsize=1024)
def _checked_namespace(value: str) -> str:
    return check_namespace(value)


def _namespace_segment(value: object) -> str:
    """:func:`check_namespace`, remembered for strings (a cluster has few namespaces)."""
    return _checked_namespace(value) if isinstance(value, str) else check_namespace(value)


def api_path(
    group: str, version: str, resource: str, *, namespace: str = "", name: str = "", subresource: str = ""
) -> str:
    """``/api/{version}`` (core, ``group`` empty) or ``/apis/{group}/{version}``, then
    ``/namespaces/{namespace}`` when given, ``/{resource}``, ``/{name}`` and ``/{subresource}`` when given.

    Raises :class:`InvalidNameError` when a part breaks its rule (see the module docstring). A
    ``subresource`` needs a ``name``.
    """
    parts = (
        ["", "api", _word(version, "version")]
        if not group
        else ["", "apis", _word(group, "group"), _word(version, "version")]
    )
    if namespace:
        parts += ["namespaces", _namespace_segment(namespace)]
    parts.append(_word(resource, "resource"))
    if name:
        parts.append(check_name(name))
    if subresource:
        if not name:
            raise InvalidNameError("subresource", subresource, "needs an object name")
        parts.append(_word(subresource, "subresource"))
    return "/".join(parts)


def check_request_line(method: str, target: str) -> None:
    """Refuse a request line that is not exactly ``METHOD SP target``: ``method`` must be an uppercase
    token and ``target`` (path and query) visible ASCII starting with ``/``. Raises
    :class:`UnsafeRequestError`."""
    if not _METHOD.fullmatch(method):
        raise UnsafeRequestError(f"request method {shown(method)} is not an HTTP method token")
    if not _REQUEST_TARGET.fullmatch(target):
        raise UnsafeRequestError(
            f"request target {shown(target)} is not visible ASCII starting with '/' (a space, CR, LF, NUL or "
            "another control character would end the request line)"
        )


def check_header(name: str, value: str) -> None:
    """Refuse a header whose name is not a token or whose value holds CR, LF, NUL or another control
    character (tab allowed) or anything outside ASCII. Raises :class:`UnsafeRequestError`; the message
    shows the header's name only (values may be credentials)."""
    if not _HEADER_NAME.fullmatch(name):
        raise UnsafeRequestError(f"header name {shown(name)} is not an HTTP token")
    if not _HEADER_VALUE.fullmatch(value):
        raise UnsafeRequestError(
            f"the value of header {name} holds a control character (CR, LF, NUL...) or a non-ASCII character"
        )
