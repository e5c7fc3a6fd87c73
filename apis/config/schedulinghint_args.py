"""``SchedulingHintArgs`` (Koordinator ``pkg/scheduler/apis/config``): defaults and validation."""

from __future__ import annotations

from apis.config.args_base import ArgsModel
from apis.config.errors import FieldError, invalid, join_path

DEFAULT_MAX_HINT_NODES = 100


class SchedulingHintArgs(ArgsModel):
    max_hint_nodes: int = DEFAULT_MAX_HINT_NODES
    """At most this many of a hint's ``preferredNodeNames`` are tried (the rest are dropped)."""

    def field_errors(self, path: str) -> list[FieldError]:
        if self.max_hint_nodes <= 0:
            return [invalid(join_path(path, "maxHintNodes"), self.max_hint_nodes, "must be a positive value")]
        return []
