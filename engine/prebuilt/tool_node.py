"""ToolNode: run the tool calls of the last assistant message; tools_condition: route to it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from engine._internal._constants import END
from engine.prebuilt.tools import Tool, as_tool

__all__ = ("ToolNode", "tools_condition")


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

    def _run_one(self, call: dict[str, Any]) -> dict[str, Any]:
        tool = self.tools_by_name.get(call.get("name", ""))
        if tool is None:
            return self._message(
                call,
                f"Error: {call.get('name')!r} is not a valid tool, try one of "
                f"[{', '.join(sorted(self.tools_by_name))}].",
                "error",
            )
        try:
            return self._message(call, _content(tool.invoke(call.get("args") or {})))
        except Exception as exc:
            if not self.handle_tool_errors:
                raise
            return self._message(
                call, f"Error: {exc!r}\n Please fix your mistakes.", "error"
            )

    async def _arun_one(self, call: dict[str, Any]) -> dict[str, Any]:
        tool = self.tools_by_name.get(call.get("name", ""))
        if tool is None:
            return self._run_one(call)
        try:
            return self._message(
                call, _content(await tool.ainvoke(call.get("args") or {}))
            )
        except Exception as exc:
            if not self.handle_tool_errors:
                raise
            return self._message(
                call, f"Error: {exc!r}\n Please fix your mistakes.", "error"
            )

    def __call__(self, state: Any) -> dict[str, Any]:
        calls = self._pending(state)
        if len(calls) <= 1:
            results = [self._run_one(c) for c in calls]
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
                results = list(pool.map(self._run_one, calls))
        return {self.messages_key: results}

    async def ainvoke(self, state: Any, config: Any = None) -> dict[str, Any]:
        calls = self._pending(state)
        results = await asyncio.gather(*(self._arun_one(c) for c in calls))
        return {self.messages_key: list(results)}

    def invoke(self, state: Any, config: Any = None) -> dict[str, Any]:
        return self(state)


def tools_condition(
    state: Any, messages_key: str = "messages"
) -> Literal["tools", "__end__"]:
    """``"tools"`` when the last message asks for tools, else END."""
    messages = _messages(state, messages_key)
    if messages and _tool_calls(messages[-1]):
        return "tools"
    return END  # type: ignore[return-value]
