"""``add_messages``: the reducer for chat histories, ``MessagesState``, ``push_message``.

Works with plain dict messages (``{"role": "user", "content": "hi"}``) and, when
langchain-core is installed, with its message objects, as LangGraph's does: then
every message (dict, ``(role, content)`` tuple, string, chunk) becomes a
LangChain message, and one without an id gets one in place. New messages are
appended, a message whose id is already present replaces it, a ``RemoveMessage``
(or ``{"type": "remove", "id": ...}``) deletes one, and every message gets an id.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from engine._internal._scope import require_scope
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
    "push_message",
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
    """With langchain-core installed, messages become its objects (as in LangGraph):
    dicts, tuples and strings are converted, chunks become whole messages."""
    chunk = lc.BaseMessageChunk
    if all(
        issubclass(t, lc.BaseMessage) and not issubclass(t, chunk)
        for t in set(map(type, messages))
    ):
        return messages
    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict) and message.get("type") == "remove":
            out.append(lc.RemoveMessage(id=message["id"]))
            continue
        converted = message if _is_lc(message) else lc.convert_to_messages([message])[0]
        if isinstance(converted, chunk):
            converted = lc.message_chunk_to_message(converted)
        out.append(converted)
    return out


def _get_id(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)


def _with_id(message: Any) -> Any:
    """The message with an id: a dict is copied, a message object gets one in place
    (as LangGraph does, so the caller's object knows its id)."""
    if _get_id(message) is not None:
        return message
    new_id = str(uuid.uuid4())
    if isinstance(message, dict):
        return {**message, "id": new_id}
    message.id = new_id
    return message


def _with_ids(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """The messages, each with an id (:func:`_with_id`), and their ids.

    The history a reducer receives is long and already has its ids, so it is
    read in one pass per kind (dicts, or message objects) instead of one call
    per message; any message without an id falls back to :func:`_with_id`.
    """
    kinds = set(map(type, messages))
    if kinds == {dict}:
        ids = [message.get("id") for message in messages]
    elif dict not in kinds:
        ids = [getattr(message, "id", None) for message in messages]
    else:
        ids = [None]
    if None in ids:
        messages = [_with_id(m) for m in messages]
        ids = [_get_id(m) for m in messages]
    return messages, ids


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


class _FormattedMessages:
    """``add_messages(format=...)``: the reducer with its format bound."""

    __name__ = "add_messages"

    def __init__(self, format: str | None = None) -> None:
        self.format = format

    def __call__(self, left: Any, right: Any) -> list[Any]:
        return _merge(left, right, format=self.format)

    def __repr__(self) -> str:
        return f"add_messages(format={self.format!r})"


def add_messages(left: Any = None, right: Any = None, **kwargs: Any) -> Any:
    """Merge ``right`` into ``left`` by message id (append, replace or remove).

    Called with no messages, returns the reducer with its options bound:
    ``Annotated[list, add_messages(format="langchain-openai")]``.

    Args:
        left: the current messages (a message or a list).
        right: the new messages.
        format: ``"langchain-openai"`` returns LangChain messages whose content is
            in OpenAI's format (needs langchain-core); ``None`` leaves them as they
            are.

    Returns:
        A new list (``left`` is never modified), or the bound reducer.

    Raises:
        ValueError: only one of ``left`` and ``right`` was given, or the format
            is unknown.
        InvalidUpdateError: a message cannot be read, or a removal names an id that
            is not in the history.

    Example:
        >>> add_messages([{"role": "user", "content": "hi", "id": "1"}],
        ...              [{"role": "user", "content": "hello", "id": "1"}])
        [{'role': 'user', 'content': 'hello', 'id': '1'}]
    """
    if left is not None and right is not None:
        return _merge(left, right, **kwargs)
    if left is None and right is None:
        return _FormattedMessages(**kwargs)
    given = "left" if left is not None else "right"
    raise ValueError(
        f"add_messages() needs both 'left' and 'right' (or neither, for a reducer "
        f"with options bound); only {given!r} was given."
    )


def _merge(left: Any, right: Any, *, format: str | None = None) -> list[Any]:
    lc = _lc()
    if lc is not None:
        left_list, left_ids = _with_ids(_to_lc(lc, _as_list(left)))
        right_list = [_with_id(m) for m in _to_lc(lc, _as_list(right))]
    else:
        left_list, left_ids = _with_ids([_coerce(m) for m in _as_list(left)])
        right_list = [_with_id(_coerce(m)) for m in _as_list(right)]
    if any(_is_remove(m) and _get_id(m) == REMOVE_ALL_MESSAGES for m in right_list):
        last = max(
            i
            for i, m in enumerate(right_list)
            if _is_remove(m) and _get_id(m) == REMOVE_ALL_MESSAGES
        )
        if lc is not None:  # exactly what LangGraph keeps: all that follows
            return _formatted(right_list[last + 1 :], format)
        return [m for m in right_list[last + 1 :] if not _is_remove(m)]
    if not right_list:
        return _formatted(left_list, format)
    index = dict(zip(left_ids, range(len(left_ids)), strict=True))
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
    return _formatted(merged, format)


def _formatted(messages: list[Any], format: str | None) -> list[Any]:
    if format is None:
        return messages
    if format != "langchain-openai":
        raise ValueError(
            f"Unknown message format {format!r}: use 'langchain-openai' or None."
        )
    try:
        from langchain_core.messages import (  # noqa: PLC0415 - optional dependency
            convert_to_messages,
            convert_to_openai_messages,
        )
    except ImportError:
        warnings.warn(
            "add_messages(format='langchain-openai') needs langchain-core; the "
            "messages are left as they are.",
            stacklevel=2,
        )
        return messages
    return list(convert_to_messages(convert_to_openai_messages(messages)))


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


def push_message(message: Any, *, state_key: str | None = "messages") -> Any:
    """Send a message to ``stream_mode="messages"`` now, from inside a node.

    The message also becomes the node's write to ``state_key`` (unless ``None``),
    as if the node had returned it; streamed once, it is not streamed again when
    the node finishes. With langchain-core installed it is converted to a
    LangChain message, as in LangGraph; otherwise a dict.

    Args:
        message: a message (dict, ``(role, content)`` tuple, LangChain message or
            chunk); it must have an id.
        state_key: the state key to write it to (``None``: stream only).

    Returns:
        The message as written.

    Raises:
        ValueError: the message has no id.
        RuntimeError: called outside a running node.
    """
    scope = require_scope("push_message()")
    lc = _lc()
    message = _to_lc(lc, [message])[0] if lc is not None else _coerce(message)
    if _get_id(message) is None:
        raise ValueError("push_message() needs a message with an id")
    if scope.message_writer is not None:
        scope.message_writer(message)
    if state_key and scope.task_writes is not None:
        scope.task_writes.append((state_key, message))
    return message
