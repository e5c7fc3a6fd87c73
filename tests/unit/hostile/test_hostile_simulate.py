"""``simulate`` input that is broken in every way we could think of, and a seeded mutator over the
bundled example clusters: each run ends with placements and problems, never a traceback.

``PYKOORD_FUZZ_MUTATIONS`` sets how many mutations the fuzzer runs (default 200, a few seconds);
``PYKOORD_FUZZ_SEED`` replays one seed.
"""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_scheduler.app.cli import new_scheduler_command

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "config" / "simulate").glob("*.yaml"))
CLUSTERS = [p for p in EXAMPLES if p.name != "scheduler-config.yaml"]
NOW = "2026-01-01T00:05:00Z"
NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""


def pod_doc(name: str, **resources: str) -> str:
    requests = json.dumps(resources or {"cpu": "1"})
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec: {{containers: [{{name: c, image: i, resources: {{requests: {requests}}}}}]}}
"""


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = new_scheduler_command().run(["simulate", "--now", NOW, *args])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, data: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return str(path)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", id="png"),
        pytest.param(b"kind: Node\nmetadata: {name: caf\xe9}\n", id="latin-1"),
    ],
)
def test_non_utf8_cluster_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    code, _, err = simulate(capsys, "--cluster", write(tmp_path, "c.yaml", data))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "not UTF-8 text" in lines[0] and "c.yaml: file:" in lines[0], err


def test_non_utf8_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", NODE)
    code, out, err = simulate(capsys, "--cluster", cluster, "--config", write(tmp_path, "cfg.yaml", b"\xff\xfe\x00k"))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"koord-scheduler: {tmp_path}/cfg.yaml: not UTF-8 text (byte 0xff at offset 0); is it a binary file?"
    ]


def test_control_characters_are_a_yaml_problem_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = simulate(capsys, "--cluster", write(tmp_path, "c.yaml", NODE + "---\nkind: Pod\x00\x01\n"))
    assert code == 1
    assert "document 2 (line 6): invalid YAML at line 6" in err and "Traceback" not in err


def test_one_broken_document_costs_only_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "\n---\n".join([NODE, pod_doc("before"), "kind: Pod\nmetadata: {name: [broken\n", pod_doc("after")])
    code, out, err = simulate(capsys, "--cluster", write(tmp_path, "c.yaml", text), "-o", "json")
    assert code == 1 and "Traceback" not in err
    doc = json.loads(out)
    assert {p["name"]: p["node"] for p in doc["pods"]} == {"before": "n1", "after": "n1"}
    (problem,) = doc["problems"]
    assert problem == (
        f"{tmp_path}/c.yaml: document 3 (line 13): invalid YAML at line 14: expected ',' or ']', but got '<stream end>'"
    )


def billion_laughs(levels: int = 11) -> str:
    lines = [
        "kind: Pod",
        "metadata: {name: lol}",
        "spec:",
        "  containers: [{name: c}]",
        "  x0: &x0 [l, l, l, l, l, l, l, l, l]",
    ]
    lines += [f"  x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("document", "want_problem"),
    [
        pytest.param(billion_laughs(), "excessive aliasing", id="billion-laughs"),
        pytest.param(
            "kind: Pod\nmetadata: &m {name: p2, labels: *m}\nspec: {containers: [{name: c}]}\n",
            "an alias refers to a node that contains it",
            id="recursive-alias",
        ),
    ],
)
def test_alias_bombs_cost_only_their_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, want_problem: str
) -> None:
    text = "\n---\n".join([NODE, document, pod_doc("ok")])
    code, out, err = simulate(capsys, "--cluster", write(tmp_path, "c.yaml", text), "-o", "json")
    doc = json.loads(out)
    assert {p["name"]: p["node"] for p in doc["pods"]} == {"ok": "n1"}
    (problem,) = doc["problems"]
    assert "document 2" in problem and want_problem in problem
    assert code == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("document", "want_problem"),
    [
        pytest.param(pod_doc("neg", memory="-1"), "spec.containers[0].resources.requests.memory", id="negative-memory"),
        pytest.param(pod_doc("big", cpu="99999999999999999999999"), "exceeds the largest quantity", id="huge-cpu"),
        pytest.param(pod_doc("ei", memory="100Ei"), "exceeds the largest quantity", id="100Ei"),
        pytest.param(pod_doc("inf", memory="1e400"), "exceeds the largest quantity", id="1e400"),
        pytest.param(
            "kind: Pod\nmetadata: {name: empty}\nspec: {containers: []}\n",
            "Pod default/empty: spec.containers: required: a pod needs at least one container",
            id="no-containers",
        ),
        pytest.param(
            NODE.replace("n1", "huge").replace('cpu: "4"', 'cpu: "99999999999999999999999"'),
            "Node huge: status.allocatable.cpu",
            id="huge-node",
        ),
        pytest.param(
            "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Reservation\nmetadata: {name: r}\n"
            "spec: {template: just a string, owners: [{object: {name: p}}]}\n",
            "spec.template: expected an object, got string",
            id="reservation-template-string",
        ),
    ],
)
def test_objects_kubernetes_refuses_are_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, want_problem: str
) -> None:
    text = "\n---\n".join([NODE, pod_doc("ok"), document])
    code, out, err = simulate(capsys, "--cluster", write(tmp_path, "c.yaml", text), "-o", "json")
    doc = json.loads(out)
    assert {p["name"]: p["node"] for p in doc["pods"]}["ok"] == "n1"
    assert [p["name"] for p in doc["pods"] if p["node"]] == ["ok"]  # the bad pod is never placed
    assert any(want_problem in p for p in doc["problems"]), doc["problems"]
    assert code == 1 and "Traceback" not in err


# ----- the fuzzer ------------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    None,
    "",
    0,
    -1,
    "-1",
    "-400",
    1.5,
    True,
    "1e400",
    1e308,
    "99999999999999999999999",
    "100Ei",
    "9223372036854775807",
    "forever",
    "12x",
    [],
    {},
    [1, [2]],
    {"a": {"b": None}},
    "x" * 300,
    "2026-13-45T99:99:99Z",
    10**400,
    -(10**400),
    "1" + "0" * 400,
    "0-4000000000",
    "99999999999999999999h",
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any, *, delete: bool = False) -> Any:
    if not path:
        return value
    parent = root
    for part in path[:-1]:
        parent = parent[part]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return root


def mutate(text: str, rng: random.Random) -> str | bytes:
    """One random structural or textual mutation of a cluster file."""
    choice = rng.randrange(10)
    if choice < 6:  # structural: replace or delete one value somewhere in one document
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        i = rng.randrange(len(docs))
        path = rng.choice(_paths(docs[i]))
        delete = bool(path) and rng.random() < 0.3
        docs[i] = _set(docs[i], path, rng.choice(HOSTILE_VALUES), delete=delete)
        return yaml.safe_dump_all(docs)
    lines = text.splitlines(keepends=True)
    at = rng.randrange(len(lines))
    if choice == 6:  # drop or duplicate a line (breaks indentation, duplicates keys)
        return "".join(lines[:at] + (lines[at : at + 1] * 2 if rng.random() < 0.5 else []) + lines[at + 1 :])
    if choice == 7:  # a random character somewhere
        pos = rng.randrange(len(text))
        return (
            text[:pos] + rng.choice(["{", "]", ":", "'", '"', "\t", "&a", "*a", "\x00", "\u2028", "---\n"]) + text[pos:]
        )
    if choice == 8:  # cut the file short
        return text[: rng.randrange(len(text))]
    data = text.encode()  # random bytes
    pos = rng.randrange(len(data))
    return data[:pos] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4))) + data[pos:]


@pytest.mark.slow
def test_mutated_example_clusters_never_raise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    count = int(os.environ.get("PYKOORD_FUZZ_MUTATIONS", "200"))
    seeds = [int(os.environ["PYKOORD_FUZZ_SEED"])] if "PYKOORD_FUZZ_SEED" in os.environ else range(count)
    texts = [p.read_text() for p in CLUSTERS]
    outcomes: dict[int, int] = {}
    for seed in seeds:
        rng = random.Random(seed)
        mutated = mutate(rng.choice(texts), rng)
        path = write(tmp_path, "fuzz.yaml", mutated)
        with caplog.at_level(logging.WARNING):
            try:
                code, out, err = simulate(capsys, "--cluster", path, "-o", rng.choice(["text", "json"]))
            except Exception as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"seed {seed}: simulate raised {type(exc).__name__}: {exc}")
        assert "Traceback" not in err, f"seed {seed}:\n{err}"
        tracebacks = [r for r in caplog.records if r.exc_info]
        assert not tracebacks, f"seed {seed}: logged a traceback: {tracebacks[0].getMessage()}"
        assert code in (0, 1), f"seed {seed}: exit {code}: {err}"
        assert out, f"seed {seed}: no report"
        outcomes[code] = outcomes.get(code, 0) + 1
        caplog.clear()
    if len(seeds) > 20:
        assert outcomes.get(1, 0) > len(seeds) // 4, outcomes  # the mutations do break things


def test_alias_bomb_in_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + billion_laughs()
    cluster = write(tmp_path, "c.yaml", NODE)
    code, out, err = simulate(capsys, "--cluster", cluster, "--config", write(tmp_path, "cfg.yaml", config))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "cfg.yaml" in line and "excessive aliasing" in line
