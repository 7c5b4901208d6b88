"""Pure: a state schema (TypedDict, pydantic model, dataclass) -> channels, keys, coercion.

``Annotated[T, reducer]`` gives a reducer channel; ``Annotated[T, SomeChannel]``
uses that channel; ``Annotated[T, SomeManagedValue]`` (``RemainingSteps``...) is a
managed value, computed per task and given no channel; anything else is a
``LastValue``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, get_args, get_origin, get_type_hints

import typing_extensions

from engine._internal._fields import annotated_keys, is_pydantic_model
from engine.channels.base import BaseChannel
from engine.channels.binop import BinaryOperatorAggregate
from engine.channels.delta import DeltaChannel
from engine.channels.last_value import LastValue
from engine.errors import (
    ErrorCode,
    GraphValidationError,
    InvalidUpdateError,
    error_message,
)
from engine.managed.base import ManagedValueMapping, ManagedValueSpec, is_managed_value

__all__ = ("SchemaInfo", "channels_for_schema", "schema_info")


class SchemaInfo:
    """What the graph needs to know about one schema class.

    ``keys`` are the keys with a channel; managed values are in ``managed`` only.
    """

    __slots__ = ("channels", "keys", "kind", "managed", "schema", "types")

    def __init__(
        self,
        schema: type[Any],
        kind: str,
        keys: tuple[str, ...],
        channels: dict[str, BaseChannel[Any, Any, Any]],
        managed: ManagedValueMapping | None = None,
        types: dict[str, Any] | None = None,
    ) -> None:
        self.schema = schema
        self.kind = kind
        self.keys = keys
        self.channels = channels
        self.managed: ManagedValueMapping = managed or {}
        self.types: dict[str, Any] = types or {}
        """Each key's declared type (``list[str]`` for ``Annotated[list[str], add]``),
        for JSON Schemas: a reducer channel keeps only what it builds (``list``)."""


def _hints(schema: type[Any]) -> dict[str, Any]:
    try:
        return get_type_hints(schema, include_extras=True)
    except Exception:
        hints: dict[str, Any] = {}
        for base in reversed(getattr(schema, "__mro__", (schema,))):
            hints.update(getattr(base, "__annotations__", {}) or {})
        return hints


_WRAPPERS = {
    typing.Required,
    typing.NotRequired,
    typing_extensions.Required,
    typing_extensions.NotRequired,
    typing_extensions.ReadOnly,
}


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """The annotated type and its ``Annotated`` metadata (Required... removed)."""
    base = annotation
    while get_origin(base) in _WRAPPERS:
        base = get_args(base)[0]
    if hasattr(base, "__metadata__"):
        return get_args(base)[0], tuple(base.__metadata__)
    return base, ()


def _managed_for(annotation: Any) -> ManagedValueSpec | None:
    _, metadata = _unwrap(annotation)
    for item in reversed(metadata):
        if is_managed_value(item):
            return item
    return None


def _channel_for(
    key: str, annotation: Any, schema: type[Any]
) -> BaseChannel[Any, Any, Any]:
    base, metadata = _unwrap(annotation)
    for item in reversed(metadata):
        if isinstance(item, DeltaChannel):
            return item.with_type(base, key=key)  # its type comes from the field
        if isinstance(item, BaseChannel):
            item.key = key
            return item
        if isinstance(item, type) and issubclass(item, BaseChannel):
            return item(base, key=key)
        if callable(item) and not isinstance(item, type):
            _check_reducer(key, item, schema)
            return BinaryOperatorAggregate(base, item, key=key)
    return LastValue(base, key=key)


def _check_reducer(key: str, reducer: Callable[..., Any], schema: type[Any]) -> None:
    import inspect  # noqa: PLC0415 - compile-time only

    try:
        params = [
            p
            for p in inspect.signature(reducer).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return
    if len(params) < 2 and not any(
        p.kind == p.VAR_POSITIONAL
        for p in inspect.signature(reducer).parameters.values()
    ):
        raise GraphValidationError(
            error_message(
                f"Reducer for key {key!r} of {schema.__name__} must take two arguments "
                "(current, update); got "
                f"{getattr(reducer, '__name__', reducer)!r} with {len(params)}.",
                ErrorCode.INVALID_GRAPH,
            )
        )


def _pydantic_annotation(field: Any) -> Any:
    annotation = field.annotation
    if field.metadata:
        return typing.Annotated[(annotation, *field.metadata)]
    return annotation


def schema_info(schema: type[Any]) -> SchemaInfo:
    """Keys, channels and managed values of a state schema."""
    if schema is dict or schema is Any:
        return SchemaInfo(schema, "dict", (), {})
    if is_pydantic_model(schema):
        annotations = {
            name: _pydantic_annotation(field)
            for name, field in schema.model_fields.items()
        }
        return _split(schema, "pydantic", annotations)
    hints = _hints(schema)
    if dataclasses.is_dataclass(schema):
        keys = tuple(f.name for f in dataclasses.fields(schema))
        kind = "dataclass"
    elif isinstance(schema, type) and typing.is_typeddict(schema):
        keys = tuple(hints)
        kind = "typeddict"
    else:
        keys = annotated_keys(schema) if isinstance(schema, type) else ()
        kind = "class"
    if not keys and kind != "typeddict":
        raise GraphValidationError(
            error_message(
                f"Cannot use {schema!r} as a state schema: use a TypedDict, a pydantic "
                "model or a dataclass with annotated fields.",
                ErrorCode.INVALID_GRAPH,
            )
        )
    return _split(schema, kind, {key: hints.get(key, Any) for key in keys})


def _split(schema: type[Any], kind: str, annotations: dict[str, Any]) -> SchemaInfo:
    managed: ManagedValueMapping = {}
    channels: dict[str, BaseChannel[Any, Any, Any]] = {}
    types: dict[str, Any] = {}
    for key, annotation in annotations.items():
        if (spec := _managed_for(annotation)) is not None:
            managed[key] = spec
        else:
            channels[key] = _channel_for(key, annotation, schema)
            types[key] = _unwrap(annotation)[0]
    return SchemaInfo(schema, kind, tuple(channels), channels, managed, types)


def channels_for_schema(schema: type[Any]) -> dict[str, BaseChannel[Any, Any, Any]]:
    return schema_info(schema).channels


def coerce_input(info: SchemaInfo, value: Any, where: str) -> list[tuple[str, Any]]:
    """A node's or run's input/update as ``(key, value)`` pairs, validated for pydantic.

    Raises:
        InvalidUpdateError: a value that is not a dict or an object with fields.
        StateValidationError: values a pydantic schema refuses, naming ``where``
            (the node or "input") and the field; it is pydantic's
            ``ValidationError`` (as LangGraph raises) and an ``InvalidUpdateError``.
    """
    from engine._internal._fields import object_update_items  # noqa: PLC0415

    if isinstance(value, dict):
        if info.kind == "pydantic":
            return _validate_pydantic(info, value, where)
        return list(value.items())
    items = object_update_items(value)
    if items is None:
        raise InvalidUpdateError(
            error_message(
                f"Expected dict for {where}, got {value!r}",
                ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
            )
        )
    return items


def _validate_pydantic(
    info: SchemaInfo, value: dict[str, Any], where: str
) -> list[tuple[str, Any]]:
    schema = info.schema
    try:
        from pydantic import ValidationError  # noqa: PLC0415
    except ImportError:  # pragma: no cover - pydantic states need pydantic
        return list(value.items())
    unknown = [k for k in value if k not in schema.model_fields]
    if unknown:
        return list(value.items())  # reported by the caller with the node name
    try:
        validated = schema.model_validate(value)
    except ValidationError as exc:
        from engine.graph._validation import state_validation_error  # noqa: PLC0415

        raise state_validation_error(exc, schema, where) from None
    except Exception:
        return list(value.items())
    return [(k, getattr(validated, k)) for k in value]


def make_mapper(info: SchemaInfo) -> Callable[[dict[str, Any]], Any] | None:
    """How channel values become a node's input object (None: a plain dict)."""
    schema = info.schema
    if info.kind == "pydantic":

        def to_model(values: dict[str, Any]) -> Any:
            return schema.model_validate(values)

        return to_model
    if info.kind == "dataclass":

        def to_dataclass(values: dict[str, Any]) -> Any:
            return schema(**values)

        return to_dataclass
    return None
