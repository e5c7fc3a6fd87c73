"""The selector types the DeschedulerConfiguration and its plugins' args share: ``metav1.LabelSelector``
and the descheduler's ``Namespaces`` (``include``/``exclude``)."""

from __future__ import annotations

from apis.config.types_base import ConfigModel

__all__ = ["LabelSelector", "LabelSelectorRequirement", "Namespaces"]


class LabelSelectorRequirement(ConfigModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(ConfigModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Namespaces(ConfigModel):
    include: list[str] | None = None
    exclude: list[str] | None = None
