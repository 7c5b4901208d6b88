"""Thread titles: what a thread is about, in a few words, from the input of its run.

A graph declares its title once, next to its factory (as ``GOVERNANCE`` is
declared), as a module-level ``THREAD_TITLE``:

- a format string over the input's keys, ``"{request_id} from {vendor}"``
  (a missing key formats as nothing); or
- a callable ``(input: dict) -> str`` for anything a format string cannot say,
  such as an amount in fen shown in CNY (``studio/demo_graphs/purchase.py``).

Without a declaration, a graph whose input carries ``messages`` (``MessagesState``,
the tool agent) is titled by the first user message, and any other graph by its
input's first short text or number values (``question: Which pricing…``).

When a run starts (``studio.services.runs.start_run``) its input names the
thread: a declared title is recomputed from every new input (a changed purchase
shows its new amount); the other titles are set once, by the first input that
gives one (a conversation keeps its first message). A declaration that fails
or gives nothing falls back to the rules above: a title never stops a run.

Pure apart from reading the declaration through ``studio.graph_registry``. Titles are
plain text: templates escape them like any other value.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Callable, Mapping
from typing import Any

from studio import graph_registry as registry

__all__ = ("MAX_LENGTH", "THREAD_TITLE_ATTR", "next_title", "title_from_input")

log = logging.getLogger(__name__)

THREAD_TITLE_ATTR = "THREAD_TITLE"
"""The module attribute a graph's module may define."""
MAX_LENGTH = 120
"""Longer titles are cut, ending in "…"."""
_FALLBACK_VALUES = 2
_VALUE_LENGTH = 60


def next_title(graph: str, input: Any, current: str = "") -> str:
    """The title a thread of ``graph`` has after a run with ``input`` starts.

    Args:
        current: the thread's title so far ("" for a new thread).
    """
    declared = registry.declared(graph, THREAD_TITLE_ATTR)
    if declared is not None and isinstance(input, Mapping):
        title = _declared(graph, declared, input)
        if title:
            return title
    if current:
        return current
    return title_from_input(input)


def title_from_input(input: Any) -> str:
    """The undeclared title: the first user message, or the input's first values."""
    if not isinstance(input, Mapping):
        return ""
    messages = input.get("messages")
    if isinstance(messages, list):
        return _clean(_first_user_message(messages))
    parts = []
    for key, value in input.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        text = " ".join(str(value).split())
        if not text:
            continue
        parts.append(f"{key}: {_cut(text, _VALUE_LENGTH)}")
        if len(parts) == _FALLBACK_VALUES:
            break
    return _clean(" · ".join(parts))


def _declared(graph: str, declared: Any, input: Mapping[str, Any]) -> str:
    try:
        if isinstance(declared, str):
            return _clean(string.Formatter().vformat(declared, (), _Blank(input)))
        if callable(declared):
            made: Callable[[Mapping[str, Any]], Any] = declared
            title = made(input)
            return _clean(title) if isinstance(title, str) else ""
    except Exception:  # a title is a convenience: the run goes ahead without it
        log.warning("THREAD_TITLE of graph %r failed", graph, exc_info=True)
    return ""


class _Blank(dict[str, Any]):
    """Format values: the input's, "" for keys it does not have."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(values)

    def __missing__(self, key: str) -> str:
        return ""


def _first_user_message(messages: list[Any]) -> str:
    for message in messages:
        if isinstance(message, Mapping):
            role = message.get("role") or message.get("type")
            content = message.get("content")
        else:  # a message object
            role = getattr(message, "type", None) or getattr(message, "role", None)
            content = getattr(message, "content", None)
        if role not in ("user", "human"):
            continue
        if isinstance(content, list):  # content blocks: their text parts
            content = " ".join(
                str(block.get("text", ""))
                for block in content
                if isinstance(block, Mapping)
            )
        if isinstance(content, str) and content.strip():
            return content
    return ""


def _clean(text: str) -> str:
    """One line, no doubled separators left by blank values, at most MAX_LENGTH."""
    words = " ".join(text.split())
    while " · · " in words:
        words = words.replace(" · · ", " · ")
    words = words.strip(" ·")
    return _cut(words, MAX_LENGTH)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
