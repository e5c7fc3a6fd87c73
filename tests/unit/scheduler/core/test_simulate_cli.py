"""``koord-scheduler simulate`` end to end, in-process through the command object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koord_scheduler.app.cli import new_scheduler_command
from tests.builders import make_node, make_pod

NODE_OK = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = new_scheduler_command().run(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_json_output_places_pods_and_reports_unschedulable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    docs = [
        make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).obj(),
        make_node("n2").capacity(cpu="2", memory="8Gi", pods=10).taint("dedicated", "gpu", "NoSchedule").obj(),
        make_pod("fits").req(cpu="1").obj(),
        make_pod("too-big").req(cpu="16").obj(),
        make_pod("other").scheduler("someone-else").obj(),
    ]
    code, out, _ = run(capsys, "--cluster", write(tmp_path, "c.yaml", yaml.safe_dump_all(docs)), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    pods = {p["name"]: p for p in doc["pods"]}
    assert pods["fits"]["node"] == "n1" and pods["fits"]["message"] == ""
    assert pods["too-big"]["node"] is None
    assert pods["too-big"]["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). no new claims to "
        "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert pods["other"]["node"] is None and "someone-else" in pods["other"]["message"]
    n1 = next(n for n in doc["nodes"] if n["name"] == "n1")
    assert n1["requested"]["cpu"] == "1" and n1["requestedBefore"].get("cpu", "0") == "0"
    assert n1["allocatable"]["cpu"] == "4"


def test_bad_objects_are_reported_and_the_rest_still_scheduled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        NODE_OK
        + """---
apiVersion: v1
kind: Node
metadata: {name: broken}
status: {allocatable: {cpu: "12x"}}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-pod, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {memory: lots}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: good-pod, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
---
just a string
"""
    )
    code, out, err = run(capsys, "--cluster", write(tmp_path, "c.yaml", text), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    assert {p["name"]: p["node"] for p in doc["pods"]} == {"good-pod": "n1"}
    assert 'Node broken: status.allocatable.cpu: invalid quantity "12x"' in err
    assert "Pod default/bad-pod: spec.containers[0].resources.requests.memory" in err
    assert "document 5: is not a mapping" in err
    assert "Traceback" not in err


def test_invalid_yaml_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--cluster", write(tmp_path, "c.yaml", "kind: Node\n  bad: [indent\n"))
    assert code == 1
    assert "c.yaml: document 1 (line 1): invalid YAML at line 2: mapping values are not allowed here" in err


@pytest.mark.parametrize(
    ("config", "want_in_error"),
    [
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "percentageOfNodesToScore: 120\n",
            "percentageOfNodesToScore: Invalid value: 120",
            id="range",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
            "- schedulerName: default-scheduler\n  plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n",
            "NoSuchPlugin",
            id="unknown-plugin",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
            "- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
            "      scoringStrategy: {type: Fancy}\n",
            "scoringStrategy.type",
            id="bad-args-field-path",
        ),
    ],
)
def test_bad_config_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, want_in_error: str
) -> None:
    code, out, err = run(capsys, "--config", write(tmp_path, "cfg.yaml", config))
    assert code == 2
    assert out == ""
    assert want_in_error in err
    assert "Traceback" not in err


def test_bundled_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 0
    assert "Scheduled" in out and "Node allocation" in out


def test_now_must_be_rfc3339(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        new_scheduler_command().run(["simulate", "--now", "yesterday"])
    assert info.value.code == 2
    assert "RFC3339" in capsys.readouterr().err


def test_debug_scores_and_filters_log_tables(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run(capsys, "--debug-scores", "2", "--debug-filters")
    assert code == 0
    text = caplog.text
    assert "scores for pod prod/web-1:" in text
    assert "| # | Node | TaintToleration | NodeResourcesFit |" in text
    want = "filter failed: pod batch/huge-job node node-b2: UNSCHEDULABLE_AND_UNRESOLVABLE from NodeUnschedulable"
    assert want in text


def test_nodes_a_prefilter_left_out_name_only_the_plugins_that_narrowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's ``pluginsWithNodes``: only NodeAffinity narrowed the set, so only it is named,
    not every PreFilter plugin that ran."""
    import yaml

    pinned = make_pod("pinned").req(cpu="16").obj()
    pinned["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            }
        }
    }
    docs = [
        make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).obj(),
        make_node("n2").capacity(cpu="4", memory="8Gi", pods=10).obj(),
        pinned,
    ]
    code, out, _ = run(capsys, "--cluster", write(tmp_path, "c.yaml", yaml.safe_dump_all(docs)), "-o", "json")
    assert code == 0
    message = json.loads(out)["pods"][0]["message"]
    assert message.startswith(
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
    ), message
