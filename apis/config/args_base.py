"""The base class every plugin args model derives from (in-tree and out-of-tree alike)."""

from __future__ import annotations

from apis.config.errors import FieldError
from apis.config.types import ConfigModel


class ArgsModel(ConfigModel):
    """A ``<Plugin>Args`` model: camelCase on the wire, unknown fields rejected, frozen.

    Defaulting happens while decoding (field defaults and ``mode="after"`` validators), so a decoded
    instance is already defaulted. Semantic checks go in :meth:`field_errors`, which must return every
    problem rather than raise, with paths built under ``path`` (e.g.
    ``profiles[0].pluginConfig[1].args``).
    """

    def field_errors(self, path: str) -> list[FieldError]:
        return []
