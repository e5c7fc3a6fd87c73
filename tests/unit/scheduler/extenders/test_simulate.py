"""``simulate`` calls the configured extenders and, with ``--debug-scores``, reports their verdicts."""

from __future__ import annotations

from apis.config import parse_scheduler_config
from koord_scheduler.app.simulate import run_simulation, to_text
from koord_scheduler.plugins.registry import in_tree_registry
from tests.extender_fake import node_names, serve_extender

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: a}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: b}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: c}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


async def test_simulate_reports_extender_verdicts() -> None:
    verbs = {
        "filter": lambda b: {"NodeNames": [n for n in node_names(b) if n != "a"], "FailedNodes": {"a": "too hot"}},
        "prioritize": lambda b: [{"Host": n, "Score": 7 if n == "c" else 1} for n in node_names(b)],
    }
    with serve_extender(verbs) as f:
        config = parse_scheduler_config(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "extenders": [
                    {
                        "urlPrefix": f.url,
                        "filterVerb": "filter",
                        "prioritizeVerb": "prioritize",
                        "weight": 2,
                        "nodeCacheCapable": True,
                    }
                ],
            },
            source="test",
        )
        result, _ = await run_simulation(
            None, config, in_tree_registry(), now=0.0, cluster_text=CLUSTER, debug_scores=3
        )
    assert [(p.name, p.node) for p in result.placements] == [("web", "c")]
    want = [
        {"pod": "default/web", "extender": f.url, "node": "a", "verdict": "rejected: too hot"},
        {"pod": "default/web", "extender": f.url, "node": "b", "verdict": "score +20"},
        {"pod": "default/web", "extender": f.url, "node": "c", "verdict": "score +140"},
    ]
    assert result.extra_sections["extender verdicts"] == want
    assert "rejected: too hot" in to_text(result)
