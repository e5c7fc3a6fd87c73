"""The predict server: training, model expiry, checkpoint pacing, and a restart that keeps the history."""

from __future__ import annotations

import json
from pathlib import Path

from apis.extension import KubeQOSClass, PriorityClass, QoSClass
from koordlet.prediction.checkpoint import FileCheckpointer, ModelCheckpoint
from koordlet.prediction.histogram import HistogramCheckpoint
from koordlet.prediction.server import CPU_OPTIONS, MEMORY_OPTIONS, NODE_UID, PeakPredictServer, PredictionConfig
from koordlet.statesinformer.pods import PodMeta

NOW = 1_700_000_000.0
GI = 1 << 30


def pod(uid: str, priority: PriorityClass = PriorityClass.PROD) -> PodMeta:
    return PodMeta(
        uid=uid,
        namespace="ns",
        name=uid,
        kube_qos=KubeQOSClass.BURSTABLE,
        qos=QoSClass.LS,
        priority_class=priority,
        priority=None,
        cgroup_dir="",
    )


class Source:
    """p90 usage: per pod (cores, bytes) and the node's."""

    def __init__(self, pods: dict[str, tuple[float, float]], node: tuple[float, float] | None) -> None:
        self.pods, self.node = pods, node

    def pod_p90(self, pod_uid: str, resource: str, start: float, end: float) -> float | None:
        found = self.pods.get(pod_uid)
        return None if found is None else found[0 if resource == "cpu" else 1]

    def node_p90(self, resource: str, start: float, end: float) -> float | None:
        return None if self.node is None else self.node[0 if resource == "cpu" else 1]


def bucket_end(options: object, value: float) -> float:
    bucket = options.find_bucket(value)  # type: ignore[attr-defined]
    return float(options.bucket_start(bucket + 1))  # type: ignore[attr-defined]


def server(tmp_path: Path, **kwargs: object) -> PeakPredictServer:
    return PeakPredictServer(PredictionConfig(checkpoint_dir=tmp_path, **kwargs))  # type: ignore[arg-type]


def test_training_feeds_pod_class_node_and_system_models(tmp_path: Path) -> None:
    s = server(tmp_path)
    source = Source({"a": (1.5, 2 * GI), "b": (0.5, GI), "c": (2.0, GI)}, node=(5.0, 6 * GI))
    pods = [pod("a"), pod("b"), pod("c", PriorityClass.BATCH), pod("no-metric")]
    for minute in range(10):
        s.train(pods, source, NOW + 60 * minute)
    a = s.prediction("a")
    assert a is not None
    assert a.cpu("p95") == int(bucket_end(CPU_OPTIONS, 1.5) * 1000)
    assert a.memory("p98") == int(bucket_end(MEMORY_OPTIONS, 2 * GI))
    prod = s.prediction("__node-koord-prod__")
    assert prod is not None and prod.cpu("p95") == int(bucket_end(CPU_OPTIONS, 2.0) * 1000)
    system = s.prediction("__node-sys__")  # node 5 cores - pods 4 cores
    assert system is not None and system.cpu("p95") == int(bucket_end(CPU_OPTIONS, 1.0) * 1000)
    mid = s.prediction("__node-koord-mid__")  # no mid pod: the class model still exists, at 0
    assert mid is not None and mid.cpu("max") == int(bucket_end(CPU_OPTIONS, 0.0) * 1000)
    assert s.prediction("no-metric") is None and s.prediction(NODE_UID) is not None


def test_restart_continues_from_the_checkpoints(tmp_path: Path) -> None:
    first = server(tmp_path)
    source = Source({"a": (1.5, 2 * GI)}, node=(3.0, 4 * GI))
    for minute in range(30):
        first.train([pod("a")], source, NOW + 60 * minute)
    assert first.checkpoint(NOW + 1800) == 8  # pod a, the node, 5 classes, sys: all due, up to 12 a step
    assert first.checkpoint(NOW + 1800) == 0  # nothing is due again before 10 minutes
    (tmp_path / "gone-pod").write_text(json.dumps({"UID": "gone-pod", "LastUpdated": "2023-11-14T22:13:20Z"}))
    (tmp_path / "corrupt").write_text("{not json")
    (tmp_path / "half.tmp").write_text("{")

    second = server(tmp_path)
    restored, removed = second.restore([pod("a")])
    assert restored == 8 and sorted(removed) == ["corrupt", "gone-pod"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            "a",
            NODE_UID,
            "__node-koord-prod__",
            "__node-koord-mid__",
            "__node-koord-batch__",
            "__node-koord-free__",
            "__node-__",
            "__node-sys__",
        ]
    )
    before, after = first.prediction("a"), second.prediction("a")
    assert after is not None and after == before  # the reported reclaimable does not start from zero
    assert second.models["a"].last_updated == NOW + 1800


def test_models_expire_without_samples(tmp_path: Path) -> None:
    s = server(tmp_path)
    s.train([pod("a"), pod("b")], Source({"a": (1.0, GI), "b": (1.0, GI)}, node=(2.0, 2 * GI)), NOW)
    s.checkpoint(NOW)
    s.train([pod("a")], Source({"a": (1.0, GI)}, node=(2.0, 2 * GI)), NOW + 1700)
    assert s.gc(NOW + 1801) == ["b"]
    assert not (tmp_path / "b").exists() and (tmp_path / "a").exists()


def test_checkpoints_are_paced(tmp_path: Path) -> None:
    s = server(tmp_path, checkpoint_max_per_step=3)
    s.train([pod(f"p{i}") for i in range(4)], Source({f"p{i}": (1.0, GI) for i in range(4)}, node=(6.0, 6 * GI)), NOW)
    # 4 pods, the node, 5 classes, sys: 11 models, 3 a minute, then none until 10 minutes have passed
    assert [s.checkpoint(NOW + 60 * i) for i in range(5)] == [3, 3, 3, 2, 0]
    assert s.checkpoint(NOW + 600) == 3


def test_nothing_is_written_before_the_first_training(tmp_path: Path) -> None:
    s = server(tmp_path)
    assert s.checkpoint(NOW) == 0 and s.gc(NOW) == [] and list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    s = server(tmp_path / "absent")
    s.train([], Source({}, node=(1.0, GI)), NOW)
    assert s.checkpoint(NOW) == 7 and s.checkpoint_errors == 7
    assert not (tmp_path / "absent").exists()


def test_checkpoint_file_has_koordinators_shape(tmp_path: Path) -> None:
    FileCheckpointer(tmp_path).save(ModelCheckpoint("u1", HistogramCheckpoint(NOW, {3: 10000}, 2.5), None, NOW))
    assert json.loads((tmp_path / "u1").read_text()) == {
        "UID": "u1",
        "CPU": {"referenceTimestamp": "2023-11-14T22:13:20Z", "bucketWeights": {"3": 10000}, "totalWeight": 2.5},
        "Memory": None,
        "LastUpdated": "2023-11-14T22:13:20Z",
    }
    restored = FileCheckpointer(tmp_path).restore()
    assert restored[0].checkpoint == ModelCheckpoint("u1", HistogramCheckpoint(NOW, {3: 10000}, 2.5), None, NOW)
