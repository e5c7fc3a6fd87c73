"""What the API layer lists and watches, typed: a watch event's type and :class:`ObjectKind` ``[T]``.

An ``ObjectKind[T]`` names a kind (group, version, plural) and carries the parser that turns one raw
JSON object into a ``T``; a handler of that kind receives ``T`` values (``old``/``new``), so mypy checks
a watch handler against the kind it watches. Both binaries describe the kinds they watch with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class EventType(StrEnum):
    """A watch event's type, as the API server names it."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class ObjectKind(Generic[T]):
    """A kind to list and watch (Reservation, NodeMetric...), delivered as ``T`` values.

    ``parse`` turns the raw JSON object into the typed object and raises ``ValueError`` (e.g.
    ``apis.core.errors.ParseError`` or a pydantic ``ValidationError``) for a bad one, which is then
    reported and skipped. The same parser reads ``simulate`` cluster files.
    """

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    parse: Callable[[Mapping[str, Any]], T]
    optional: bool = False
    """The scheduler starts without waiting for the first list (the CRD may not be installed yet; the
    watch keeps retrying in the background)."""
    namespace: str = ""
    """On the API server, watch this namespace only (and need RBAC there only); empty: every namespace.
    Sources without a server (``simulate`` files) deliver every object of the kind."""
    field_selector: str = ""
    """On the API server, a field selector for the list and watch (``metadata.name=...``)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


Handler = Callable[[EventType, T | None, T | None], None]
"""``handler(event_type, old, new)`` for an ``ObjectKind[T]`` (old None on ADDED, new None on DELETED)."""

ObjectHandler = Callable[[EventType, Any, Any], None]
"""A handler of any kind (``Handler[Any]``)."""
