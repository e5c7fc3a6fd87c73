"""bench/e2e_throughput.py's request accounting (tests/integration/apiserver_requests.py) and its
``--baseline`` contender (bench/e2e_baseline.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.unit.bench.conftest import load_bench


def sample(name: str, value: str, **labels: str) -> str:
    """One line of kube-apiserver's /metrics, labels in its (sorted) order."""
    return f"{name}{{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + f"}} {value}"


TOTAL = "apiserver_request_total"
OPEN = "apiserver_longrunning_requests"
CORE = {"component": "apiserver", "dry_run": "", "group": "", "version": "v1"}
METRICS = (
    "\n".join(
        [
            "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb...",
            "# TYPE apiserver_request_total counter",
            sample(
                TOTAL, "3000", **CORE, code="201", resource="pods", scope="resource", subresource="binding", verb="POST"
            ),
            sample(
                TOTAL, "2", **CORE, code="409", resource="pods", scope="resource", subresource="binding", verb="POST"
            ),
            sample(
                TOTAL,
                "2990",
                **{**CORE, "group": "events.k8s.io"},
                code="201",
                resource="events",
                scope="namespace",
                subresource="",
                verb="POST",
            ),
            sample(TOTAL, "7", **CORE, code="200", resource="pods", scope="cluster", subresource="", verb="LIST"),
            sample(
                TOTAL,
                "4",
                **{**CORE, "version": ""},
                code="200",
                resource="",
                scope="",
                subresource="/metrics",
                verb="GET",
            ),
            sample(TOTAL, "1.0", **CORE, code="200", resource="pods", scope="cluster", subresource="", verb="WATCH"),
            "# TYPE apiserver_longrunning_requests gauge",
            sample(
                OPEN,
                "2",
                component="apiserver",
                group="",
                resource="pods",
                scope="cluster",
                subresource="",
                verb="WATCH",
                version="v1",
            ),
            sample(
                OPEN,
                "1",
                component="apiserver",
                group="",
                resource="nodes",
                scope="cluster",
                subresource="",
                verb="WATCH",
                version="v1",
            ),
            sample(
                "apiserver_request_duration_seconds_bucket",
                "99",
                component="apiserver",
                group="",
                resource="pods",
                verb="POST",
                le="0.1",
            ),
        ]
    )
    + "\n"
)


@pytest.fixture(scope="module")
def requests_module(e2e_throughput: ModuleType) -> ModuleType:
    import apiserver_requests  # on sys.path through e2e_throughput

    return apiserver_requests


def test_parse_sums_codes_and_keeps_resources_named_kubectl_style(requests_module: ModuleType) -> None:
    key = requests_module.RequestKey
    counts = requests_module.parse_request_counts(METRICS)
    assert counts.completed == {
        key("POST", "pods/binding"): 3002,
        key("POST", "events.events.k8s.io"): 2990,
        key("LIST", "pods"): 7,
        key("GET", ""): 4,
        key("WATCH", "pods"): 1,
    }
    assert counts.open == {key("WATCH", "pods"): 2, key("WATCH", "nodes"): 1}


def test_since_subtracts_the_earlier_reading_and_the_callers_own_requests(requests_module: ModuleType) -> None:
    key = requests_module.RequestKey
    before = requests_module.parse_request_counts(
        'apiserver_request_total{group="",resource="pods",subresource="",verb="LIST"} 5\n'
        'apiserver_request_total{group="",resource="",subresource="",verb="GET"} 1\n'
        'apiserver_longrunning_requests{group="",resource="pods",subresource="",verb="WATCH"} 1\n'
        'apiserver_longrunning_requests{group="",resource="services",subresource="",verb="WATCH"} 1\n'
    )
    after = requests_module.parse_request_counts(METRICS)
    got = after.since(before, own={key("LIST", "pods"): 1, key("POST", "events.events.k8s.io"): 0})
    # /metrics reads name no resource and are left out; LIST pods: 7 - 5 - 1 of the caller's own.
    assert got.completed == {
        key("POST", "pods/binding"): 3002,
        key("POST", "events.events.k8s.io"): 2990,
        key("LIST", "pods"): 1,
        key("WATCH", "pods"): 1,
    }
    assert got.total == 5994
    assert got.open == {key("WATCH", "pods"): 1, key("WATCH", "nodes"): 1, key("WATCH", "services"): -1}
    # The caller's own watch of pods ended meanwhile: the contender's pod watch is still one more.
    closed = after.since(before, own_open={key("WATCH", "pods"): -1})
    assert closed.open[key("WATCH", "pods")] == 2


@pytest.mark.parametrize(
    ("method", "path", "params", "want"),
    [
        pytest.param("GET", "/api/v1/namespaces/bench/pods", None, ("LIST", "pods"), id="list-namespaced"),
        pytest.param("GET", "/api/v1/namespaces/bench/pods", {"watch": "1"}, ("WATCH", "pods"), id="watch"),
        pytest.param("GET", "/api/v1/nodes/n1", None, ("GET", "nodes"), id="get-cluster-scoped"),
        pytest.param(
            "POST", "/api/v1/namespaces/bench/pods/p/binding", None, ("POST", "pods/binding"), id="subresource"
        ),
        pytest.param(
            "GET",
            "/apis/events.k8s.io/v1/namespaces/bench/events",
            {"limit": "1"},
            ("LIST", "events.events.k8s.io"),
            id="grouped",
        ),
        pytest.param(
            "DELETE", "/api/v1/namespaces/bench/pods", None, ("DELETECOLLECTION", "pods"), id="delete-collection"
        ),
        pytest.param(
            "PATCH",
            "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n1/status",
            None,
            ("PATCH", "nodemetrics.slo.koordinator.sh/status"),
            id="custom-status",
        ),
        pytest.param("POST", "/api/v1/namespaces", None, ("POST", "namespaces"), id="namespaces"),
        pytest.param("GET", "/metrics", None, ("GET", ""), id="non-resource"),
    ],
)
def test_client_request_key_matches_the_servers_rows(
    requests_module: ModuleType, method: str, path: str, params: dict[str, str] | None, want: tuple[str, str]
) -> None:
    assert tuple(requests_module.client_request_key(method, path, params)) == want


def test_per_pod_rows_most_first_above_the_floor(requests_module: ModuleType) -> None:
    key = requests_module.RequestKey
    counts = {key("POST", "pods/binding"): 1000, key("LIST", "pods"): 1, key("POST", "events.events.k8s.io"): 1000}
    assert requests_module.per_pod(counts, 1000, floor=0.001) == {
        "POST events.events.k8s.io": 1.0,
        "POST pods/binding": 1.0,
        "LIST pods": 0.001,
    }
    assert list(requests_module.per_pod(counts, 1000, floor=0.5)) == ["POST events.events.k8s.io", "POST pods/binding"]


@pytest.fixture(scope="module")
def baseline(e2e_throughput: ModuleType) -> ModuleType:
    return load_bench("e2e_baseline")


@pytest.mark.parametrize(
    ("names", "want"),
    [
        pytest.param(
            ["round-robin", "koord-scheduler", "kube-scheduler"],
            ["round-robin", "koord-scheduler", "koord-scheduler@main", "kube-scheduler"],
            id="after-koord",
        ),
        pytest.param(["kube-scheduler"], ["kube-scheduler", "koord-scheduler@main"], id="no-koord"),
        pytest.param(
            ["koord-scheduler[*]", "koord-scheduler[-nodeslo]"],
            ["koord-scheduler[*]", "koord-scheduler@main", "koord-scheduler[-nodeslo]"],
            id="variants",
        ),
    ],
)
def test_baseline_runs_right_after_koord_scheduler(baseline: ModuleType, names: list[str], want: list[str]) -> None:
    assert baseline.with_baseline(names, "main") == want
    assert baseline.baseline_ref("koord-scheduler@2a2f3c8") == "2a2f3c8"
    assert baseline.baseline_ref("koord-scheduler") is None


def test_baseline_flag_adds_the_contender(e2e_throughput: ModuleType) -> None:
    ns = argparse.Namespace(
        shape="SchedulingBasic", nodes=1000, pods=3000, timeout=None, only=None, controllers=[], baseline="2a2f3c8"
    )
    assert e2e_throughput.shape_arguments(ns) == ""
    assert ns.only == ["round-robin", "koord-scheduler", "koord-scheduler@2a2f3c8", "kube-scheduler"]


def _result(e2e_throughput: ModuleType, name: str, rate: float, **extra: Any) -> Any:
    return e2e_throughput.Result(
        contender=name,
        pods=1000,
        rate=rate,
        wall=rate,
        seconds_first_to_last=1.0,
        seconds_start_to_last=1.0,
        cpu_seconds=1.0,
        cpu_seconds_per_1000=extra.pop("cpu", 1.0),
        events_written=1000,
        events_done_after_last_bind=0.5,
        cpu_seconds_with_events=1.0,
        server_cpu_seconds_per_1000=extra.pop("server", 2.0),
        **extra,
    )


def test_summary_compares_koord_scheduler_with_its_baseline(e2e_throughput: ModuleType) -> None:
    results = [
        _result(e2e_throughput, "round-robin", 1000.0),
        _result(
            e2e_throughput,
            "koord-scheduler",
            850.0,
            cpu=2.0,
            server=2.7,
            requests_total_per_pod=2.002,
            requests_per_pod={"POST pods/binding": 1.0, "POST events.events.k8s.io": 1.0},
        ),
        _result(
            e2e_throughput,
            "koord-scheduler@base",
            800.0,
            cpu=2.5,
            server=3.0,
            requests_total_per_pod=3.0,
            requests_per_pod={"POST pods/binding": 1.0, "POST events.events.k8s.io": 1.0, "PATCH pods": 1.0},
        ),
        _result(e2e_throughput, "kube-scheduler", 425.0),
    ]
    summary = e2e_throughput.summarize(results)
    assert summary["koord_pct_of_ceiling"] == 85.0
    assert summary["koord_to_kube_scheduler"] == 2.0
    assert summary["koord-scheduler@base_pct_of_ceiling"] == 80.0
    assert summary["koord-scheduler@base"]["requests_per_pod_by_verb_resource"]["PATCH pods"] == 1.0
    assert summary["koord_vs_koord-scheduler@base"] == {
        "rate_ratio": 1.062,
        "cpu_ratio": 0.8,
        "server_cpu_ratio": 0.9,
        "drain_cpu_ratio": None,
        "drain_server_cpu_ratio": None,
        "requests_per_pod_ratio": 0.667,
        "rate_ratio_per_round": [1.062],
    }


def test_the_working_tree_is_compiled_for_every_product_package(e2e_throughput: ModuleType) -> None:
    """The contenders run the editable install: without bytecode on disk each start would compile it again
    (under ``PYTHONDONTWRITEBYTECODE``), which the ``--baseline`` build, installed with its bytecode, does not."""
    import importlib.util

    repo = e2e_throughput.REPO
    packages = sorted(p.parent.name for p in repo.glob("*/__init__.py"))
    assert sorted(e2e_throughput.PACKAGES) == sorted(set(packages) - {"koordlet"})
    e2e_throughput.compile_working_tree()
    for package in e2e_throughput.PACKAGES:
        assert Path(importlib.util.cache_from_source(str(repo / package / "__init__.py"))).exists(), package
