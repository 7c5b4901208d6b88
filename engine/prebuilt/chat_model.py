"""The chat model interface the prebuilt agents talk to, and a scripted model for tests.

A chat model here is any object with ``invoke(messages, tools=None)`` (and
optionally ``ainvoke``, ``stream``, ``astream``) returning an assistant message
dict::

    {"role": "assistant", "content": "...", "tool_calls": [{"id", "name", "args"}]}

Options an agent needs to pass (``tool_choice``, ``response_format``, model
settings) are given as keyword arguments, and only when set, so a model that
takes just ``(messages, tools=None)`` keeps working.

LangChain chat models work too: they are detected by ``bind_tools`` and called
through LangChain (tools and options bound with ``bind_tools``). :func:`call_model`
streams tokens to ``stream_mode="messages"`` when the model can stream.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from engine.config import get_message_writer
from engine.graph.message import message_as_dict
from engine.prebuilt.tools import Tool, as_tool

__all__ = (
    "ChatModel",
    "ScriptedChatModel",
    "acall_model",
    "call_model",
    "is_langchain_model",
)

Message = dict[str, Any]
ScriptEntry = Message | Callable[[list[Message]], Message] | BaseException


@runtime_checkable
class ChatModel(Protocol):
    """What the prebuilt agents need from a model."""

    def invoke(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None = None
    ) -> Any: ...


def is_langchain_model(model: Any) -> bool:
    """A LangChain chat model (or a binding of one): it has ``bind_tools``."""
    return callable(getattr(model, "bind_tools", None))


def _specs(tools: Sequence[Any]) -> list[Any]:
    """Tools as :class:`Tool` objects; dicts (provider built-in tools) kept as they are."""
    return [t if isinstance(t, dict) else as_tool(t) for t in tools]


def _bound_langchain(model: Any, specs: Sequence[Any], options: dict[str, Any]) -> Any:
    bound_tools = getattr(model, "kwargs", None)
    if isinstance(bound_tools, dict) and "tools" in bound_tools and not options:
        return model  # already bound by the caller (model.bind_tools(...))
    tools = [t if isinstance(t, dict) else (t.lc_tool or t.func) for t in specs]
    if tools or "response_format" in options or "tool_choice" in options:
        return model.bind_tools(tools, **options)
    return model.bind(**options) if options else model


def call_model(
    model: Any, messages: Sequence[Any], tools: Sequence[Any] = (), **options: Any
) -> Any:
    """Call ``model`` on ``messages`` offering ``tools``; stream tokens when it can.

    ``options`` (``tool_choice``, ``response_format``, model settings) are bound
    to a LangChain model with ``bind_tools``, and passed as keyword arguments to
    any other model.
    """
    specs = _specs(tools)
    if is_langchain_model(model):
        return _bound_langchain(model, specs, options).invoke(list(messages))
    stream = getattr(model, "stream", None)
    if callable(stream):
        writer = get_message_writer()
        message: Message | None = None
        for chunk in stream(list(messages), tools=specs or None, **options):
            writer(chunk)
            message = _merge_chunk(message, chunk)
        if message is not None:
            return message
    return model.invoke(list(messages), tools=specs or None, **options)


async def acall_model(
    model: Any, messages: Sequence[Any], tools: Sequence[Any] = (), **options: Any
) -> Any:
    """Async twin of :func:`call_model` (streams with ``astream`` when the model has it)."""
    specs = _specs(tools)
    if is_langchain_model(model):
        bound = _bound_langchain(model, specs, options)
        return await bound.ainvoke(list(messages))
    astream = getattr(model, "astream", None)
    if callable(astream):
        writer = get_message_writer()
        message: Message | None = None
        async for chunk in astream(list(messages), tools=specs or None, **options):
            writer(chunk)
            message = _merge_chunk(message, chunk)
        if message is not None:
            return message
    ainvoke = getattr(model, "ainvoke", None)
    if callable(ainvoke):
        result = ainvoke(list(messages), tools=specs or None, **options)
        return await result if inspect.isawaitable(result) else result
    return await asyncio.to_thread(call_model, model, messages, tools, **options)


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


_TOKEN = re.compile(r"\s*\S+|\s+")


class ScriptedChatModel:
    """A deterministic chat model: answers come from a script, not from a network.

    Each entry of ``script`` is an assistant message dict (returned as is, with an
    id added), a function ``(messages) -> message`` that decides from the
    conversation (it gets plain dict messages), or an exception instance, raised
    (to test retries and fallbacks). After the script ends the last entry repeats.

    Which entry answers: with ``advance="turn"`` (default) the number of
    assistant messages since the last user message, so the script restarts for
    each question of a conversation; with ``advance="call"`` the number of calls
    so far, so a failed call (an exception entry) moves on to the next entry.

    ``stream``/``astream`` yield the answer token by token (each word with the
    whitespace before it), then one chunk with the tool calls, all with the
    answer's id; ``token_delay`` seconds pass between tokens (for live demos).
    Every call is recorded in ``requests`` (messages, tool names and options) so
    tests can check what the agent offered the model.

    Example::

        model = ScriptedChatModel([
            {"content": "", "tool_calls": [{"name": "search", "args": {"q": "pricing"}}]},
            lambda messages: {"content": f"Found: {messages[-1]['content']}"},
        ])
    """

    def __init__(
        self,
        script: Sequence[ScriptEntry],
        *,
        advance: Literal["turn", "call"] = "turn",
        token_delay: float = 0.0,
        name: str = "scripted",
        supports_structured_output: bool = False,
    ) -> None:
        if not script:
            raise ValueError("ScriptedChatModel needs at least one scripted answer")
        if advance not in ("turn", "call"):
            raise ValueError(f"advance must be 'turn' or 'call', got {advance!r}")
        self.script = list(script)
        self.advance = advance
        self.token_delay = token_delay
        self.name = name
        self.supports_structured_output = supports_structured_output
        """Whether an agent may ask this model for JSON output (``ProviderStrategy``)."""
        self.calls = 0
        self.requests: list[dict[str, Any]] = []

    def _answer(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> Message:
        plain = [message_as_dict(m) for m in messages]
        turn = self.calls if self.advance == "call" else _assistant_turns(plain)
        entry = self.script[min(turn, len(self.script) - 1)]
        self.calls += 1
        self.requests.append(
            {
                "messages": plain,
                "tools": [_tool_name(t) for t in tools or ()],
                "options": dict(options or {}),
            }
        )
        if isinstance(entry, BaseException):
            raise entry
        raw = entry(plain) if callable(entry) else dict(entry)
        message: Message = {"role": "assistant", "content": "", **raw}
        message["role"] = "assistant"
        message.setdefault(
            "id",
            f"ai-{uuid.uuid5(uuid.NAMESPACE_URL, repr((self.name, turn, len(plain))))}",
        )
        message["tool_calls"] = [
            {
                "id": call.get("id") or f"call-{turn}-{index}",
                "name": call["name"],
                "args": dict(call.get("args") or {}),
            }
            for index, call in enumerate(message.get("tool_calls") or [])
        ]
        return message

    def invoke(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> Message:
        return self._answer(messages, tools, options)

    async def ainvoke(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> Message:
        return self._answer(messages, tools, options)

    def _chunks(self, message: Message) -> Iterator[Message]:
        for token in _TOKEN.findall(str(message.get("content", ""))):
            yield {"role": "assistant", "id": message["id"], "content": token}
        if message["tool_calls"] or not message.get("content"):
            yield {
                "role": "assistant",
                "id": message["id"],
                "content": "",
                "tool_calls": message["tool_calls"],
            }

    def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> Iterator[Message]:
        message = self._answer(messages, tools, options)
        for index, chunk in enumerate(self._chunks(message)):
            if index and self.token_delay:
                time.sleep(self.token_delay)
            yield chunk

    async def astream(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[Message]:
        message = self._answer(messages, tools, options)
        for index, chunk in enumerate(self._chunks(message)):
            if index and self.token_delay:
                await asyncio.sleep(self.token_delay)
            yield chunk


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("function", {}).get("name", ""))
    return str(getattr(tool, "name", "") or getattr(tool, "__name__", ""))


def _assistant_turns(messages: Sequence[Message]) -> int:
    """Assistant messages since the last user message (the script restarts per question)."""
    turns = 0
    for message in reversed(list(messages)):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant":
            turns += 1
    return turns
