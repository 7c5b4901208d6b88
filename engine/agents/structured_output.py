"""Structured answers for :func:`engine.agents.create_agent` (``response_format``).

Two ways to get an answer in a schema, as in LangChain 1.x:

- :class:`ToolStrategy`: the schema is offered to the model as a tool (one per
  member of a ``Union``) and tool use is required; the call that answers is
  parsed into ``structured_response`` and answered with a tool message. A call
  that does not fit the schema (or two answers at once) is answered with an error
  message and the model is asked again, as ``handle_errors`` decides.
- :class:`ProviderStrategy`: the model is asked for JSON in the schema (OpenAI's
  ``response_format={"type": "json_schema", ...}``) and its text answer is parsed.
  A LangChain model gets it bound with ``bind_tools(..., strict=True,
  response_format=...)``; any other model receives ``response_format=...`` as a
  keyword argument.

A bare schema means :class:`AutoStrategy`: the provider strategy when the model
says it supports structured output (a LangChain model's profile, or a
``supports_structured_output = True`` attribute), the tool strategy otherwise.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, get_args, get_origin

from engine.prebuilt._chat import text_of
from engine.prebuilt._structured import (
    parse_json_text,
    parse_structured,
    schema_description,
    schema_json,
    schema_name,
)
from engine.prebuilt.tools import Tool

__all__ = (
    "AutoStrategy",
    "MultipleStructuredOutputsError",
    "OutputToolBinding",
    "ProviderStrategy",
    "ProviderStrategyBinding",
    "ResponseFormat",
    "StructuredOutputError",
    "StructuredOutputValidationError",
    "ToolStrategy",
)

SchemaT = TypeVar("SchemaT")

STRUCTURED_OUTPUT_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."


class StructuredOutputError(Exception):
    """The model's structured answer could not be used."""

    def __init__(self, message: str, ai_message: Any = None) -> None:
        super().__init__(message)
        self.ai_message = ai_message


class MultipleStructuredOutputsError(StructuredOutputError):
    """The model called several structured output tools where one was expected."""

    def __init__(self, tool_names: list[str], ai_message: Any = None) -> None:
        self.tool_names = tool_names
        super().__init__(
            "Model incorrectly returned multiple structured responses "
            f"({', '.join(tool_names)}) when only one is expected.",
            ai_message,
        )


class StructuredOutputValidationError(StructuredOutputError):
    """The model's structured answer does not fit the schema."""

    def __init__(
        self, tool_name: str, source: Exception, ai_message: Any = None
    ) -> None:
        self.tool_name = tool_name
        self.source = source
        super().__init__(
            f"Failed to parse structured output for tool '{tool_name}': {source}.",
            ai_message,
        )


def _members(schema: Any) -> list[Any]:
    if get_origin(schema) in (typing.Union, types.UnionType):
        return list(get_args(schema))
    return [schema]


@dataclass(frozen=True)
class _SchemaSpec:
    schema: Any
    name: str
    description: str
    json_schema: dict[str, Any]
    strict: bool | None = None

    @classmethod
    def of(cls, schema: Any, strict: bool | None = None) -> _SchemaSpec:
        return cls(
            schema,
            schema_name(schema),
            schema_description(schema),
            schema_json(schema),
            strict,
        )


@dataclass(init=False)
class ToolStrategy(Generic[SchemaT]):
    """Get the structured answer as a tool call.

    Args:
        schema: a pydantic model, dataclass, TypedDict, JSON Schema dict, or a
            ``Union`` of them (one tool each).
        tool_message_content: the content of the tool message answering the
            call (default: "Returning structured response: <answer>").
        handle_errors: what happens when the answer does not fit: ``True``
            (default) answers the error and asks again; ``False`` raises; a string
            is the answer; exception types answer those only; a function
            ``(exception) -> str`` writes the answer.
    """

    schema: Any
    schema_specs: list[_SchemaSpec]
    tool_message_content: str | None
    handle_errors: (
        bool
        | str
        | type[Exception]
        | tuple[type[Exception], ...]
        | Callable[[Exception], str]
    )

    def __init__(
        self,
        schema: Any,
        *,
        tool_message_content: str | None = None,
        handle_errors: bool
        | str
        | type[Exception]
        | tuple[type[Exception], ...]
        | Callable[[Exception], str] = True,
    ) -> None:
        self.schema = schema
        self.schema_specs = [_SchemaSpec.of(member) for member in _members(schema)]
        self.tool_message_content = tool_message_content
        self.handle_errors = handle_errors


@dataclass(init=False)
class ProviderStrategy(Generic[SchemaT]):
    """Get the structured answer as the model's JSON text (the provider's native
    structured output).

    Args:
        schema: a pydantic model, dataclass, TypedDict or JSON Schema dict.
        strict: ask the provider to follow the schema strictly (``None``: its
            default).
    """

    schema: Any
    schema_spec: _SchemaSpec

    def __init__(self, schema: Any, *, strict: bool | None = None) -> None:
        self.schema = schema
        self.schema_spec = _SchemaSpec.of(schema, strict)

    def to_model_kwargs(self) -> dict[str, Any]:
        """The ``response_format`` option given to the model."""
        json_schema: dict[str, Any] = {
            "name": self.schema_spec.name,
            "schema": self.schema_spec.json_schema,
        }
        if self.schema_spec.strict is not None:
            json_schema["strict"] = self.schema_spec.strict
        return {"response_format": {"type": "json_schema", "json_schema": json_schema}}


@dataclass
class AutoStrategy(Generic[SchemaT]):
    """A bare schema: the provider strategy if the model supports it, else tools."""

    schema: Any


ResponseFormat = ToolStrategy[Any] | ProviderStrategy[Any] | AutoStrategy[Any]
"""A structured output strategy."""


def _unused(**kwargs: Any) -> str:
    raise RuntimeError("A structured output tool is answered by the agent, not run.")


@dataclass
class OutputToolBinding(Generic[SchemaT]):
    """One schema offered as a tool, and how to parse the call's arguments."""

    schema: Any
    tool: Tool

    @classmethod
    def from_schema_spec(cls, spec: _SchemaSpec) -> OutputToolBinding[Any]:
        schema = spec.schema
        lc_schema = schema if isinstance(schema, (dict, type)) else None
        tool = Tool(
            name=spec.name,
            description=spec.description or f"Answer in the {spec.name} format.",
            func=_unused,
            parameters=spec.json_schema,
            lc_tool=lc_schema,
        )
        return cls(schema=schema, tool=tool)

    def parse(self, args: dict[str, Any]) -> Any:
        return parse_structured(self.schema, args)


@dataclass
class ProviderStrategyBinding(Generic[SchemaT]):
    """Parses a model's JSON text answer into the schema."""

    schema: Any
    spec: _SchemaSpec = field(repr=False)

    @classmethod
    def from_schema_spec(cls, spec: _SchemaSpec) -> ProviderStrategyBinding[Any]:
        return cls(schema=spec.schema, spec=spec)

    def parse(self, message: Any) -> Any:
        return parse_structured(self.schema, parse_json_text(text_of(message)))


def _error_answer(exception: Exception, strategy: ToolStrategy[Any]) -> str | None:
    """The tool message content answering a bad structured answer, or ``None``
    when the strategy says to raise."""
    flag = strategy.handle_errors
    default = STRUCTURED_OUTPUT_ERROR_TEMPLATE.format(error=str(exception))
    if flag is True:
        return default
    if flag is False:
        return None
    if isinstance(flag, str):
        return flag
    if isinstance(flag, type) and issubclass(flag, Exception):
        return default if isinstance(exception, flag) else None
    if isinstance(flag, tuple):
        return default if isinstance(exception, flag) else None
    return str(flag(exception))  # type: ignore[call-arg]
