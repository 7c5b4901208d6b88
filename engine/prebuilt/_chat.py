"""Reading and making chat messages in either form the engine supports.

A conversation holds plain dicts (``{"role": "assistant", ...}``) or, when
langchain-core is installed, its message objects (``add_messages`` converts to
them then). Agents read both through these helpers, and make new messages as
LangChain objects when langchain-core is installed, dicts otherwise, so that what
they write looks like what the reducer keeps.
"""

from __future__ import annotations

import uuid
from typing import Any

from engine.graph.message import message_content, message_role

__all__ = (
    "ai_message",
    "has_langchain",
    "in_conversation_form",
    "is_ai",
    "is_tool",
    "langchain_messages",
    "message_id",
    "message_name",
    "system_message",
    "text_of",
    "tool_call_id",
    "tool_calls",
    "tool_message",
    "with_name",
)

_LC: Any = None
_LOADED = False


def langchain_messages() -> Any:
    """``langchain_core.messages`` when installed, else ``None`` (cached)."""
    global _LC, _LOADED
    if not _LOADED:
        try:
            import langchain_core.messages as messages  # noqa: PLC0415 - optional
        except ImportError:
            messages = None  # type: ignore[assignment]
        _LC, _LOADED = messages, True
    return _LC


def has_langchain() -> bool:
    return langchain_messages() is not None


def is_ai(message: Any) -> bool:
    return message_role(message) == "assistant"


def is_tool(message: Any) -> bool:
    return message_role(message) == "tool"


def tool_calls(message: Any) -> list[dict[str, Any]]:
    """The tool calls of an AI message as ``{"name", "args", "id"}`` dicts."""
    calls = (
        message.get("tool_calls")
        if isinstance(message, dict)
        else getattr(message, "tool_calls", None)
    )
    return [dict(call) for call in calls or ()]


def tool_call_id(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("tool_call_id")
    return getattr(message, "tool_call_id", None)


def message_id(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)


def message_name(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("name")
    return getattr(message, "name", None)


def with_name(message: Any, name: str | None) -> Any:
    """The message with ``name`` set (a dict is copied; an object is set in place)."""
    if name is None:
        return message
    if isinstance(message, dict):
        return {**message, "name": name}
    message.name = name
    return message


def system_message(content: Any) -> Any:
    lc = langchain_messages()
    if lc is not None:
        return lc.SystemMessage(content=content)
    return {"role": "system", "content": content}


def ai_message(content: Any, *, id: str | None = None, **fields: Any) -> Any:
    lc = langchain_messages()
    message_id_ = id or f"ai-{uuid.uuid4()}"
    if lc is not None:
        return lc.AIMessage(content=content, id=message_id_, **fields)
    return {"role": "assistant", "content": content, "id": message_id_, **fields}


def tool_message(
    content: Any,
    *,
    tool_call_id: Any,
    name: str | None = None,
    status: str = "success",
    **fields: Any,
) -> Any:
    lc = langchain_messages()
    if lc is not None:
        return lc.ToolMessage(
            content=content,
            tool_call_id=tool_call_id,
            name=name,
            status=status,
            **fields,
        )
    return {
        "role": "tool",
        "content": content,
        "tool_call_id": tool_call_id,
        "name": name,
        "status": status,
        "id": f"tool-{uuid.uuid4()}",
        **fields,
    }


def in_conversation_form(message: Any) -> Any:
    """A model's dict answer as a LangChain message when langchain-core is installed
    (what ``add_messages`` would store), else unchanged."""
    lc = langchain_messages()
    if lc is None or not isinstance(message, dict):
        return message
    converted = lc.convert_to_messages([message])[0]
    if converted.id is None and message.get("id") is not None:
        converted.id = message["id"]
    return converted


def text_of(message: Any) -> str:
    """A message's content as text (content blocks' text joined)."""
    content = message_content(message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)
