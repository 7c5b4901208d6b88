"""A chat thread's conversation as the thread page shows it, next to the graph.

For a graph whose state has a ``messages`` channel (an agent), the page shows
the messages of the thread's newest checkpoint (user, assistant with its tool
calls, tool results), the answer a model is writing right now (the ``token``
events of the active run, ``studio.services.model_tokens``), and the agent's question
when it waits for its owner (``Governance.answered_by == "owner"``), with the
form that answers it through the decision protocol (``studio.reviews``).

Everything here is plain data for templates; message contents are model output
and user input, shown escaped, never as markup.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from engine.graph.message import message_as_dict
from studio.models import Run, RunEvent, Thread
from studio.reviews.governance import governance_for
from studio.reviews.queue import waiting_review
from studio.services.access import visible_thread
from studio.services.activity import stream_dom_id
from studio.services.model_tokens import TOKEN, streaming_text
from studio.services.registered_graphs import runnable

__all__ = (
    "AgentQuestion",
    "ProposedCall",
    "StreamingMessage",
    "Transcript",
    "TranscriptMessage",
    "has_transcript",
    "transcript",
    "transcript_of",
)

MESSAGES_KEY = "messages"
_ACTIVE = (Run.Status.PENDING, Run.Status.RUNNING)


@dataclass(frozen=True, slots=True)
class ProposedCall:
    """A tool call as people read it."""

    call_id: str
    name: str
    args: str
    """The arguments as indented JSON."""
    fields: tuple[tuple[str, str], ...] = ()
    """Top-level arguments as (name, text) pairs (a string argument as is)."""
    description: str = ""


@dataclass(frozen=True, slots=True)
class TranscriptMessage:
    role: str
    """``user``, ``assistant``, ``tool`` or ``system``."""
    text: str
    stream_id: str
    """The DOM id its streamed copy had (the page drops that copy once this is shown)."""
    tool_calls: tuple[ProposedCall, ...] = ()
    tool_name: str = ""
    failed: bool = False
    """A tool result that is an error (a rejected call, a failing tool)."""


@dataclass(frozen=True, slots=True)
class StreamingMessage:
    """An answer being written: the text streamed so far in the active run."""

    dom_id: str
    run_id: str
    text: str


@dataclass(frozen=True, slots=True)
class AgentQuestion:
    """The agent waits for its owner: the calls it wants to make, and the form."""

    request_id: str
    approval_version: int
    decision_id: str
    """A fresh id for this form: posting it twice records one answer."""
    calls: tuple[ProposedCall, ...]
    can_answer: bool
    why_not: str
    owner: str


@dataclass(frozen=True, slots=True)
class Transcript:
    thread_id: str
    messages: tuple[TranscriptMessage, ...]
    streaming: tuple[StreamingMessage, ...]
    question: AgentQuestion | None


def has_transcript(graph_name: str) -> bool:
    """Whether the graph's state has a ``messages`` channel (a chat graph)."""
    try:
        channels = getattr(runnable(graph_name), "channels", {}) or {}
    except Exception:  # an unloadable graph has no transcript; its page says why
        return False
    return MESSAGES_KEY in channels


def transcript(
    user: Any, thread_id: str, *, upto_event: int | None = None
) -> Transcript | None:
    """The thread's conversation for ``user`` (ThreadNotFound when they may not see it).

    ``upto_event``: the last event id the page already has; streamed text after
    it reaches the page over the socket, so it is not shown twice.
    """
    return transcript_of(visible_thread(user, thread_id), user, upto_event=upto_event)


def transcript_of(
    thread: Thread, user: Any, *, upto_event: int | None = None
) -> Transcript | None:
    """As :func:`transcript`, for a thread already checked; None for a non-chat graph."""
    if not has_transcript(thread.graph):
        return None
    state = runnable(thread.graph).get_state(
        {"configurable": {"thread_id": thread.thread_id}}
    )
    values = state.values if isinstance(state.values, dict) else {}
    raw = values.get(MESSAGES_KEY)
    messages = tuple(
        _message(m) for m in (raw if isinstance(raw, list) else []) if m is not None
    )
    settled = {m.stream_id for m in messages}
    return Transcript(
        thread_id=thread.thread_id,
        messages=tuple(m for m in messages if m.role != "system"),
        streaming=_streaming(thread, settled, upto_event),
        question=_question(thread, user),
    )


def _message(message: Any) -> TranscriptMessage:
    try:
        plain = message_as_dict(message)
    except Exception:  # a value that is not a message: shown as text
        plain = {"role": "system", "content": str(message)}
    role = str(plain.get("role") or "assistant")
    status = (
        message.get("status")
        if isinstance(message, dict)
        else getattr(message, "status", None)
    )
    return TranscriptMessage(
        role=role if role in ("user", "assistant", "tool", "system") else "assistant",
        text=_text(plain.get("content")),
        stream_id=stream_dom_id(str(plain.get("id") or "")),
        tool_calls=tuple(
            _call(c) for c in plain.get("tool_calls") or () if isinstance(c, dict)
        ),
        tool_name=str(plain.get("name") or "") if role == "tool" else "",
        failed=status == "error",
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part)
            for part in content
        )
    return "" if content is None else json.dumps(content, default=str)


def _call(call: dict[str, Any], description: str = "") -> ProposedCall:
    args = call.get("args")
    fields: tuple[tuple[str, str], ...] = ()
    if isinstance(args, dict):
        fields = tuple(
            (str(k), v if isinstance(v, str) else json.dumps(v, default=str))
            for k, v in args.items()
        )
    return ProposedCall(
        call_id=str(call.get("id") or ""),
        name=str(call.get("name") or ""),
        args=json.dumps(args, indent=2, ensure_ascii=False, default=str),
        fields=fields,
        description=description,
    )


def _streaming(
    thread: Thread, settled: set[str], upto_event: int | None
) -> tuple[StreamingMessage, ...]:
    """The active run's streamed answers not yet in the checkpoint."""
    run = (
        Run.objects.filter(thread=thread, status__in=_ACTIVE)
        .order_by("created_at")
        .only("run_id")
        .first()
    )
    if run is None:
        return ()
    rows = RunEvent.objects.filter(run=run, kind=TOKEN).order_by("id")
    if upto_event is not None:
        rows = rows.filter(id__lte=upto_event)
    text = streaming_text(rows.only("id", "payload"))
    found = []
    for message_id, so_far in text.items():
        dom_id = stream_dom_id(message_id)
        if dom_id not in settled:
            found.append(
                StreamingMessage(dom_id=dom_id, run_id=run.run_id, text=so_far)
            )
    return tuple(found)


def _question(thread: Thread, user: Any) -> AgentQuestion | None:
    governance = governance_for(thread.graph)
    if governance is None or governance.answered_by != "owner":
        return None
    if Run.objects.filter(thread=thread, status__in=_ACTIVE).exists():
        return None  # it is being answered (or changed) right now
    waiting = waiting_review(thread, governance)
    if waiting is None:
        return None
    requests = waiting.payload.get("action_requests") or []
    bound = waiting.payload.get("tool_calls") or []
    calls = tuple(
        _call(
            call,
            str(request.get("description", "")) if isinstance(request, dict) else "",
        )
        for call, request in zip(bound, requests, strict=False)
        if isinstance(call, dict)
    )
    owner = thread.owner.get_username() if thread.owner else ""
    is_owner = thread.owner_id is not None and thread.owner_id == getattr(
        user, "pk", None
    )
    return AgentQuestion(
        request_id=waiting.request_id,
        approval_version=waiting.approval_version,
        decision_id=str(uuid.uuid4()),
        calls=calls,
        can_answer=is_owner,
        why_not=""
        if is_owner
        else f"Only the thread's owner ({owner or 'nobody'}) answers the agent's "
        "questions: it acts in their name.",
        owner=owner,
    )
