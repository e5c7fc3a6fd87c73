"""Read a KubeSchedulerConfiguration from YAML/JSON text, a mapping, a file, or a ConfigMap wrapping one.

Decoding, defaulting and validation run in one pass and every problem is collected; the caller gets
either a defaulted, valid configuration or one :class:`ConfigError` naming the file and each field path.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from apis.config.decoding import decode_model
from apis.config.errors import ConfigError, FieldError, invalid, not_supported, required
from apis.config.plugin_args import IN_TREE_ARGS
from apis.config.types import API_VERSION, KIND, KubeSchedulerConfiguration
from apis.config.validation import validate_configuration
from apis.core import yamlsafe


def load_scheduler_config(
    path: str | Path, *, args_models: Mapping[str, type[BaseModel]] = IN_TREE_ARGS
) -> KubeSchedulerConfiguration:
    """Load and validate the configuration file at ``path`` (YAML or JSON, or a ConfigMap holding it)."""
    file_path = Path(path)
    try:
        text = file_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([], source=str(file_path), summary=f"cannot read file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        summary = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); is it a binary file?"
        raise ConfigError([], source=str(file_path), summary=summary) from None
    return parse_scheduler_config(text, source=str(file_path), args_models=args_models)


def parse_scheduler_config(
    data: str | bytes | Mapping[str, Any],
    *,
    source: str = "<config>",
    args_models: Mapping[str, type[BaseModel]] = IN_TREE_ARGS,
) -> KubeSchedulerConfiguration:
    """Decode, default and validate a configuration.

    ``data`` is YAML/JSON text or an already-parsed mapping. A ``v1/ConfigMap`` is unwrapped: the
    data entry whose content is a KubeSchedulerConfiguration is used (Koordinator ships its config as
    the ``koord-scheduler-config`` key). Plugin args are checked for plugins in ``args_models``; args
    of other plugins are kept raw for the registry to decode. Raises :class:`ConfigError`.
    """
    document = _parse_text(data, source) if isinstance(data, str | bytes) else data
    if not isinstance(document, Mapping):
        raise ConfigError([invalid("", _type_name(document), "the configuration must be a mapping")], source=source)
    document, source = _unwrap_config_map(document, source)
    errors = _type_meta_errors(document)
    if errors:
        raise ConfigError(errors, source=source)
    config, errors = decode_model(KubeSchedulerConfiguration, dict(document))
    if config is not None:
        errors = validate_configuration(config, args_models)
    else:
        errors += _errors_beyond_decoding(document, args_models)
    if errors or config is None:
        raise ConfigError(errors, source=source)
    return config


def _errors_beyond_decoding(
    document: Mapping[str, Any], args_models: Mapping[str, type[BaseModel]]
) -> list[FieldError]:
    """Semantic errors of the rest of a document that failed to decode, so one run reports all.

    The offending keys are dropped (falling back to their defaults) and the rest is validated. When
    that is not possible without renumbering list items (a list entry itself is malformed), nothing
    more is reported.
    """
    locs = _prunable_locs(document)
    if not locs:
        return []
    pruned: Any = copy.deepcopy(dict(document))
    for loc in locs:
        parent = pruned
        try:
            for element in loc[:-1]:
                parent = parent[element]
        except (KeyError, IndexError, TypeError):
            return []
        if not isinstance(parent, dict):
            return []
        parent.pop(loc[-1], None)
    config, _ = decode_model(KubeSchedulerConfiguration, pruned)
    if config is None:
        return []
    return validate_configuration(config, args_models)


def _prunable_locs(document: Mapping[str, Any]) -> list[tuple[int | str, ...]]:
    """Locations of decoding errors that can be dropped as dict keys; empty if any cannot."""
    try:
        KubeSchedulerConfiguration.model_validate(dict(document), by_alias=True, by_name=False)
    except ValidationError as exc:
        locs = [tuple(e["loc"]) for e in exc.errors() if e["type"] != "missing"]
        if len(locs) != exc.error_count() or any(not loc or isinstance(loc[-1], int) for loc in locs):
            return []
        return locs
    return []


def strip_helm_template(text: str, *, placeholder: str = "helm-value") -> str:
    """Make a Helm chart template parseable: drop lines that are only ``{{ ... }}`` directives and
    replace inline ``{{ ... }}`` expressions with ``placeholder``.

    Both branches of an ``if`` are kept, which is what a test of "everything the chart can render"
    wants; ``{{ toYaml ... }}`` blocks are dropped.
    """
    kept = [line for line in text.splitlines() if not re.fullmatch(r"\s*\{\{.*\}\}\s*", line)]
    return re.sub(r"\{\{.*?\}\}", placeholder, "\n".join(kept)) + "\n"


def _parse_text(data: str | bytes, source: str) -> Any:
    try:
        documents = [d for d in yamlsafe.safe_load_all(data) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([], source=source, summary=f"invalid YAML: {where}{problem}") from None
    except RecursionError:
        raise ConfigError([], source=source, summary="invalid YAML: nested too deeply") from None
    if len(documents) != 1:
        raise ConfigError([], source=source, summary=f"expected one YAML document, found {len(documents)}")
    return documents[0]


def _unwrap_config_map(document: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], str]:
    if document.get("kind") != "ConfigMap":
        return document, source
    entries = document.get("data") or {}
    found = []
    for key, value in entries.items() if isinstance(entries, Mapping) else ():
        if not isinstance(value, str):
            continue
        try:
            content = yaml.safe_load(value)
        except yaml.YAMLError:
            continue
        if isinstance(content, Mapping) and content.get("kind") == KIND:
            found.append((key, content))
    if len(found) != 1:
        keys = ", ".join(key for key, _ in found) or "none"
        raise ConfigError(
            [],
            source=source,
            summary=f"ConfigMap must hold exactly one {KIND} in its data (found: {keys})",
        )
    key, content = found[0]
    return content, f"{source}[data.{key}]"


def _type_meta_errors(document: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    api_version = document.get("apiVersion")
    kind = document.get("kind")
    if api_version is None:
        errors.append(required("apiVersion", f"must be {API_VERSION}"))
    elif api_version != API_VERSION:
        errors.append(not_supported("apiVersion", api_version, [API_VERSION]))
    if kind is None:
        errors.append(required("kind", f"must be {KIND}"))
    elif kind != KIND:
        errors.append(not_supported("kind", kind, [KIND]))
    return errors


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__
