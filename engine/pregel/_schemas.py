"""A compiled graph's input, output, context and config as pydantic models and JSON Schemas.

What ``get_input_jsonschema()`` and its siblings return, built as LangGraph
builds them (so tools that read a graph's schemas see the same documents).
pydantic is imported only when a schema is asked for, never on a run's path.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.channels.base import BaseChannel

if TYPE_CHECKING:
    from pydantic import BaseModel

    from engine.graph._schema import SchemaInfo
    from engine.pregel.main import Pregel

__all__ = (
    "config_model",
    "context_jsonschema",
    "graph_name",
    "input_model",
    "input_type",
    "output_model",
    "output_type",
    "state_jsonschema",
)

_CONFIG_FIELDS: dict[str, Any] = {
    "tags": list[str],
    "metadata": dict[str, Any],
    "callbacks": Any,
    "run_name": str,
    "max_concurrency": int | None,
    "recursion_limit": int,
    "configurable": dict[str, Any],
    "run_id": uuid.UUID | None,
}
"""The keys of a run's config, with their types (``config_schema(include=...)``)."""


def graph_name(
    graph: Pregel, suffix: str | None = None, name: str | None = None
) -> str:
    """``LangGraphInput`` for a capitalized name, ``purchase_input`` otherwise."""
    name = name or graph.name or type(graph).__name__
    if not suffix:
        return name
    if name[:1].isupper():
        return name + suffix.title()
    return f"{name}_{suffix.lower()}"


def input_type(graph: Pregel) -> Any:
    """What one input channel accepts (None when the input is several channels)."""
    if isinstance(graph.input_channels, str):
        return graph.channels[graph.input_channels].UpdateType
    return None


def output_type(graph: Pregel) -> Any:
    """What one output channel holds (None when the output is several channels)."""
    if isinstance(graph.output_channels, str):
        return graph.channels[graph.output_channels].ValueType
    return None


def _root_model(name: str, root: Any) -> type[BaseModel]:
    from pydantic import BaseModel, RootModel  # noqa: PLC0415

    if isinstance(root, type) and issubclass(root, BaseModel):
        return root
    return type(name, (RootModel[root],), {"__module__": __name__})


def _fields_model(name: str, fields: dict[str, tuple[Any, Any]]) -> type[BaseModel]:
    from pydantic import create_model  # noqa: PLC0415

    model: type[BaseModel] = create_model(name, **fields)  # type: ignore[call-overload]
    return model


def input_model(graph: Pregel) -> type[BaseModel]:
    """The input as a pydantic model: the input type, or one optional field per channel."""
    name = graph_name(graph, "Input")
    if isinstance(graph.input_channels, str):
        return _root_model(name, input_type(graph))
    keys = graph.input_channels or list(graph.channels)
    return _fields_model(
        name, {key: (graph.channels[key].UpdateType, None) for key in keys}
    )


def output_model(
    graph: Pregel, types: Mapping[str, Any] | None = None
) -> type[BaseModel]:
    """The output as a pydantic model: the output type, or one optional field per channel.

    ``types`` gives keys' declared types where a channel knows less.
    """
    name = graph_name(graph, "Output")
    if isinstance(graph.output_channels, str):
        return _root_model(name, output_type(graph))
    declared = types or {}
    return _fields_model(
        name,
        {
            key: (declared.get(key, graph.channels[key].ValueType), None)
            for key in graph.output_channels
        },
    )


def context_jsonschema(schema: type[Any] | None) -> dict[str, Any] | None:
    """JSON Schema of a context schema (pydantic model, TypedDict or dataclass).

    Raises:
        ValueError: a context schema of another kind.
    """
    if schema is None:
        return None
    from pydantic import BaseModel, TypeAdapter  # noqa: PLC0415

    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if typing.is_typeddict(schema) or dataclasses.is_dataclass(schema):
        return TypeAdapter(schema).json_schema()
    raise ValueError(
        f"Invalid context schema type: {schema}. Must be a BaseModel, TypedDict or "
        "dataclass."
    )


def config_model(graph: Pregel, include: Sequence[str] | None) -> type[BaseModel]:
    """The run config as a pydantic model: ``configurable`` is the context schema."""
    fields: dict[str, tuple[Any, Any]] = {}
    if graph.context_schema is not None:
        fields["configurable"] = (graph.context_schema, None)
    for key in include or ():
        if key != "configurable" and key in _CONFIG_FIELDS:
            fields[key] = (_CONFIG_FIELDS[key], None)
    return _fields_model(graph_name(graph, "Config"), fields)


def state_jsonschema(
    info: SchemaInfo,
    channels: dict[str, BaseChannel[Any, Any, Any]],
    name: str,
) -> dict[str, Any]:
    """JSON Schema of a StateGraph's input or output schema.

    A pydantic model and a TypedDict give their own schema; a dataclass (or an
    annotated class) one field per state key, with its default.
    """
    from pydantic import BaseModel, TypeAdapter  # noqa: PLC0415

    schema = info.schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if typing.is_typeddict(schema):
        return TypeAdapter(schema).json_schema()
    if info.kind == "dict":
        return _root_model(name, dict[str, Any]).model_json_schema()
    fields = {
        key: (
            info.types.get(key, channels[key].UpdateType),
            _field_default(schema, key),
        )
        for key in info.keys
        if isinstance(channels.get(key), BaseChannel)
    }
    return _fields_model(name, fields).model_json_schema()


def _field_default(schema: type[Any], key: str) -> Any:
    """A field's default for a JSON Schema (``...``: required)."""
    if dataclasses.is_dataclass(schema):
        for item in dataclasses.fields(schema):
            if item.name != key:
                continue
            if item.default is not dataclasses.MISSING:
                return item.default
            if item.default_factory is not dataclasses.MISSING:
                return item.default_factory()
    hint = typing.get_type_hints(schema).get(key)
    if type(None) in typing.get_args(hint):
        return None
    return ...
