"""ValidationNode: check the tool calls of the latest AI message against schemas.

It does not run tools: each call's arguments are validated against the schema of
the same name, and answered with a tool message holding the validated arguments
as JSON, or the validation error (marked ``additional_kwargs={"is_error":
True}``) so that the model can be asked again. Useful for extraction, where the
"tool call" is the answer.

Deprecated in LangGraph 1.0 (LangChain's ``create_agent`` with tool error
handling replaces it); kept for programs written against ``langgraph.prebuilt``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ValidationError
from typing_extensions import deprecated

from engine.prebuilt._chat import is_ai, langchain_messages, tool_calls
from engine.prebuilt.tools import Tool, as_tool
from engine.warnings import LangGraphDeprecatedSinceV10

__all__ = ("ValidationNode",)


def _default_format_error(
    error: BaseException, call: dict[str, Any], schema: Any
) -> str:
    return f"{error!r}\n\nRespond after fixing all validation errors."


def _schema_of_tool(tool: Any) -> type[BaseModel]:
    schema = getattr(tool, "args_schema", None)
    if schema is None:
        raise ValueError(f"Tool {tool.name} does not have an args_schema defined.")
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ValueError(
            "Validation node only works with tools that have a pydantic BaseModel "
            f"args_schema. Got {tool.name} with args_schema: {schema}."
        )
    return schema


@deprecated(
    "ValidationNode is deprecated. Please use `create_agent` (engine.agents) with "
    "custom tool error handling.",
    category=LangGraphDeprecatedSinceV10,
)
class ValidationNode:
    """A node that validates (never runs) the tool calls of the last AI message.

    Args:
        schemas: pydantic model classes (called by their class name), tools with
            a pydantic ``args_schema``, or functions (their signature is the
            schema).
        format_error: ``(error, call, schema) -> str``, the content of the error
            answer (default: the error's repr and "Respond after fixing all
            validation errors.").
        name: the node's name.
        tags: the node's tags.

    Input: a list of messages or a state with ``messages``; the last message must
    be an AI message. Output: the tool messages (a list, or ``{"messages":
    [...]}`` for a state).

    Raises:
        ValueError: an unsupported schema, no messages, or a last message that is
            not an AI message.
    """

    def __init__(
        self,
        schemas: Sequence[Any],
        *,
        format_error: Callable[[BaseException, dict[str, Any], Any], str] | None = None,
        name: str = "validation",
        tags: list[str] | None = None,
    ) -> None:
        self.name = name
        self.__name__ = name
        self.tags = list(tags or ())
        self._format_error = format_error or _default_format_error
        self.schemas_by_name: dict[str, type[BaseModel]] = {}
        for schema in schemas:
            if isinstance(schema, type) and issubclass(schema, BaseModel):
                self.schemas_by_name[schema.__name__] = schema
            elif isinstance(schema, Tool):
                if schema.args_model is None:
                    raise ValueError(
                        f"Tool {schema.name} does not have an args_schema defined."
                    )
                self.schemas_by_name[schema.name] = schema.args_model
            elif isinstance(getattr(schema, "name", None), str) and callable(
                getattr(schema, "invoke", None)
            ):
                self.schemas_by_name[schema.name] = _schema_of_tool(schema)
            elif callable(schema):
                converted = as_tool(schema)
                self.schemas_by_name[converted.name] = converted.args_model
            else:
                raise ValueError(
                    "Unsupported input to ValidationNode. Expected BaseModel, tool or "
                    f"function. Got: {type(schema)}."
                )

    def _last_ai(self, input: Any) -> tuple[str, Any]:
        if isinstance(input, list):
            output_type, messages = "list", input
        elif isinstance(input, dict) and input.get("messages"):
            output_type, messages = "dict", input["messages"]
        elif not isinstance(input, dict) and getattr(input, "messages", None):
            output_type, messages = "dict", input.messages
        else:
            raise ValueError("No message found in input")
        message = messages[-1]
        if not is_ai(message):
            raise ValueError("Last message is not an AIMessage")
        return output_type, message

    def _answer(self, call: dict[str, Any], lc: bool) -> Any:
        schema = self.schemas_by_name[call["name"]]
        error = False
        try:
            content = schema.model_validate(call.get("args") or {}).model_dump_json()
        except ValidationError as exc:
            content, error = self._format_error(exc, call, schema), True
        extra = {"additional_kwargs": {"is_error": True}} if error else {}
        messages = langchain_messages()
        if lc and messages is not None:
            return messages.ToolMessage(
                content=content, name=call["name"], tool_call_id=call["id"], **extra
            )
        return {
            "role": "tool",
            "content": content,
            "name": call["name"],
            "tool_call_id": call["id"],
            **extra,
        }

    def _output(self, output_type: str, answers: list[Any]) -> Any:
        return answers if output_type == "list" else {"messages": answers}

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Validate each tool call of the last AI message (in parallel)."""
        output_type, message = self._last_ai(input)
        lc = not isinstance(message, dict)
        calls = tool_calls(message)
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(calls)))) as pool:
            answers = list(pool.map(lambda call: self._answer(call, lc), calls))
        return self._output(output_type, answers)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        return await asyncio.to_thread(self.invoke, input, config)

    def __call__(self, state: Any) -> Any:
        return self.invoke(state)
