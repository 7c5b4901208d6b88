"""Summarize old messages when the conversation grows too long.

Before each model call, when the conversation passes ``trigger`` (a number of
messages or of tokens), the messages before the last ``keep`` are replaced by one
user message holding a summary written by ``model``. The cut never separates an
AI message from the tool messages answering it. The whole history is rewritten
(a ``RemoveMessage`` of every message, then the summary and the kept messages),
so checkpoints hold the shortened conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from engine.agents.middleware.types import AgentMiddleware
from engine.graph.message import REMOVE_ALL_MESSAGES, RemoveMessage, message_role
from engine.prebuilt._chat import in_conversation_form, is_tool, text_of
from engine.prebuilt.chat_model import call_model

__all__ = (
    "DEFAULT_SUMMARY_PROMPT",
    "SummarizationMiddleware",
    "count_tokens_approximately",
)

ContextSize = tuple[Literal["messages", "tokens"], int]
"""``("messages", n)`` or ``("tokens", n)``."""

DEFAULT_SUMMARY_PROMPT = (
    "Summarize the conversation below for an assistant that will continue it. "
    "Keep names, numbers, decisions, open questions and anything the user asked "
    "to remember; leave out small talk. Answer with the summary only.\n\n"
    "<conversation>\n{messages}\n</conversation>"
)
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


def count_tokens_approximately(messages: Sequence[Any]) -> int:
    """About 4 characters per token, plus 3 tokens per message."""
    return sum(len(text_of(m)) // 4 + 3 for m in messages)


class SummarizationMiddleware(AgentMiddleware[Any, Any]):
    """Replace old messages with a summary once the conversation is too long.

    Args:
        model: the chat model writing summaries (any model the agent accepts).
        trigger: when to summarize: ``("messages", n)`` or ``("tokens", n)``,
            or a list of them (any one suffices). ``None``: never.
        keep: how much recent conversation stays as it is: ``("messages", n)``
            (default 20) or ``("tokens", n)``.
        token_counter: counts the tokens of a list of messages.
        summary_prompt: the prompt, with ``{messages}`` where the old messages go.

    Raises:
        ValueError: an unknown or non-positive context size.
    """

    def __init__(
        self,
        model: Any,
        *,
        trigger: ContextSize | list[ContextSize] | None = None,
        keep: ContextSize = ("messages", 20),
        token_counter: Callable[[Sequence[Any]], int] = count_tokens_approximately,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
    ) -> None:
        triggers = (
            []
            if trigger is None
            else trigger
            if isinstance(trigger, list)
            else [trigger]
        )
        for size in [*triggers, keep]:
            kind, value = size
            if (
                kind not in ("messages", "tokens")
                or not isinstance(value, int)
                or value < 0
            ):
                raise ValueError(
                    f"Unknown context size {size!r}: use ('messages', n) or ('tokens', n)."
                )
        self.model = model
        self.triggers = triggers
        self.keep = keep
        self.token_counter = token_counter
        self.summary_prompt = summary_prompt

    def _triggered(self, messages: list[Any]) -> bool:
        for kind, value in self.triggers:
            if kind == "messages" and len(messages) >= value:
                return True
            if kind == "tokens" and self.token_counter(messages) >= value:
                return True
        return False

    def _cutoff(self, messages: list[Any]) -> int:
        kind, value = self.keep
        if kind == "messages":
            cutoff = max(0, len(messages) - value)
        else:
            cutoff = len(messages)
            while cutoff > 0 and self.token_counter(messages[cutoff - 1 :]) <= value:
                cutoff -= 1
        while 0 < cutoff < len(messages) and is_tool(messages[cutoff]):
            cutoff -= 1  # keep the AI message with the tool messages answering it
        return cutoff

    def _prompt(self, old: list[Any]) -> str:
        lines = "\n".join(f"{message_role(m)}: {text_of(m)}" for m in old)
        return self.summary_prompt.format(messages=lines)

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = list(state["messages"])
        if not self._triggered(messages):
            return None
        cutoff = self._cutoff(messages)
        if cutoff <= 0:
            return None
        answer = call_model(
            self.model, [{"role": "user", "content": self._prompt(messages[:cutoff])}]
        )
        summary = in_conversation_form(
            {"role": "user", "content": SUMMARY_PREFIX + text_of(answer).strip()}
        )
        return {
            "messages": [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                summary,
                *messages[cutoff:],
            ]
        }
