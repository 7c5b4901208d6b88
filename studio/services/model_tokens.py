"""Live tokens: a chat model's streamed text, recorded as ``token`` run events.

The worker asks every run for ``stream_mode="messages"`` and passes each event to
a :class:`TokenRecorder`: the text pieces of the chunks a root graph's model
streams become ``token`` events (``{"message_id", "node", "delta", "first"}``),
stored in the run's event log like every other event and published to the
thread's group, so the thread page shows the answer as it is written
(``components/_token.html``). The log is the truth: a page that loads or
reconnects mid-answer rebuilds the text so far from these rows
(:func:`streaming_text`), and the message the model node finally writes is in
the checkpoint, which the transcript shows once the step is saved.

Only pieces are recorded: whole messages (a tool's answer, a message a node
returns without streaming) reach the page with the checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine import events as ev
from studio.models import RunEvent

__all__ = ("TOKEN", "TokenRecorder", "chunk_text", "streaming_text")

TOKEN = "token"
"""The run event kind of a streamed piece of a model's answer."""


def chunk_text(message: Any) -> str | None:
    """The text of a streamed assistant chunk, or None when it is not one.

    A chunk is a LangChain ``*Chunk`` object or a plain assistant dict (what the
    engine's chat models stream); list contents keep their text parts.
    """
    if isinstance(message, dict):
        if message.get("role", message.get("type")) not in ("assistant", "ai"):
            return None
        content = message.get("content")
    elif type(message).__name__.endswith("Chunk"):
        content = getattr(message, "content", None)
    else:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return None


class TokenRecorder:
    """One run's token events, from its engine events (one recorder per execution)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def records(self, event: Any) -> list[tuple[str, dict[str, Any]]]:
        """``(kind, payload)`` pairs to store for one engine event (none or one)."""
        if not isinstance(event, ev.StreamPart) or event.mode != "messages":
            return []
        if event.ns:
            return []  # a subgraph's model: its own page is not drawn here
        message, metadata = event.payload
        text = chunk_text(message)
        if not text:
            return []
        message_id = str(
            (
                message.get("id")
                if isinstance(message, dict)
                else getattr(message, "id", "")
            )
            or ""
        )
        first = message_id not in self._seen
        self._seen.add(message_id)
        node = metadata.get("langgraph_node", "") if isinstance(metadata, dict) else ""
        return [
            (
                TOKEN,
                {
                    "message_id": message_id,
                    "node": str(node),
                    "delta": text,
                    "first": first,
                },
            )
        ]


def streaming_text(rows: Iterable[RunEvent]) -> dict[str, str]:
    """Message id -> the text streamed so far, from token rows in id order."""
    text: dict[str, str] = {}
    for row in rows:
        payload = row.payload or {}
        key = str(payload.get("message_id", ""))
        text[key] = text.get(key, "") + str(payload.get("delta", ""))
    return text
