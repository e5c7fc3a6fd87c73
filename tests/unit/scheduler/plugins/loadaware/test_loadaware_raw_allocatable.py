"""``node.koordinator.sh/raw-allocatable`` (Koordinator EstimateNode): the un-amplified
allocatable the load maths use, per resource, in both forms of Filter (``outcome`` checks both)."""

from __future__ import annotations

import pytest

from koord_scheduler.plugins.loadaware.raw_allocatable import ANNOTATION_RAW_ALLOCATABLE, raw_allocatable_row
from tests.builders import make_pod
from tests.unit.scheduler.plugins.loadaware.loadaware_helpers import node_metric
from tests.unit.scheduler.plugins.loadaware.test_loadaware_plugin import PASS, node, outcome, setup

GI = 1024**3
BASE = [8000, 32 * GI]  # cpu (milli), memory (bytes)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param('{"cpu": "4"}', [4000, 32 * GI], id="cpu-overridden-memory-kept"),
        pytest.param('{"cpu": "4500m", "memory": "16Gi"}', [4500, 16 * GI], id="both-overridden"),
        pytest.param('{"cpu": 6}', [6000, 32 * GI], id="bare-number"),
        pytest.param('{"nvidia.com/gpu": "2"}', BASE, id="resource-not-vectorised-ignored"),
        pytest.param("not json", BASE, id="malformed-json-ignored"),
        pytest.param('["cpu"]', BASE, id="not-an-object-ignored"),
        pytest.param('{"cpu": "lots"}', BASE, id="bad-quantity-ignored-whole"),
        pytest.param('{"cpu": true}', BASE, id="bool-ignored"),
    ],
)
def test_raw_allocatable_row(raw: str, want: list[int]) -> None:
    assert raw_allocatable_row(raw, ("cpu", "memory"), BASE) == want


def test_thresholds_use_raw_allocatable() -> None:
    """8 cores amplified from 4: usage 2.5 + incoming 0.85 is 42% of 8 but 84% of 4 (> 65)."""
    nodes = [node("amplified", **{ANNOTATION_RAW_ALLOCATABLE: '{"cpu": "4"}'}), node("plain")]
    metrics = [node_metric("amplified", cpu="2500m", memory="4Gi"), node_metric("plain", cpu="2500m", memory="4Gi")]
    plugin, handle = setup(nodes, metrics)
    pod = make_pod("in").req(cpu="1", memory="1Gi").build()
    assert outcome(plugin, pod, handle.snapshot) == {
        "amplified": "node(s) cpu usage exceed threshold",
        "plain": PASS,
    }
