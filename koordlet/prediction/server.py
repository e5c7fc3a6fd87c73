"""The peak predict server: trains one decaying-histogram model per pod, per priority class and for the
node's system part every training interval, and keeps them across restarts through checkpoints.

Koordinator ``pkg/koordlet/prediction/predict_server.go``. A training step reads, for each pod, the p90 of
its CPU (cores) and memory (bytes) usage over the last training interval from the metric cache and adds it
to the pod's model; the sums per priority class (``GetPodPriorityClassWithDefault``; a class with no pod
gets 0), the node's own usage, and the system part (node usage minus all pods, at least 0) go into the
node-level models ``__node-<class>__``, ``__node__`` and ``__node-sys__``. Every sample has weight 1.

Models not updated for ``model_expiration`` are dropped with their checkpoint. Every minute up to
``checkpoint_max_per_step`` models whose last checkpoint is older than ``checkpoint_interval`` are
written, oldest first. On start the checkpoints of the current pods and the node-level models are loaded
(their last-update time is the checkpoint's), and every other checkpoint file is removed.

A prediction is the p60/p90/p95/p98/max of a model: CPU in millicores (``int(cores * 1000)``), memory in
bytes, as Koordinator's ``GetPrediction`` truncates them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from apis.extension import PriorityClass
from koordlet.prediction.checkpoint import FileCheckpointer, ModelCheckpoint
from koordlet.prediction.histogram import DecayingHistogram, ExponentialOptions
from koordlet.statesinformer.pods import PodMeta
from koordlet.system.clock import Clock, wall_clock

log = logging.getLogger(__name__)

MIN_SAMPLE_WEIGHT = 0.1
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
BUCKET_GROWTH = 0.05
CPU_OPTIONS = ExponentialOptions(1024, 0.025, 1 + BUCKET_GROWTH, EPSILON)
"""0.025 to 1024 cores, buckets 5 % wider each."""
MEMORY_OPTIONS = ExponentialOptions(float(1 << 41), float(5 << 20), 1 + BUCKET_GROWTH, EPSILON)
"""5 MiB to 2 TiB, buckets 5 % wider each."""

NODE_UID = "__node__"
SYSTEM_ITEM = "sys"
KNOWN_PRIORITY_CLASSES = (
    PriorityClass.PROD,
    PriorityClass.MID,
    PriorityClass.BATCH,
    PriorityClass.FREE,
    PriorityClass.NONE,
)
PERCENTILES = {"p60": 0.6, "p90": 0.9, "p95": 0.95, "p98": 0.98, "max": 1.0}


def node_item_uid(item: str) -> str:
    return f"__node-{item}__"


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    """Koordinator's ``prediction.Config`` and its ``--prediction-*`` flag defaults (seconds)."""

    checkpoint_dir: Path = Path("/prediction-checkpoints")
    cold_start_duration: float = 24 * 3600.0
    safety_margin_percent: int = 10
    memory_half_life: float = 24 * 3600.0
    cpu_half_life: float = 12 * 3600.0
    training_interval: float = 60.0
    model_expiration: float = 30 * 60.0
    checkpoint_interval: float = 10 * 60.0
    checkpoint_max_per_step: int = 12


@dataclass(frozen=True, slots=True)
class Prediction:
    """Per percentile name: (CPU millicores, memory bytes)."""

    values: dict[str, tuple[int, int]]

    def cpu(self, percentile: str) -> int:
        return self.values[percentile][0]

    def memory(self, percentile: str) -> int:
        return self.values[percentile][1]


@dataclass(slots=True)
class Model:
    cpu: DecayingHistogram
    memory: DecayingHistogram
    last_updated: float
    last_checkpointed: float = field(default=float("-inf"))


class TrainingSource(Protocol):
    """p90 usage over a window: CPU in cores, memory in bytes (None: no samples)."""

    def pod_p90(self, pod_uid: str, resource: str, start: float, end: float) -> float | None: ...
    def node_p90(self, resource: str, start: float, end: float) -> float | None: ...


class PeakPredictServer:
    """See the module docstring. Thread-safe: the reporter reads predictions from a worker thread."""

    def __init__(self, config: PredictionConfig, *, clock: Clock = wall_clock) -> None:
        self.config = config
        self.clock = clock
        self.checkpointer = FileCheckpointer(config.checkpoint_dir)
        self.models: dict[str, Model] = {}
        self.synced = False
        """Set by the first training step; until then GC and checkpoints wait (as Koordinator's)."""
        self.trainings = 0
        self.checkpoint_errors = 0
        self._lock = threading.Lock()

    def _new_model(self, now: float) -> Model:
        return Model(
            DecayingHistogram(CPU_OPTIONS, self.config.cpu_half_life),
            DecayingHistogram(MEMORY_OPTIONS, self.config.memory_half_life),
            now,
        )

    def update(self, uid: str, cpu: float, memory: float, now: float) -> None:
        with self._lock:
            model = self.models.get(uid)
            if model is None:
                model = self.models[uid] = self._new_model(now)
            model.last_updated = now
            model.cpu.add_sample(cpu, 1.0, now)
            model.memory.add_sample(memory, 1.0, now)

    def prediction(self, uid: str, names: Iterable[str] = tuple(PERCENTILES)) -> Prediction | None:
        """The model's percentiles ``names`` (all of :data:`PERCENTILES` by default); None: no model."""
        with self._lock:
            model = self.models.get(uid)
            if model is None:
                return None
            return Prediction(
                {
                    name: (
                        int(model.cpu.percentile(PERCENTILES[name]) * 1000.0),
                        int(model.memory.percentile(PERCENTILES[name])),
                    )
                    for name in names
                }
            )

    # ----- training -----

    def train(self, pods: Iterable[PodMeta], source: TrainingSource, now: float | None = None) -> None:
        """One training step over the pods' and the node's usage in the last training interval."""
        now = self.clock() if now is None else now
        start = now - self.config.training_interval
        by_item: dict[str, tuple[float, float]] = {}
        all_pods = (0.0, 0.0)
        seen_pod = False
        for pod in pods:
            cpu = source.pod_p90(pod.uid, "cpu", start, now)
            memory = source.pod_p90(pod.uid, "memory", start, now)
            if cpu is None or memory is None:
                continue
            self.update(pod.uid, cpu, memory, now)
            item = pod.priority_class.value
            have = by_item.get(item, (0.0, 0.0))
            by_item[item] = (have[0] + cpu, have[1] + memory)
            all_pods = (all_pods[0] + cpu, all_pods[1] + memory)
            seen_pod = True
        node_cpu = source.node_p90("cpu", start, now)
        node_memory = source.node_p90("memory", start, now)
        if node_cpu is not None and node_memory is not None:
            self.update(NODE_UID, node_cpu, node_memory, now)
        for priority_class in KNOWN_PRIORITY_CLASSES:
            cpu, memory = by_item.get(priority_class.value, (0.0, 0.0))
            self.update(node_item_uid(priority_class.value), cpu, memory, now)
        sys_cpu, sys_memory = node_cpu or 0.0, node_memory or 0.0
        if seen_pod:
            sys_cpu, sys_memory = max(sys_cpu - all_pods[0], 0.0), max(sys_memory - all_pods[1], 0.0)
        self.update(node_item_uid(SYSTEM_ITEM), sys_cpu, sys_memory, now)
        self.synced = True
        self.trainings += 1

    # ----- lifecycle: GC, checkpoints, restore -----

    def gc(self, now: float | None = None) -> list[str]:
        """Drop the models not updated for ``model_expiration`` and their checkpoints; their UIDs."""
        if not self.synced:
            return []
        now = self.clock() if now is None else now
        with self._lock:
            expired = [uid for uid, m in self.models.items() if now - m.last_updated > self.config.model_expiration]
            for uid in expired:
                del self.models[uid]
        for uid in expired:
            self._remove_checkpoint(uid)
        return expired

    def checkpoint(self, now: float | None = None) -> int:
        """Write the checkpoints that are due (see the module docstring); how many were written."""
        if not self.synced:
            return 0
        now = self.clock() if now is None else now
        with self._lock:
            due = sorted(self.models.items(), key=lambda item: item[1].last_checkpointed)
        written = 0
        for uid, model in due:
            if written >= self.config.checkpoint_max_per_step:
                break
            if now - model.last_checkpointed < self.config.checkpoint_interval:
                break
            with self._lock:
                checkpoint = ModelCheckpoint(uid, model.cpu.save(), model.memory.save(), now)
            try:
                self.checkpointer.save(checkpoint)
            except (OSError, ValueError) as err:
                self.checkpoint_errors += 1
                level = logging.WARNING if self.checkpoint_errors == 1 else logging.DEBUG
                log.log(
                    level,
                    "prediction: saving the checkpoint of model %s failed: %s (further failures are "
                    "logged at debug level)",
                    uid,
                    err,
                )
            model.last_checkpointed = now
            written += 1
        return written

    def restore(self, pods: Sequence[PodMeta]) -> tuple[int, list[str]]:
        """Load the checkpoints of ``pods`` and of the node-level models; remove every other file.
        Returns (models restored, UIDs removed)."""
        known = {pod.uid for pod in pods} | {NODE_UID, node_item_uid(SYSTEM_ITEM)}
        known |= {node_item_uid(pc.value) for pc in KNOWN_PRIORITY_CLASSES}
        removed: list[str] = []
        restored = 0
        try:
            found = self.checkpointer.restore()
        except OSError as err:
            log.warning("prediction: reading the checkpoints in %s failed: %s", self.config.checkpoint_dir, err)
            return 0, []
        for item in found:
            if item.checkpoint is None or item.uid not in known:
                if item.error:
                    log.warning("prediction: checkpoint %s is unusable and is removed: %s", item.uid, item.error)
                removed.append(item.uid)
                self._remove_checkpoint(item.uid)
                continue
            model = self._new_model(item.checkpoint.last_updated)
            try:
                if item.checkpoint.cpu is not None:
                    model.cpu.load(item.checkpoint.cpu)
                if item.checkpoint.memory is not None:
                    model.memory.load(item.checkpoint.memory)
            except ValueError as err:
                log.warning("prediction: checkpoint %s does not fit the model (%s); starting it afresh", item.uid, err)
                model = self._new_model(item.checkpoint.last_updated)
            with self._lock:
                self.models[item.uid] = model
            restored += 1
        if restored:
            log.info("prediction: restored %d models from %s", restored, self.config.checkpoint_dir)
        return restored, removed

    def _remove_checkpoint(self, uid: str) -> None:
        try:
            self.checkpointer.remove(uid)
        except OSError as err:
            log.warning("prediction: removing the checkpoint of model %s failed: %s", uid, err)

    async def run(self, stop: asyncio.Event, pods: PodLister, source: TrainingSource, *, synced: SyncedCheck) -> None:
        """Wait for the pod list, restore, then train every ``training_interval`` and run GC and
        checkpoints every minute (every ``checkpoint_interval`` when that is shorter), until ``stop``.
        File I/O runs in a worker thread."""
        while not synced():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            if stop.is_set():
                return
        await asyncio.to_thread(self.restore, pods())
        next_train = next_maintenance = self.clock()
        while not stop.is_set():
            now = self.clock()
            if now >= next_train:
                self.train(pods(), source, now)
                next_train = now + self.config.training_interval
            if now >= next_maintenance:
                await asyncio.to_thread(self.gc, now)
                await asyncio.to_thread(self.checkpoint, now)
                next_maintenance = now + min(60.0, self.config.checkpoint_interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(min(next_train, next_maintenance) - self.clock(), 0.05))


class PodLister(Protocol):
    def __call__(self) -> Sequence[PodMeta]: ...


class SyncedCheck(Protocol):
    def __call__(self) -> bool: ...
