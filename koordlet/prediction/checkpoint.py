"""Model checkpoints on disk: one JSON file per model, named by its UID (Koordinator's ``fileCheckpointer``).

The file holds ``{"UID", "CPU", "Memory", "LastUpdated"}`` with each histogram as
``{"referenceTimestamp", "bucketWeights", "totalWeight"}``, the shape Koordinator's koordlet writes, so
either agent can read the other's directory. A file is written to ``<uid>.tmp`` and renamed, so a crash
never leaves half a checkpoint; leftover ``.tmp`` files are removed when restoring. A file that cannot be
read or parsed is reported with its error (the caller removes it) and never stops the others.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from koordlet.prediction.histogram import HistogramCheckpoint

TMP_SUFFIX = ".tmp"
MAX_CHECKPOINT_BYTES = 1 << 20
"""A model checkpoint is a few KiB; anything larger is not ours and is not read."""


@dataclass(frozen=True, slots=True)
class ModelCheckpoint:
    uid: str
    cpu: HistogramCheckpoint | None
    memory: HistogramCheckpoint | None
    last_updated: float
    """Seconds since the epoch."""


@dataclass(frozen=True, slots=True)
class RestoredCheckpoint:
    """One file found on disk: its checkpoint, or why it could not be used."""

    uid: str
    checkpoint: ModelCheckpoint | None
    error: str = ""


def _format_time(t: float) -> str:
    stamp = datetime.fromtimestamp(t, UTC)
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if stamp.microsecond:
        text += f".{stamp.microsecond:06d}".rstrip("0")
    return text + "Z"


def _parse_time(raw: Any, field: str) -> float:
    if not isinstance(raw, str):
        raise ValueError(f"{field}: expected an RFC 3339 time string")
    text = raw.replace("Z", "+00:00")
    if "." in text:  # Go writes up to nanoseconds; Python reads microseconds
        head, _, rest = text.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None


def _histogram_json(checkpoint: HistogramCheckpoint | None) -> dict[str, Any] | None:
    if checkpoint is None:
        return None
    out: dict[str, Any] = {"referenceTimestamp": _format_time(checkpoint.reference_timestamp)}
    if checkpoint.bucket_weights:
        out["bucketWeights"] = {str(k): v for k, v in sorted(checkpoint.bucket_weights.items())}
    if checkpoint.total_weight:
        out["totalWeight"] = checkpoint.total_weight
    return out


def _histogram(raw: Any, field: str) -> HistogramCheckpoint | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{field}: expected an object")
    weights_raw = raw.get("bucketWeights") or {}
    if not isinstance(weights_raw, dict):
        raise ValueError(f"{field}.bucketWeights: expected an object")
    weights: dict[int, int] = {}
    for key, weight in weights_raw.items():
        if type(weight) is not int or not 0 <= weight < 1 << 32:
            raise ValueError(f"{field}.bucketWeights[{key}]: expected an unsigned 32-bit integer")
        try:
            weights[int(key)] = weight
        except ValueError:
            raise ValueError(f"{field}.bucketWeights: bucket {key!r} is not an integer") from None
    total = raw.get("totalWeight", 0.0)
    if type(total) not in (int, float):
        raise ValueError(f"{field}.totalWeight: expected a number")
    reference = raw.get("referenceTimestamp")
    return HistogramCheckpoint(
        _parse_time(reference, f"{field}.referenceTimestamp") if reference is not None else 0.0, weights, float(total)
    )


def encode(checkpoint: ModelCheckpoint) -> str:
    return json.dumps(
        {
            "UID": checkpoint.uid,
            "CPU": _histogram_json(checkpoint.cpu),
            "Memory": _histogram_json(checkpoint.memory),
            "LastUpdated": _format_time(checkpoint.last_updated),
        }
    )


def decode(uid: str, text: str) -> ModelCheckpoint:
    """Raises ``ValueError`` naming the field."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("expected a JSON object")
    return ModelCheckpoint(
        uid=uid,  # the file name wins, as in Koordinator
        cpu=_histogram(raw.get("CPU"), "CPU"),
        memory=_histogram(raw.get("Memory"), "Memory"),
        last_updated=_parse_time(raw.get("LastUpdated"), "LastUpdated"),
    )


def safe_file_name(uid: str) -> bool:
    """A UID usable as a file name in the directory (no separators, not ``.``/``..``, no NUL)."""
    return bool(uid) and uid not in (".", "..") and "/" not in uid and "\0" not in uid and not uid.endswith(TMP_SUFFIX)


class FileCheckpointer:
    """Checkpoints under ``directory``, which must exist (the DaemonSet mounts it; Koordinator does not
    create it either), so an agent run by hand leaves no files behind."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def save(self, checkpoint: ModelCheckpoint) -> None:
        """Write atomically. Raises ``OSError`` or ``ValueError`` (a UID that is no file name)."""
        if not safe_file_name(checkpoint.uid):
            raise ValueError(f"model UID {checkpoint.uid!r} cannot be a checkpoint file name")
        target = self.directory / checkpoint.uid
        tmp = target.with_name(target.name + TMP_SUFFIX)
        tmp.write_text(encode(checkpoint))
        os.replace(tmp, target)

    def remove(self, uid: str) -> None:
        if safe_file_name(uid):
            (self.directory / uid).unlink(missing_ok=True)

    def restore(self) -> list[RestoredCheckpoint]:
        """Every checkpoint file in the directory, parsed; leftover ``.tmp`` files are deleted."""
        if not self.directory.is_dir():
            return []
        found: list[RestoredCheckpoint] = []
        for path in sorted(self.directory.iterdir()):
            if not path.is_file():
                continue
            if path.name.endswith(TMP_SUFFIX):
                path.unlink(missing_ok=True)
                continue
            try:
                if path.stat().st_size > MAX_CHECKPOINT_BYTES:
                    raise ValueError(f"larger than {MAX_CHECKPOINT_BYTES} bytes")
                found.append(RestoredCheckpoint(path.name, decode(path.name, path.read_text())))
            except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
                found.append(RestoredCheckpoint(path.name, None, f"{type(exc).__name__}: {exc}"))
        return found
