"""apis.core.paths: the one path builder and request-line check of both binaries (table tests)."""

from __future__ import annotations

import pytest

from apis.core.paths import (
    InvalidNameError,
    UnsafeRequestError,
    api_path,
    check_header,
    check_name,
    check_namespace,
    check_request_line,
    dns1123_label_problem,
    dns1123_subdomain_problem,
)


@pytest.mark.parametrize(
    ("args", "kwargs", "want"),
    [
        pytest.param(("", "v1", "pods"), {}, "/api/v1/pods", id="core-collection"),
        pytest.param(("", "v1", "pods"), {"namespace": "ns"}, "/api/v1/namespaces/ns/pods", id="core-namespaced"),
        pytest.param(
            ("", "v1", "pods"),
            {"namespace": "ns", "name": "p-1.a", "subresource": "binding"},
            "/api/v1/namespaces/ns/pods/p-1.a/binding",
            id="subresource",
        ),
        pytest.param(
            ("", "v1", "nodes"),
            {"name": "node-1", "subresource": "status"},
            "/api/v1/nodes/node-1/status",
            id="cluster-scoped",
        ),
        pytest.param(
            ("coordination.k8s.io", "v1", "leases"),
            {"namespace": "kube-system", "name": "koord-scheduler"},
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/koord-scheduler",
            id="group",
        ),
        pytest.param(
            ("slo.koordinator.sh", "v1alpha1", "nodeslos"),
            {"name": "n"},
            "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n",
            id="crd",
        ),
    ],
)
def test_api_path(args: tuple[str, str, str], kwargs: dict[str, str], want: str) -> None:
    assert api_path(*args, **kwargs) == want


@pytest.mark.parametrize(
    ("kwargs", "want_what", "want_reason"),
    [
        pytest.param(
            {"namespace": "default/pods/x HTTP/1.1\r\nHost: a"}, "namespace", "RFC 1123 label", id="crlf-namespace"
        ),
        pytest.param({"namespace": "a.b"}, "namespace", "RFC 1123 label", id="namespace-with-dot"),
        pytest.param({"namespace": "x" * 64}, "namespace", "at most 63", id="namespace-too-long"),
        pytest.param({"namespace": "Default"}, "namespace", "RFC 1123 label", id="namespace-uppercase"),
        pytest.param({"name": "x y"}, "name", "RFC 1123 subdomain", id="space"),
        pytest.param({"name": ".."}, "name", "RFC 1123 subdomain", id="dot-dot"),
        pytest.param({"name": "a/b"}, "name", "RFC 1123 subdomain", id="slash"),
        pytest.param({"name": "a%2Fb"}, "name", "RFC 1123 subdomain", id="percent"),
        pytest.param({"name": "a\x00"}, "name", "RFC 1123 subdomain", id="nul"),
        pytest.param({"name": "a" * 254}, "name", "at most 253", id="name-too-long"),
        pytest.param({"name": "-a"}, "name", "RFC 1123 subdomain", id="leading-dash"),
        pytest.param({"name": "\u0131"}, "name", "RFC 1123 subdomain", id="non-ascii"),
        pytest.param({"subresource": "status"}, "subresource", "needs an object name", id="subresource-without-name"),
    ],
)
def test_api_path_refuses(kwargs: dict[str, str], want_what: str, want_reason: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        api_path("", "v1", "pods", **kwargs)
    assert info.value.what == want_what
    assert want_reason in str(info.value)
    assert "\r" not in str(info.value) and "\n" not in str(info.value), "the message is safe to log"


@pytest.mark.parametrize("bad", ["Pods", "po ds", "pods/x", "", "pods\r\n"])
def test_api_path_refuses_bad_resource_words(bad: str) -> None:
    with pytest.raises(InvalidNameError, match="lowercase path word"):
        api_path("", "v1", bad)
    with pytest.raises(InvalidNameError, match="lowercase path word"):
        api_path(bad or "X", "v1", "pods")


def test_every_character_a_rule_accepts_is_left_alone_by_percent_escaping() -> None:
    """Why api_path does not escape: the characters its rules let through are RFC 3986 unreserved."""
    from string import ascii_lowercase, digits
    from urllib.parse import quote

    accepted = [c for c in map(chr, range(128)) if not dns1123_subdomain_problem(f"a{c}a")]
    assert sorted(accepted) == sorted(ascii_lowercase + digits + "-.")
    assert all(quote(c, safe="") == c for c in accepted)


def test_a_refused_namespace_or_word_is_refused_again() -> None:
    """The checks of namespaces and path words are remembered; a refusal must not be."""
    for _ in range(2):
        with pytest.raises(InvalidNameError):
            api_path("", "v1", "pods", namespace="Bad_NS")
        with pytest.raises(InvalidNameError):
            api_path("", "v1", "Pods")
    assert api_path("", "v1", "pods", namespace="good") == "/api/v1/namespaces/good/pods"
    with pytest.raises(InvalidNameError):
        api_path("", "v1", "pods", namespace=7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "want_label", "want_subdomain"),
    [
        pytest.param("default", True, True, id="plain"),
        pytest.param("a-b.c", False, True, id="dotted"),
        pytest.param("a" * 63, True, True, id="63"),
        pytest.param("a" * 64, False, True, id="64"),
        pytest.param("", False, False, id="empty"),
        pytest.param("a_b", False, False, id="underscore"),
        pytest.param(5, False, False, id="not-a-string"),
    ],
)
def test_name_rules(value: object, want_label: bool, want_subdomain: bool) -> None:
    assert (dns1123_label_problem(value) == "") is want_label
    assert (dns1123_subdomain_problem(value) == "") is want_subdomain
    if want_label:
        assert check_namespace(value) == value
    else:
        with pytest.raises(InvalidNameError):
            check_namespace(value, what="request.namespace")
    if not want_subdomain:
        with pytest.raises(InvalidNameError, match=r"^request\.name "):
            check_name(value, what="request.name")


@pytest.mark.parametrize(
    ("method", "target"),
    [
        pytest.param("GET", "/api/v1/pods HTTP/1.1\r\nHost: a\r\n\r\nDELETE /x", id="crlf"),
        pytest.param("GET", "/api/v1/pods\n", id="lf"),
        pytest.param("GET", "/api/v1/pods\x00", id="nul"),
        pytest.param("GET", "/api/v1/pods x", id="space"),
        pytest.param("GET", "/api/v1/pods\t", id="tab"),
        pytest.param("GET", "/api/v1/pods\x7f", id="del"),
        pytest.param("GET", "/api/v1/p\u00e9", id="non-ascii"),
        pytest.param("GET", "api/v1/pods", id="no-leading-slash"),
        pytest.param("GET", "", id="empty"),
        pytest.param("GET /x HTTP/1.1\r\n", "/api", id="method-crlf"),
        pytest.param("get", "/api", id="method-lowercase"),
    ],
)
def test_request_line_refused(method: str, target: str) -> None:
    with pytest.raises(UnsafeRequestError):
        check_request_line(method, target)


def test_request_line_accepts_what_the_builder_makes() -> None:
    check_request_line("PATCH", api_path("", "v1", "pods", namespace="a", name="b", subresource="status"))
    check_request_line("GET", "/api/v1/pods?labelSelector=a%3Db&watch=1&resourceVersion=5")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("Authorization", "Bearer t\r\nX: 1", id="crlf"),
        pytest.param("Authorization", "Bearer t\n", id="lf"),
        pytest.param("Authorization", "Bearer\x00t", id="nul"),
        pytest.param("Authorization", "Bearer \x1bt", id="escape"),
        pytest.param("Authorization", "Bearer \u00e9", id="non-ascii"),
        pytest.param("X Y", "v", id="name-space"),
        pytest.param("X:Y", "v", id="name-colon"),
        pytest.param("X\r\nY", "v", id="name-crlf"),
    ],
)
def test_header_refused(name: str, value: str) -> None:
    with pytest.raises(UnsafeRequestError) as info:
        check_header(name, value)
    assert "Bearer" not in str(info.value), "a credential is never shown"


def test_header_accepts_tabs_and_visible_ascii() -> None:
    check_header("Authorization", "Bearer abc.DEF-123_~+/=")
    check_header("User-Agent", "koord-scheduler/pykoord\t(x)")
