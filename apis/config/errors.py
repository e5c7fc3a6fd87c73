"""Field errors in apimachinery's shape, and the one exception configuration loading raises.

A :class:`FieldError` renders exactly like ``field.Error.Error()`` in k8s.io/apimachinery
(``<path>: <type>: <value>: <detail>``), so a message users have seen from kube-scheduler reads the
same here. :class:`ConfigError` carries every problem found, each prefixed with the source file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class ErrorType(StrEnum):
    """``field.ErrorType`` strings, plus ``UNKNOWN_FIELD`` for strict decoding failures."""

    INVALID = "Invalid value"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    NOT_SUPPORTED = "Unsupported value"
    NOT_FOUND = "Not found"
    FORBIDDEN = "Forbidden"
    UNKNOWN_FIELD = "Unknown field"


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()
"""Marks an error that carries no bad value (Required, Forbidden, Unknown field)."""


def format_value(value: object) -> str:
    """Render a bad value the way apimachinery does: strings quoted, scalars bare, the rest as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) and not value.is_integer() else str(int(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field path, e.g. ``profiles[0].plugins.score.enabled[1].weight``."""

    path: str
    type: ErrorType
    value: object = OMIT
    detail: str = ""

    def __str__(self) -> str:
        body = self.type.value
        if self.value is not OMIT:
            body += ": " + format_value(self.value)
        if self.detail:
            body += ": " + self.detail
        return f"{self.path}: {body}" if self.path else body


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INVALID, value, detail)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.REQUIRED, OMIT, detail)


def duplicate(path: str, value: object) -> FieldError:
    return FieldError(path, ErrorType.DUPLICATE, value)


def not_found(path: str, value: object) -> FieldError:
    return FieldError(path, ErrorType.NOT_FOUND, value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, ErrorType.FORBIDDEN, OMIT, detail)


def not_supported(path: str, value: object, supported: Iterable[str]) -> FieldError:
    quoted = ", ".join(json.dumps(s) for s in supported)
    return FieldError(path, ErrorType.NOT_SUPPORTED, value, f"supported values: {quoted}")


def unknown_field(path: str, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.UNKNOWN_FIELD, OMIT, detail)


def join_path(base: str, child: str | int) -> str:
    """``join_path("profiles", 0) == "profiles[0]"``; ``join_path("a", "b") == "a.b"``."""
    if isinstance(child, int):
        return f"{base}[{child}]"
    return f"{base}.{child}" if base else child


class ConfigError(ValueError):
    """A configuration could not be loaded. ``errors`` lists every problem found, not just the first.

    ``str()`` gives one line per problem, each prefixed with ``source`` (usually the file name), so
    the whole message can be printed as is.
    """

    def __init__(self, errors: Sequence[FieldError], *, source: str = "", summary: str = "") -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.source = source
        self.summary = summary
        super().__init__(self._render())

    def _render(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        count = len(self.errors)
        head = self.summary or f"{count} error{'s' if count != 1 else ''} in scheduler configuration"
        lines = [f"{prefix}{head}"]
        lines.extend(f"  {prefix}{error}" for error in self.errors)
        return "\n".join(lines)

    def with_source(self, source: str) -> ConfigError:
        """The same errors attributed to ``source`` (used when a loader knows the file name)."""
        return ConfigError(self.errors, source=source, summary=self.summary)
