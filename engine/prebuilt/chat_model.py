"""The chat model interface the prebuilt agent talks to, and a scripted model for tests.

A chat model here is any object with ``invoke(messages, tools=None)`` (and
optionally ``ainvoke``/``stream``) returning an assistant message dict::

    {"role": "assistant", "content": "...", "tool_calls": [{"id", "name", "args"}]}

LangChain chat models work too: they are detected by ``bind_tools`` and called
through LangChain. :func:`call_model` streams tokens to ``stream_mode="messages"``
when the model can stream.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from engine.config import get_message_writer
from engine.graph.message import message_as_dict
from engine.prebuilt.tools import Tool, as_tool

__all__ = ("ChatModel", "ScriptedChatModel", "acall_model", "call_model")

Message = dict[str, Any]


@runtime_checkable
class ChatModel(Protocol):
    """What the prebuilt agent needs from a model."""

    def invoke(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None = None
    ) -> Any: ...


def _is_langchain(model: Any) -> bool:
    return callable(getattr(model, "bind_tools", None))


def call_model(model: Any, messages: Sequence[Any], tools: Sequence[Any] = ()) -> Any:
    """Call ``model`` on ``messages`` offering ``tools``; stream tokens when it can."""
    specs = [as_tool(t) for t in tools]
    if _is_langchain(model):
        bound = (
            model.bind_tools([t.lc_tool or t.func for t in specs]) if specs else model
        )
        return bound.invoke(list(messages))
    stream = getattr(model, "stream", None)
    if callable(stream):
        writer = get_message_writer()
        message: Message | None = None
        for chunk in stream(list(messages), tools=specs or None):
            writer(chunk)
            message = _merge_chunk(message, chunk)
        if message is not None:
            return message
    return model.invoke(list(messages), tools=specs or None)


async def acall_model(
    model: Any, messages: Sequence[Any], tools: Sequence[Any] = ()
) -> Any:
    """Async twin of :func:`call_model`."""
    specs = [as_tool(t) for t in tools]
    if _is_langchain(model):
        bound = (
            model.bind_tools([t.lc_tool or t.func for t in specs]) if specs else model
        )
        return await bound.ainvoke(list(messages))
    ainvoke = getattr(model, "ainvoke", None)
    if callable(ainvoke):
        result = ainvoke(list(messages), tools=specs or None)
        return await result if inspect.isawaitable(result) else result
    return call_model(model, messages, tools)


def _merge_chunk(message: Message | None, chunk: Message) -> Message:
    if message is None:
        return {
            "role": "assistant",
            "content": chunk.get("content", ""),
            "id": chunk.get("id"),
            "tool_calls": list(chunk.get("tool_calls") or []),
        }
    message["content"] = f"{message.get('content', '')}{chunk.get('content', '')}"
    message["tool_calls"].extend(chunk.get("tool_calls") or [])
    return message


class ScriptedChatModel:
    """A deterministic chat model: answers come from a script, not from a network.

    Each entry of ``script`` is either an assistant message dict (returned as is,
    with an id added) or a function ``(messages) -> message`` that decides from
    the conversation. After the script ends the last entry repeats. ``stream``
    yields the content word by word, so token streaming can be shown and tested.

    Example::

        model = ScriptedChatModel([
            {"content": "", "tool_calls": [{"name": "search", "args": {"q": "pricing"}}]},
            lambda messages: {"content": f"Found: {messages[-1]['content']}"},
        ])
    """

    def __init__(
        self, script: Sequence[Message | Callable[[list[Any]], Message]]
    ) -> None:
        if not script:
            raise ValueError("ScriptedChatModel needs at least one scripted answer")
        self.script = list(script)
        self.calls = 0

    def _answer(self, messages: Sequence[Any]) -> Message:
        turn = _assistant_turns(messages)
        entry = self.script[min(turn, len(self.script) - 1)]
        self.calls += 1
        plain = [message_as_dict(m) for m in messages]
        raw = entry(plain) if callable(entry) else dict(entry)
        message: Message = {
            "role": "assistant",
            "content": raw.get("content", ""),
            **raw,
        }
        message["role"] = "assistant"
        message.setdefault(
            "id", f"ai-{uuid.uuid5(uuid.NAMESPACE_URL, repr((turn, len(messages))))}"
        )
        calls = []
        for index, call in enumerate(message.get("tool_calls") or []):
            calls.append(
                {
                    "id": call.get("id") or f"call-{turn}-{index}",
                    "name": call["name"],
                    "args": dict(call.get("args") or {}),
                }
            )
        message["tool_calls"] = calls
        return message

    def invoke(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None = None
    ) -> Message:
        return self._answer(messages)

    async def ainvoke(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None = None
    ) -> Message:
        return self._answer(messages)

    def stream(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None = None
    ) -> Iterator[Message]:
        message = self._answer(messages)
        words = str(message.get("content", "")).split(" ")
        for index, word in enumerate(words):
            yield {
                "role": "assistant",
                "id": message["id"],
                "content": word if index == 0 else f" {word}",
                "tool_calls": [],
            }
        if message["tool_calls"]:
            yield {
                "role": "assistant",
                "id": message["id"],
                "content": "",
                "tool_calls": message["tool_calls"],
            }


def _assistant_turns(messages: Sequence[Any]) -> int:
    """Assistant messages since the last user message (the script restarts per question)."""
    turns = 0
    for message in reversed(list(messages)):
        role = (
            message.get("role")
            if isinstance(message, dict)
            else getattr(message, "type", "")
        )
        if role in ("user", "human"):
            break
        if role in ("assistant", "ai"):
            turns += 1
    return turns
