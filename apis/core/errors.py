"""Errors raised while reading Kubernetes objects.

Both are ``ValueError``: they report bad *input* (a user's YAML, an API object), never a bug.

- :class:`QuantityError`: a string is not a valid ``resource.Quantity``.
- :class:`ParseError`: a raw object could not be turned into a core type. It names the object's kind,
  its ``namespace/name`` and the exact JSON field path, so an operator can find the offending value.
"""

from __future__ import annotations

import json


class QuantityError(ValueError):
    """``text`` is not a Kubernetes quantity; ``reason`` says why (e.g. ``unknown suffix "x"``)."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid quantity {quote(text)}: {reason}")
        self.text = text
        self.reason = reason


class ParseError(ValueError):
    """A raw Kubernetes object that cannot be parsed.

    ``kind`` and ``name`` (``namespace/name``, or just ``name`` for cluster-scoped objects) identify the
    object; both are empty when a fragment (a selector, a toleration list) was parsed on its own.
    ``field`` is the JSON path relative to the object root, e.g.
    ``spec.containers[0].resources.requests.cpu``; map keys that are not plain identifiers are written
    in brackets (``metadata.labels[app.kubernetes.io/name]``).

    ``str()`` gives ``Pod default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity
    "12x": unknown suffix "x"``.
    """

    def __init__(self, kind: str, name: str, *, field: str, message: str) -> None:
        self.kind = kind
        self.name = name
        self.field = field
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.kind or self.name:
            parts.append(f"{self.kind} {self.name}".strip())
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_parse_error, (self.kind, self.name, self.field, self.message))

    def under(self, prefix: str) -> ParseError:
        """The same error with ``prefix`` prepended to its field path (``spec`` + ``x`` -> ``spec.x``)."""
        return ParseError(self.kind, self.name, field=join_path(prefix, self.field), message=self.message)

    def for_object(self, kind: str, name: str) -> ParseError:
        """The same error attributed to the object ``kind`` ``name``."""
        return ParseError(kind, name, field=self.field, message=self.message)


def _rebuild_parse_error(kind: str, name: str, field: str, message: str) -> ParseError:
    return ParseError(kind, name, field=field, message=message)


def join_path(prefix: str, path: str) -> str:
    """Join two JSON path fragments: ``join_path("spec", "containers[0]")`` -> ``spec.containers[0]``."""
    if not prefix:
        return path
    if not path:
        return prefix
    if path[0] == "[":
        return prefix + path
    return f"{prefix}.{path}"


def quote(text: str) -> str:
    """``text`` in double quotes with JSON escapes, like Go's ``%q`` for the strings we report."""
    return json.dumps(text, ensure_ascii=False)
