"""What writing a plain pod's bind and its ``Scheduled`` Event costs koord-scheduler itself, counted, not
timed: the Python function calls per pod made by the product's own code (``apis``, ``koord_scheduler``)
and by the standard library on its behalf, through the real HTTP client to the in-process fake API server
(tests/unit/kubeapi/fakeapi.py; the server's own calls are not counted).

Every bound pod pays this, so a per-pod call added to the path (a check, an escape, a copy) shows here as
a count over the budget, where a benchmark on a shared machine would lose it in the noise. When a change
really needs more, raise the budget in the same commit and say why.
"""

from __future__ import annotations

import cProfile
import pstats
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakeapi import FakeApi

from apis.core.parse import parse_pod
from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from kubeapi.events import EventOptions
from kubeapi.http import JSON
from kubeapi.protowire import PROTOBUF
from kubeapi.reflector import ReflectorOptions

REPO = Path(__file__).resolve().parents[3]
PRODUCT = tuple(str(REPO / package) + "/" for package in ("apis", "kubeapi", "koord_scheduler"))
STDLIB_ON_BEHALF = ("urllib/parse.py", "re/__init__.py", "datetime.py")
"""Standard-library modules the write path may call into per pod (escaping, patterns, times)."""
PODS = 40
PRODUCT_CALLS_PER_POD = 75
"""The bind and the Event together, product code: 71 when set (72 with protobuf bodies); the path builder's
re-checks of its constant words (version, resource, subresource) and of the namespace made it 79 before."""
STDLIB_CALLS_PER_POD = 3
"""0 when set; percent-escaping every path segment (already checked to need none) cost 18 per pod before."""


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    server = FakeApi()
    await server.start()
    yield server
    await server.stop()


def _pod(i: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def _calls(stats: pstats.Stats) -> tuple[int, int]:
    product = stdlib = 0
    for (filename, _, _), (_, ncalls, _, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.startswith(PRODUCT):
            product += ncalls
        elif filename.endswith(STDLIB_ON_BEHALF) and "site-packages" not in filename:
            stdlib += ncalls
    return product, stdlib


@pytest.mark.parametrize("protobuf", [True, False], ids=["protobuf", "json"])
async def test_a_plain_pods_bind_and_event_stay_within_their_call_budget(api: FakeApi, protobuf: bool) -> None:
    for i in range(PODS + 1):
        api.put("pods", _pod(i), silent=True)
    pods = [parse_pod(_pod(i)) for i in range(PODS + 1)]
    source = KubeClusterSource(
        api.connection,
        options=KubeSourceOptions(
            qps=0,
            burst=1,
            events=EventOptions(hostname="test-host", senders=1),
            reflector=ReflectorOptions(protobuf=protobuf),
        ),
    )
    source.events.start()
    try:
        # The first pod opens the connections and fills the caches: not counted.
        await source.client.bind(pods[0], "node-0")
        await source.report_scheduled(pods[0], "node-0")
        await source.events.flush()
        profiler = cProfile.Profile()
        profiler.enable()
        for pod in pods[1:]:
            await source.client.bind(pod, "node-1")
            await source.report_scheduled(pod, "node-1")
        await source.events.flush()
        profiler.disable()
    finally:
        await source.stop()
    bound = sum(1 for r in api.requests if r.path.endswith("/binding"))
    events = sum(1 for r in api.requests if r.method == "POST" and "/events" in r.path)
    assert (bound, events) == (PODS + 1, PODS + 1)
    sent_as = {r.content_type for r in api.requests if r.method == "POST"}
    assert sent_as == {PROTOBUF if protobuf else JSON}
    product, stdlib = _calls(pstats.Stats(profiler))
    assert product / PODS <= PRODUCT_CALLS_PER_POD, f"{product / PODS:.1f} product calls per pod"
    assert stdlib / PODS <= STDLIB_CALLS_PER_POD, f"{stdlib / PODS:.1f} standard-library calls per pod"


def test_loading_the_in_tree_plugins_builds_no_cel_parser() -> None:
    """A scheduler that never compiles a CEL selector does not pay for celpy's parser at start-up."""
    code = (
        "from koord_scheduler.app.plugin_loading import build_registry\n"
        "from koord_scheduler.plugins.dynamicresources import cel\n"
        "build_registry(use_entry_points=False)\n"
        "assert cel.environment.cache_info().currsize == 0, 'CEL environment built at start-up'\n"
        "cel.Selector('device.driver == \"x\"')\n"
        "assert cel.environment.cache_info().currsize == 1\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
