"""``add_messages``: the reducer for chat histories, and ``MessagesState``.

Works with plain dict messages (``{"role": "user", "content": "hi"}``) and, when
langchain-core is installed, with its message objects. New messages are
appended, a message whose id is already present replaces it, a ``RemoveMessage``
(or ``{"type": "remove", "id": ...}``) deletes one, and every message gets an id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from engine.errors import ErrorCode, InvalidUpdateError, error_message

__all__ = (
    "REMOVE_ALL_MESSAGES",
    "MessageNotFoundError",
    "MessagesState",
    "RemoveMessage",
    "add_messages",
    "message_as_dict",
    "message_content",
    "message_role",
    "normalize_messages",
)

REMOVE_ALL_MESSAGES = "__remove_all__"
"""Id of a RemoveMessage that clears the whole history."""

_ROLE_FOR_TYPE = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
}


class MessageNotFoundError(InvalidUpdateError, ValueError):
    """A RemoveMessage named an id that is not in the history (a ValueError, as in LangGraph)."""


class RemoveMessage(dict[str, Any]):
    """Marker that deletes the message with ``id`` (a dict, so it serializes as JSON)."""

    def __init__(self, id: str) -> None:
        super().__init__(type="remove", id=id, content="")

    @property
    def id(self) -> str:
        return str(self["id"])


def _lc() -> Any:
    try:
        import langchain_core.messages as messages  # noqa: PLC0415 - optional dependency
    except ImportError:
        return None
    return messages


def _is_lc(message: Any) -> bool:
    cls = type(message)
    return cls.__module__.startswith("langchain_core.messages")


def _coerce(message: Any) -> Any:
    """A message in a stored form: dict or langchain-core object, never a bare tuple/str."""
    if isinstance(message, dict):
        return message if "id" in message else {**message}
    if isinstance(message, str):
        return {"role": "user", "content": message}
    if isinstance(message, tuple) and len(message) == 2:
        role, content = message
        return {"role": _ROLE_FOR_TYPE.get(str(role), str(role)), "content": content}
    if _is_lc(message) or hasattr(message, "content"):
        return message
    raise InvalidUpdateError(
        error_message(
            f"Cannot treat {message!r} as a chat message: use a dict with role and content, "
            "a (role, content) tuple, a string, or a langchain-core message.",
            ErrorCode.INVALID_CHAT_HISTORY,
        )
    )


def _to_lc(lc: Any, messages: list[Any]) -> list[Any]:
    """With langchain-core installed, messages become its objects (as in LangGraph)."""
    out: list[Any] = []
    for message in messages:
        if _is_lc(message):
            out.append(message)
        elif isinstance(message, dict) and message.get("type") == "remove":
            out.append(lc.RemoveMessage(id=message["id"]))
        else:
            out.extend(lc.convert_to_messages([message]))
    return out


def _get_id(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)


def _with_id(message: Any) -> Any:
    if _get_id(message) is not None:
        return message
    new_id = str(uuid.uuid4())
    if isinstance(message, dict):
        return {**message, "id": new_id}
    try:
        return message.model_copy(update={"id": new_id})
    except AttributeError:
        message.id = new_id
        return message


def _is_remove(message: Any) -> bool:
    if isinstance(message, dict):
        return message.get("type") == "remove"
    return type(message).__name__ == "RemoveMessage"


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)) and not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and not isinstance(value[1], (dict, tuple))
    ):
        return list(value)
    return [value]


def add_messages(left: Any, right: Any, *, format: str | None = None) -> list[Any]:
    """Merge ``right`` into ``left`` by message id (append, replace or remove).

    Args:
        left: the current messages (a message or a list).
        right: the new messages.
        format: ``"langchain-openai"`` is accepted for LangGraph compatibility and
            ignored.

    Returns:
        A new list; ``left`` is never modified.

    Raises:
        InvalidUpdateError: a message cannot be read, or a removal names an id that
            is not in the history.
    """
    lc = _lc()
    if lc is not None:
        left_list = [_with_id(m) for m in _to_lc(lc, _as_list(left))]
        right_list = [_with_id(m) for m in _to_lc(lc, _as_list(right))]
    else:
        left_list = [_with_id(_coerce(m)) for m in _as_list(left)]
        right_list = [_with_id(_coerce(m)) for m in _as_list(right)]
    if any(_is_remove(m) and _get_id(m) == REMOVE_ALL_MESSAGES for m in right_list):
        last = max(
            i
            for i, m in enumerate(right_list)
            if _is_remove(m) and _get_id(m) == REMOVE_ALL_MESSAGES
        )
        return [m for m in right_list[last + 1 :] if not _is_remove(m)]
    if not right_list:
        return left_list
    index = {_get_id(m): i for i, m in enumerate(left_list)}
    merged = list(left_list)
    removed: set[Any] = set()
    appended: list[Any] = []
    appended_index: dict[Any, int] = {}
    for message in right_list:
        message_id = _get_id(message)
        if message_id in index:
            if _is_remove(message):
                removed.add(message_id)
            else:
                removed.discard(message_id)
                merged[index[message_id]] = message
        elif message_id in appended_index:
            if _is_remove(message):
                appended[appended_index[message_id]] = None
            else:
                appended[appended_index[message_id]] = message
        else:
            if _is_remove(message):
                raise MessageNotFoundError(
                    error_message(
                        f"Attempting to delete a message with an ID that doesn't exist ('{message_id}')",
                        ErrorCode.INVALID_CHAT_HISTORY,
                    )
                )
            appended_index[message_id] = len(appended)
            appended.append(message)
    if removed:
        merged = [m for m in merged if _get_id(m) not in removed]
    merged.extend(m for m in appended if m is not None)
    return merged


class MessagesState(TypedDict):
    """A state with one ``messages`` key merged by :func:`add_messages`."""

    messages: Annotated[list[Any], add_messages]


def message_role(message: Any) -> str:
    """``user`` / ``assistant`` / ``system`` / ``tool`` for any supported message form."""
    if isinstance(message, dict):
        role = message.get("role") or message.get("type") or ""
        return _ROLE_FOR_TYPE.get(str(role), str(role))
    kind = getattr(message, "type", "")
    return _ROLE_FOR_TYPE.get(str(kind), str(kind))


def message_content(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("content")
    return getattr(message, "content", None)


def normalize_messages(messages: Sequence[Any]) -> list[Any]:
    return [_coerce(m) for m in messages]


def message_as_dict(message: Any) -> dict[str, Any]:
    """Any supported message as a plain dict: role, content, id, and tool fields if any."""
    if isinstance(message, dict):
        out = dict(message)
        out["role"] = message_role(message)
        return out
    if isinstance(message, (str, tuple)):
        return message_as_dict(_coerce(message))
    out = {"role": message_role(message), "content": getattr(message, "content", "")}
    for field in ("id", "name", "tool_call_id"):
        value = getattr(message, field, None)
        if value is not None:
            out[field] = value
    calls = getattr(message, "tool_calls", None)
    if calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "args": c.get("args", {})}
            for c in calls
        ]
    return out
