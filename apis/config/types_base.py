"""The base model of every configuration model (kept apart so that sibling modules can share it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """Base for configuration models: camelCase aliases, unknown fields rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        validate_default=False,
    )
