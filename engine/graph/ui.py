"""Generative-UI messages: components a node asks the client to render.

A node calls :func:`push_ui_message` (or :func:`delete_ui_message`); the message
is sent at once on the ``custom`` stream and written to a state key (``"ui"`` by
default) whose reducer is :func:`ui_message_reducer`, so the list of components
survives in checkpoints next to the chat history. Messages are plain dicts (JSON
in checkpoints and on the wire), shaped as LangGraph's::

    class State(TypedDict):
        messages: Annotated[list, add_messages]
        ui: Annotated[list[AnyUIMessage], ui_message_reducer]

    def weather(state: State) -> dict:
        reply = {"role": "assistant", "content": "Sunny", "id": "ai-1"}
        push_ui_message("weather-card", {"city": "Paris"}, message=reply)
        return {"messages": [reply]}
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal, TypedDict, cast

from engine._internal._scope import require_scope

__all__ = (
    "AnyUIMessage",
    "RemoveUIMessage",
    "UIMessage",
    "delete_ui_message",
    "push_ui_message",
    "ui_message_reducer",
)


class UIMessage(TypedDict):
    """A UI component to render (or to update, when its ``id`` is already shown)."""

    type: Literal["ui"]
    id: str
    """Identifies the component; a later message with this id replaces it."""
    name: str
    """Which component the client renders."""
    props: dict[str, Any]
    """The component's properties."""
    metadata: dict[str, Any]
    """``merge`` (props are merged into the shown component's), ``run_id``,
    ``tags``, ``name`` (the run's name), ``message_id`` (the chat message it
    belongs to) and the caller's own keys."""


class RemoveUIMessage(TypedDict):
    """Removes the UI component ``id`` from the state."""

    type: Literal["remove-ui"]
    id: str


AnyUIMessage = UIMessage | RemoveUIMessage
"""A message the ``ui`` state key's reducer accepts."""


def push_ui_message(
    name: str,
    props: dict[str, Any],
    *,
    id: str | None = None,
    metadata: dict[str, Any] | None = None,
    message: Any | None = None,
    state_key: str | None = "ui",
    merge: bool = False,
) -> UIMessage:
    """Show (or update) a UI component, from inside a node.

    The message goes to the ``custom`` stream now and, unless ``state_key`` is
    ``None``, is written to ``state_key`` as if the node had returned it.

    Args:
        name: the component to render.
        props: its properties.
        id: the component's id; a new UUID when omitted. Pushing an id that is
            already in the state replaces that component.
        metadata: extra metadata, merged over the computed keys.
        message: the chat message (dict or message object) the component belongs
            to; its id is recorded as ``metadata["message_id"]``.
        state_key: the state key holding UI messages (``None``: stream only).
        merge: merge ``props`` into the existing component's props instead of
            replacing them.

    Returns:
        The message as sent.

    Raises:
        RuntimeError: called outside a running node or task.
    """
    scope = require_scope("push_ui_message()")
    config = scope.config
    message_id = _message_id(message)
    ui: UIMessage = {
        "type": "ui",
        "id": id or str(uuid.uuid4()),
        "name": name,
        "props": props,
        "metadata": {
            "merge": merge,
            "run_id": config.get("run_id"),
            "tags": config.get("tags") or None,  # LangGraph's: None, not []
            "name": config.get("run_name"),
            **(metadata or {}),
            **({"message_id": message_id} if message_id else {}),
        },
    }
    scope.stream_writer(ui)
    if state_key and scope.task_writes is not None:
        scope.task_writes.append((state_key, ui))
    return ui


def delete_ui_message(id: str, *, state_key: str = "ui") -> RemoveUIMessage:
    """Remove the UI component ``id``, from inside a node.

    Sent on the ``custom`` stream now and written to ``state_key``.

    Returns:
        The removal message as sent.

    Raises:
        RuntimeError: called outside a running node or task.
    """
    scope = require_scope("delete_ui_message()")
    removal: RemoveUIMessage = {"type": "remove-ui", "id": id}
    scope.stream_writer(removal)
    if scope.task_writes is not None:
        scope.task_writes.append((state_key, removal))
    return removal


def ui_message_reducer(
    left: Sequence[AnyUIMessage] | AnyUIMessage,
    right: Sequence[AnyUIMessage] | AnyUIMessage,
) -> list[AnyUIMessage]:
    """The ``ui`` key's reducer: add, replace (or merge) and remove components by id.

    A message whose id is new is appended; one whose id is present replaces the
    shown one in place (its props merged over the old ones when its
    ``metadata["merge"]`` is true); a ``remove-ui`` drops the component. A
    component removed and pushed again in the same update stays.

    Raises:
        ValueError: a ``remove-ui`` names an id that is not shown.
    """
    merged: list[AnyUIMessage] = _as_list(left)
    position = {message.get("id"): index for index, message in enumerate(merged)}
    removed: set[Any] = set()
    for message in _as_list(right):
        message_id = message.get("id")
        index = position.get(message_id)
        if index is None:
            if message.get("type") == "remove-ui":
                raise ValueError(
                    f"Cannot delete UI message {message_id!r}: no UI message has "
                    "this id."
                )
            position[message_id] = len(merged)
            merged.append(message)
        elif message.get("type") == "remove-ui":
            removed.add(message_id)
        else:
            removed.discard(message_id)
            shown = merged[index]
            metadata = cast(UIMessage, message).get("metadata") or {}
            if metadata.get("merge", False):
                update = cast(UIMessage, dict(message))
                update["props"] = {
                    **cast(UIMessage, shown).get("props", {}),
                    **update.get("props", {}),
                }
                message = update
            merged[index] = message
    return [message for message in merged if message.get("id") not in removed]


def _as_list(value: Sequence[AnyUIMessage] | AnyUIMessage) -> list[AnyUIMessage]:
    if isinstance(value, dict):
        return [value]
    return list(value)


def _message_id(message: Any) -> Any:
    if not message:
        return None
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)
