"""Decode raw mappings into pydantic models, turning pydantic's errors into :class:`FieldError`\\ s.

Paths use the wire (camelCase) names and k8s path syntax: ``profiles[0].plugins.filter``, map keys as
``usageThresholds[cpu]``. An unknown field gets a "did you mean" hint when a known one is close.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from apis.config.errors import FieldError, invalid, join_path, required, unknown_field

ModelT = TypeVar("ModelT", bound=BaseModel)


def decode_model(model: type[ModelT], data: object, *, path: str = "") -> tuple[ModelT | None, list[FieldError]]:
    """Validate ``data`` as ``model`` by wire names only (snake_case keys are unknown fields).

    Returns ``(instance, [])`` or ``(None, errors)``; never raises for bad input.
    """
    try:
        return model.model_validate(data, by_alias=True, by_name=False), []
    except ValidationError as exc:
        return None, pydantic_field_errors(exc, model, path=path)


def pydantic_field_errors(exc: ValidationError, model: type[BaseModel], *, path: str = "") -> list[FieldError]:
    """One :class:`FieldError` per pydantic error, with paths prefixed by ``path``."""
    return [_convert(error, model, path) for error in exc.errors(include_url=False)]


def _convert(error: ErrorDetails, model: type[BaseModel], prefix: str) -> FieldError:
    path, parent = _render_loc(error["loc"], model, prefix)
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return required(path)
    if kind == "extra_forbidden":
        name = str(error["loc"][-1]) if error["loc"] else ""
        return unknown_field(path, _suggest(name, parent))
    if kind == "value_error":
        ctx = error.get("ctx") or {}
        return invalid(path, value, str(ctx.get("error", error["msg"])))
    message = error["msg"]
    return invalid(path, value, message[:1].lower() + message[1:])


def _render_loc(loc: tuple[int | str, ...], model: type[BaseModel], prefix: str) -> tuple[str, type[BaseModel] | None]:
    """Render ``loc`` and return the model that owns the last element (for unknown-field hints)."""
    path = prefix
    current: Any = model
    owner: type[BaseModel] | None = None
    for element in loc:
        current = _unwrap_optional(current)
        if isinstance(element, int):
            path = join_path(path, element)
            current = _item_type(current)
        elif _is_model(current):
            owner = current
            path = join_path(path, element)
            current = _field_annotation(current, element)
        elif _origin(current) in (dict, Mapping):
            path = f"{path}[{element}]"
            args = typing.get_args(current)
            current = args[1] if len(args) == 2 else None
        else:
            path = join_path(path, element)
            current = None
    return path, owner


def _suggest(name: str, owner: type[BaseModel] | None) -> str:
    if owner is None:
        return ""
    wire_names = {field.alias or attr: attr for attr, field in owner.model_fields.items()}
    for wire, attr in wire_names.items():
        if name == attr and wire != attr:
            return f'field names are camelCase: use "{wire}"'
    close = difflib.get_close_matches(name, list(wire_names), n=1, cutoff=0.6)
    if close:
        return f'did you mean "{close[0]}"?'
    return f"known fields: {', '.join(sorted(wire_names))}"


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _origin(annotation: Any) -> Any:
    return typing.get_origin(annotation)


def _unwrap_optional(annotation: Any) -> Any:
    while _origin(annotation) in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            return None
        annotation = members[0]
    if _origin(annotation) is typing.Annotated:
        return _unwrap_optional(typing.get_args(annotation)[0])
    return annotation


def _item_type(annotation: Any) -> Any:
    args = typing.get_args(annotation)
    return args[0] if args else None


def _field_annotation(model: type[BaseModel], element: str) -> Any:
    for attr, field in model.model_fields.items():
        if element in (field.alias, attr):
            return field.annotation
    return None
