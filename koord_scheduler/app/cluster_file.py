"""Reading a cluster file for ``simulate``: multi-document YAML of ordinary Kubernetes objects.

Objects may come singly or inside ``List`` documents, as ``kubectl get -o yaml`` prints them. A bad
object yields one :class:`ObjectProblem` naming its kind, name and field; the good ones are still used.
The YAML is read document by document (split at ``---`` / ``...`` lines), so a syntax error costs only
its own document, reported with its number and line; a file that is not UTF-8 text is one problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apis.core import yamlsafe
from apis.core.errors import ParseError
from apis.core.parse import parse_node, parse_pod
from apis.core.types import Node, Pod
from apis.scheduling import ReservationRecord
from koord_scheduler.framework.errors import describe

ExtraParser = Callable[[Mapping[str, Any]], Any]
"""Parses an object of an extra kind (Reservation, NodeMetric); raises ParseError/ValueError when bad."""

IGNORED_KINDS = frozenset(
    {"Namespace", "PriorityClass", "Event", "ConfigMap", "Service", "ServiceAccount", "NodeMetric"}
)
"""Kinds a cluster dump holds that matter only to the plugins that watch them (NodeMetric: LoadAwareScheduling);
skipped quietly when none does."""

PodAdmit = Callable[[Mapping[str, Any]], tuple[Mapping[str, Any], list[str]]]
PodAdmission = Callable[[list[Mapping[str, Any]]], tuple[PodAdmit, list[tuple[str, str]]]]
"""Given every object of the file: a function that turns a raw pod into the pod as admission leaves it
(plus problems to report about that pod), and problems about the file's other objects. The colocation
webhook's offline form (koord_scheduler/webhook/offline.py); it consumes ``ADMISSION_KINDS``."""

ADMISSION_KINDS = frozenset({"ClusterColocationProfile"})


@dataclass(frozen=True, slots=True)
class ObjectProblem:
    source: str
    where: str
    """``Kind namespace/name`` or ``document N``."""
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.where}: {self.message}"


@dataclass(slots=True)
class ClusterFile:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    objects: dict[str, list[tuple[str, Mapping[str, Any]]]] = field(default_factory=dict)
    """kind -> (name, raw object) for the extra kinds; each was parsed once to validate it."""
    problems: list[ObjectProblem] = field(default_factory=list)
    report_times: list[str] = field(default_factory=list)
    """Every NodeMetric's ``status.updateTime`` (watched or not): when the koordlets last reported."""


def load_cluster_file(
    path: str | Path, extra_kinds: Mapping[str, ExtraParser] | None = None, admission: PodAdmission | None = None
) -> ClusterFile:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        out = ClusterFile()
        out.problems.append(ObjectProblem(source, "file", f"cannot read: {exc.strerror or exc}"))
        return out
    except UnicodeDecodeError as exc:
        out = ClusterFile()
        byte = exc.object[exc.start]
        message = f"not UTF-8 text (byte 0x{byte:02x} at offset {exc.start}); is it a binary file?"
        out.problems.append(ObjectProblem(source, "file", message))
        return out
    return parse_cluster_text(text, source=source, extra_kinds=extra_kinds, admission=admission)


def parse_cluster_text(
    text: str,
    *,
    source: str = "<cluster>",
    extra_kinds: Mapping[str, ExtraParser] | None = None,
    admission: PodAdmission | None = None,
) -> ClusterFile:
    out = ClusterFile()
    extra = dict(extra_kinds or {})
    documents = _load_documents(text, source, out.problems)
    seen: set[tuple[str, str]] = set()
    objects = list(_objects(documents, source, out.problems))
    admit = None
    if admission is not None:
        admit, admission_problems = admission([obj for _, obj in objects])
        out.problems.extend(ObjectProblem(source, where, message) for where, message in admission_problems)
    for where, obj in objects:
        kind = obj.get("kind")
        name = _display(obj)
        label = f"{kind} {name}" if kind else where
        if not isinstance(kind, str) or not kind:
            out.problems.append(ObjectProblem(source, where, "missing field 'kind'"))
            continue
        if kind == "NodeMetric":
            status = obj.get("status")
            stamp = status.get("updateTime") if isinstance(status, Mapping) else None
            if isinstance(stamp, str):
                out.report_times.append(stamp)
        if kind in IGNORED_KINDS and kind not in extra:  # e.g. Namespaces matter once a plugin watches them
            continue
        if kind in ADMISSION_KINDS and admission is not None:
            continue
        if (kind, name) in seen:
            out.problems.append(ObjectProblem(source, label, "duplicate object (the first one is used)"))
            continue
        seen.add((kind, name))
        try:
            if kind == "Node":
                out.nodes.append(parse_node(obj))
            elif kind == "Pod":
                admitted = obj
                if admit is not None:
                    admitted, pod_problems = admit(obj)
                    out.problems.extend(ObjectProblem(source, label, message) for message in pod_problems)
                out.pods.append(parse_pod(admitted))
            elif kind in extra:
                parsed = extra[kind](obj)  # validate now, so a bad object is reported and skipped
                out.objects.setdefault(kind, []).append((name, dict(obj)))
                if isinstance(parsed, ReservationRecord) and parsed.malformed:
                    # A field that cannot be read is an input problem. Kept all the same: the Reservation
                    # plugin reports it in its section, as it does for one that is merely incomplete
                    # (no owners), which Koordinator ignores and so does this file's exit status.
                    out.problems.append(ObjectProblem(source, label, parsed.invalid))
            else:
                out.problems.append(ObjectProblem(source, label, f"unsupported kind {kind!r} (ignored)"))
        except ParseError as exc:
            out.problems.append(ObjectProblem(source, label, f"{exc.field}: {exc.message}"))
        except ValueError as exc:
            out.problems.append(ObjectProblem(source, label, str(exc)))
        except Exception as exc:  # whatever a parser raises on odd input costs that object only
            out.problems.append(ObjectProblem(source, label, describe(exc)))
    return out


_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?:[ \t]|$)")


def _split_documents(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` of each YAML document. A ``---`` or ``...`` line at column 0 always
    ends a document (YAML 1.2 §9.1), inside block scalars too, so splitting there is what a parser does."""
    chunks: list[tuple[int, str]] = []
    start, lines = 1, list[str]()
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if _DOCUMENT_MARKER.match(line):
            chunks.append((start, "".join(lines)))
            # "--- {a: 1}" starts the next document on the marker line itself.
            rest = line[3:] if line.startswith("---") else ""
            start, lines = (number, [rest]) if rest.strip() else (number + 1, [])
            continue
        lines.append(line)
    chunks.append((start, "".join(lines)))
    return chunks


def _load_documents(text: str, source: str, problems: list[ObjectProblem]) -> list[tuple[int, Any]]:
    """``(document number, content)`` for each document that parses; the others become problems."""
    out: list[tuple[int, Any]] = []
    number = 0
    for first_line, chunk in _split_documents(text):
        if not chunk.strip() or all(ln.lstrip().startswith("#") for ln in chunk.splitlines() if ln.strip()):
            continue
        number += 1
        try:
            out.append((number, yamlsafe.safe_load(chunk)))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            last_line = first_line + max(0, len(chunk.rstrip().splitlines()) - 1)
            line = min(first_line + mark.line, last_line) if mark is not None else first_line
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            where = f"document {number} (line {first_line})"
            problems.append(ObjectProblem(source, where, f"invalid YAML at line {line}: {problem}"))
        except RecursionError:
            where = f"document {number} (line {first_line})"
            problems.append(ObjectProblem(source, where, "invalid YAML: nested too deeply"))
    return out


def _objects(
    documents: list[tuple[int, Any]], source: str, problems: list[ObjectProblem]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for i, doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            problems.append(ObjectProblem(source, f"document {i}", "is not a mapping"))
            continue
        if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                problems.append(ObjectProblem(source, f"document {i}", "items: must be a list"))
                continue
            for j, item in enumerate(items):
                if isinstance(item, Mapping):
                    yield f"document {i} items[{j}]", item
                else:
                    problems.append(ObjectProblem(source, f"document {i} items[{j}]", "is not a mapping"))
        else:
            yield f"document {i}", doc


def _display(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    name = meta.get("name") or "<unnamed>"
    ns = meta.get("namespace")
    if obj.get("kind") == "Pod":
        ns = ns or "default"
    return f"{ns}/{name}" if ns else str(name)
