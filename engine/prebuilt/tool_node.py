"""ToolNode: run the tool calls of the last assistant message; tools_condition: route to it.

Tools may ask for the graph state, the store or a :class:`ToolRuntime` with
``InjectedState`` / ``InjectedStore`` annotations (see ``_injected``); the ToolNode
fills those arguments in and the model never sees them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from engine._internal._constants import END
from engine.prebuilt._injected import (
    InjectedState,
    InjectedStore,
    ToolRuntime,
    injected_values,
)
from engine.prebuilt.tools import Tool, as_tool

__all__ = (
    "InjectedState",
    "InjectedStore",
    "ToolNode",
    "ToolRuntime",
    "tools_condition",
)


def _messages(state: Any, key: str) -> list[Any]:
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        return list(state.get(key) or [])
    return list(getattr(state, key, None) or [])


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    calls = (
        message.get("tool_calls")
        if isinstance(message, dict)
        else getattr(message, "tool_calls", None)
    )
    return [dict(c) for c in calls or []]


def _content(result: Any) -> str:
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, default=str)
    except TypeError:
        return str(result)


class ToolNode:
    """A graph node that executes tool calls (in parallel) and returns tool messages.

    Args:
        tools: functions or :class:`~engine.prebuilt.tools.Tool` objects.
        name: the node's name (default ``"tools"``).
        handle_tool_errors: when True (default) a failing tool returns an error
            message to the model instead of failing the run.
        messages_key: the state key holding the conversation.
    """

    name: str
    """The node's name."""
    tools_by_name: dict[str, Tool]
    """The tools this node runs, by the name the model calls them."""

    def __init__(
        self,
        tools: Sequence[Any],
        *,
        name: str = "tools",
        handle_tool_errors: bool = True,
        messages_key: str = "messages",
    ) -> None:
        self.tools_by_name: dict[str, Tool] = {t.name: t for t in map(as_tool, tools)}
        self.name = name
        self.__name__ = name
        self.handle_tool_errors = handle_tool_errors
        self.messages_key = messages_key

    def _pending(self, state: Any) -> list[dict[str, Any]]:
        messages = _messages(state, self.messages_key)
        if not messages:
            raise ValueError(f"No messages found in input under {self.messages_key!r}")
        return _tool_calls(messages[-1])

    def _message(
        self, call: dict[str, Any], content: str, status: str = "success"
    ) -> dict[str, Any]:
        return {
            "role": "tool",
            "content": content,
            "tool_call_id": call.get("id"),
            "name": call.get("name"),
            "status": status,
        }

    def _arguments(self, call: dict[str, Any], state: Any) -> dict[str, Any]:
        """The call's arguments plus what the tool asks to be injected.

        Runs in the node's own thread, where the run's store and config are known.
        """
        args = dict(call.get("args") or {})
        tool = self.tools_by_name.get(call.get("name", ""))
        if tool is not None and tool.injected:
            tools = list(self.tools_by_name.values())
            args.update(injected_values(tool.injected, state, call, tools))
        return args

    def _unknown(self, call: dict[str, Any]) -> dict[str, Any]:
        return self._message(
            call,
            f"Error: {call.get('name')!r} is not a valid tool, try one of "
            f"[{', '.join(sorted(self.tools_by_name))}].",
            "error",
        )

    def _run_one(self, call: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        tool = self.tools_by_name.get(call.get("name", ""))
        if tool is None:
            return self._unknown(call)
        try:
            return self._message(call, _content(tool.invoke(args)))
        except Exception as exc:
            if not self.handle_tool_errors:
                raise
            return self._message(
                call, f"Error: {exc!r}\n Please fix your mistakes.", "error"
            )

    async def _arun_one(
        self, call: dict[str, Any], args: dict[str, Any]
    ) -> dict[str, Any]:
        tool = self.tools_by_name.get(call.get("name", ""))
        if tool is None:
            return self._unknown(call)
        try:
            return self._message(call, _content(await tool.ainvoke(args)))
        except Exception as exc:
            if not self.handle_tool_errors:
                raise
            return self._message(
                call, f"Error: {exc!r}\n Please fix your mistakes.", "error"
            )

    def __call__(self, state: Any) -> dict[str, Any]:
        calls = self._pending(state)
        arguments = [self._arguments(c, state) for c in calls]
        if len(calls) <= 1:
            results = [
                self._run_one(c, a) for c, a in zip(calls, arguments, strict=True)
            ]
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
                results = list(pool.map(self._run_one, calls, arguments))
        return {self.messages_key: results}

    async def ainvoke(
        self, input: Any, config: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the tool calls concurrently (``config`` and ``kwargs`` are unused)."""
        calls = self._pending(input)
        results = await asyncio.gather(
            *(self._arun_one(c, self._arguments(c, input)) for c in calls)
        )
        return {self.messages_key: list(results)}

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> dict[str, Any]:
        """Run the tool calls of ``input``'s last message (``config`` and ``kwargs``
        are unused: the running task's config is read from the run)."""
        return self(input)


def tools_condition(
    state: Any, messages_key: str = "messages"
) -> Literal["tools", "__end__"]:
    """``"tools"`` when the last message asks for tools, else END."""
    messages = _messages(state, messages_key)
    if messages and _tool_calls(messages[-1]):
        return "tools"
    return END  # type: ignore[return-value]
