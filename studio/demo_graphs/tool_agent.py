"""A tool-calling agent: create_agent, a call limit, and a person who approves its emails.

The agent answers questions about orders with three tools: ``lookup_order``,
``convert_currency`` and ``send_email``. It is built with
``engine.agents.create_agent`` and two middlewares:

- ``ModelCallLimitMiddleware``: at most :data:`MODEL_CALLS_PER_RUN` model calls
  per run, then the agent stops with a message (a loop cannot run away);
- ``HumanInTheLoopMiddleware`` on ``send_email``: before an email goes out the
  run pauses with the email for the thread's owner to approve or reject.

That question is governed (``GOVERNANCE`` below, read by ``studio.reviews``): the
owner answers it on the thread page through the decision protocol, never with a
resume command, fork or state edit, and ``send_email`` sends only what the
decision ledger says was approved (``studio.reviews.outbound_email``), once per
tool call.

The default model is deterministic (:func:`scripted_model`): it streams its
answers token by token, a little slowly so the thread page shows them arrive.
Ask "What is A-1001 in EUR?" (look up, convert, answer) or "Email the total of
A-1001 to ada@example.com" (look up, then ask before sending). Set
``STUDIO_OPENAI_BASE_URL`` (and ``STUDIO_OPENAI_API_KEY``,
``STUDIO_OPENAI_MODEL``) to drive it with any OpenAI-compatible chat
completions endpoint instead.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from engine.agents import create_agent
from engine.agents.middleware import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    ModelCallLimitMiddleware,
)
from engine.graph.message import message_as_dict
from engine.prebuilt import ScriptedChatModel, ToolRuntime
from studio.reviews.governance import Governance

__all__ = (
    "ASK_NODE",
    "GOVERNANCE",
    "MODEL_CALLS_PER_RUN",
    "TOKEN_DELAY",
    "build",
    "hitl_resume",
    "scripted_model",
    "shown_calls",
)

ORDERS = {
    "A-1001": {
        "order_id": "A-1001",
        "customer": "Acme Ltd",
        "total_minor": 129900,
        "currency": "CNY",
    },
    "A-1002": {
        "order_id": "A-1002",
        "customer": "Globex",
        "total_minor": 4500,
        "currency": "CNY",
    },
}
RATES = {("CNY", "USD"): 0.14, ("CNY", "EUR"): 0.13, ("CNY", "CNY"): 1.0}

MODEL_CALLS_PER_RUN = 8
"""The call limit middleware ends a run after this many model calls."""
TOKEN_DELAY = 0.04
"""Seconds between the scripted model's streamed tokens (visible live, still quick)."""
ASK_NODE = "HumanInTheLoopMiddleware.after_model"
"""The node whose interrupt asks the owner before an email goes out."""
SYSTEM_PROMPT = (
    "You answer questions about orders. Use the tools. Before you email anyone, "
    "say what you will send."
)

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ORDER = re.compile(r"[A-Z]-\d{4}")


# -- tools ------------------------------------------------------------------------------


def lookup_order(order_id: str) -> str:
    """Look up an order by id (e.g. A-1001)."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return f"Error: there is no order {order_id!r}."
    return json.dumps(order)


def convert_currency(amount_minor: int, source: str, target: str) -> str:
    """Convert an amount in minor units between currencies (CNY, USD, EUR)."""
    rate = RATES.get((source.upper(), target.upper()))
    if rate is None:
        return f"Error: no rate for {source}->{target}."
    return json.dumps(
        {
            "amount_minor": round(amount_minor * rate),
            "currency": target.upper(),
            "rate": rate,
        }
    )


Sender = Callable[[dict[str, Any]], dict[str, Any]]


def ledger_sender(email: dict[str, Any]) -> dict[str, Any]:
    """The studio's sender: checks the decision ledger, sends once per tool call."""
    from studio.reviews.outbound_email import send_once  # noqa: PLC0415 - needs the Django app

    return send_once(email)


def make_send_email(sender: Sender) -> Callable[..., str]:
    def send_email(
        to: str, subject: str, body: str, runtime: ToolRuntime[Any, Any]
    ) -> str:
        """Send an email (the thread's owner approves it first)."""
        configurable = (runtime.config or {}).get("configurable", {})
        receipt = sender(
            {
                "thread_id": str(configurable.get("thread_id", "")),
                "tool_call_id": runtime.tool_call_id or "",
                "tool": "send_email",
                "to": to,
                "subject": subject,
                "body": body,
            }
        )
        if receipt.get("refused"):
            return f"Refused: {receipt['refused']}. Nothing was sent."
        if receipt.get("duplicate"):
            return (
                f"Already sent to {to} (email #{receipt['email_id']}); not sent again."
            )
        return (
            f"Sent to {to} (email #{receipt['email_id']}, approved by "
            f"{receipt.get('approved_by', 'the owner')})."
        )

    return send_email


# -- the scripted model -----------------------------------------------------------------


def _call(name: str, **args: Any) -> dict[str, Any]:
    # a fresh id per model call: a replayed model call is a new call, asked again
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "name": name, "args": args}


def _since_question(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The last user message's text and the messages after it."""
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].get("role") == "user":
            return str(messages[at].get("content", "")), messages[at + 1 :]
    return "", list(messages)


def _result(after: list[dict[str, Any]], tool: str) -> str | None:
    found = [m for m in after if m.get("role") == "tool" and m.get("name") == tool]
    return str(found[-1].get("content", "")) if found else None


def _money(minor: int, currency: str) -> str:
    return f"{minor / 100:,.2f} {currency}"


def next_answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model's next message, decided from the conversation so far."""
    question, after = _since_question(messages)
    order_id = _ORDER.search(question.upper())
    if order_id is None:
        return {
            "content": "Which order? Give me an id like A-1001, and say whether you "
            "want its total in USD or EUR, or emailed to someone."
        }
    order_text = _result(after, "lookup_order")
    if order_text is None:
        return {
            "content": f"Let me look up order {order_id.group(0)}.",
            "tool_calls": [_call("lookup_order", order_id=order_id.group(0))],
        }
    if order_text.startswith("Error"):
        return {"content": f"I could not find that order. {order_text}"}
    order = json.loads(order_text)
    total = _money(order["total_minor"], order["currency"])
    address = _EMAIL.search(question)
    if address is not None and re.search(r"\b(e-?mail|send|mail)\b", question, re.I):
        sent = _result(after, "send_email")
        if sent is None:
            body = (
                f"Hello,\n\nOrder {order['order_id']} for {order['customer']} totals "
                f"{total}.\n\nBest regards"
            )
            return {
                "content": f"Order {order['order_id']} totals {total}. I will email "
                f"this to {address.group(0)} once you approve.",
                "tool_calls": [
                    _call(
                        "send_email",
                        to=address.group(0),
                        subject=f"Order {order['order_id']} total",
                        body=body,
                    )
                ],
            }
        if sent.startswith(("Sent", "Already sent")):
            return {"content": f"Done. {sent}"}
        return {"content": f"I did not send the email. {sent}"}
    converted_text = _result(after, "convert_currency")
    target = "EUR" if "EUR" in question.upper() else "USD"
    if converted_text is None:
        return {
            "content": f"The order totals {total}; converting it to {target}.",
            "tool_calls": [
                _call(
                    "convert_currency",
                    amount_minor=order["total_minor"],
                    source=order["currency"],
                    target=target,
                )
            ],
        }
    if converted_text.startswith("Error"):
        return {"content": f"Sorry, that did not work. {converted_text}"}
    converted = json.loads(converted_text)
    return {
        "content": f"Order {order['order_id']} for {order['customer']} totals "
        f"{_money(converted['amount_minor'], converted['currency'])} (rate "
        f"{converted['rate']}, from {total})."
    }


def scripted_model(*, token_delay: float = TOKEN_DELAY) -> ScriptedChatModel:
    """The deterministic model: it decides each step from the conversation."""
    return ScriptedChatModel([next_answer], token_delay=token_delay, name="scripted")


# -- the graph --------------------------------------------------------------------------


def _describe(tool_call: dict[str, Any], state: Any, runtime: Any) -> str:
    args = tool_call.get("args") or {}
    return f"Send an email to {args.get('to')}: {args.get('subject')!r}"


_EMAIL_REVIEW: InterruptOnConfig = {
    "allowed_decisions": ["approve", "reject"],
    "description": _describe,
}
"""How ``send_email`` calls are put to the thread's owner before they run."""


def build(
    *,
    model: Any = None,
    checkpointer: Any = None,
    sender: Sender | None = None,
    token_delay: float = TOKEN_DELAY,
) -> Any:
    """The compiled agent (the studio attaches its checkpointer)."""
    if model is None:
        model = _configured_model() or scripted_model(token_delay=token_delay)
    return create_agent(
        model,
        [lookup_order, convert_currency, make_send_email(sender or ledger_sender)],
        system_prompt=SYSTEM_PROMPT,
        middleware=[
            ModelCallLimitMiddleware(
                run_limit=MODEL_CALLS_PER_RUN, exit_behavior="end"
            ),
            HumanInTheLoopMiddleware({"send_email": _EMAIL_REVIEW}),
        ],
        checkpointer=checkpointer,
        name="tool_agent",
    )


# -- governance: the owner answers, the ledger decides ----------------------------------


def shown_calls(payload: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The question as its owner is shown it: the interrupt's action requests plus
    the tool calls they are about (with their ids, read from the last AI message),
    which the decision binds and ``send_email`` checks."""
    requests = [a for a in payload.get("action_requests") or [] if isinstance(a, dict)]
    messages = [message_as_dict(m) for m in values.get("messages") or []]
    last: dict[str, Any] = next(
        (m for m in reversed(messages) if m.get("role") == "assistant"), {}
    )
    calls = list(last.get("tool_calls") or [])
    bound: list[dict[str, Any]] = []
    for request in requests:
        match = next(
            (
                c
                for c in calls
                if c.get("name") == request.get("name")
                and c.get("args") == request.get("args")
            ),
            None,
        )
        if match is None:
            raise ValueError("an action request without its tool call")
        calls.remove(match)
        bound.append({"id": match["id"], "name": match["name"], "args": match["args"]})
    return {**payload, "tool_calls": bound}


def hitl_resume(decision: Mapping[str, Any], seen: Mapping[str, Any]) -> Any:
    """The human-in-the-loop resume for a decision: one answer for every action asked."""
    count = len(seen.get("action_requests") or []) or 1
    if decision["action"] == "approve":
        answer: dict[str, Any] = {"type": "approve"}
    else:
        answer = {
            "type": "reject",
            "message": f"{decision['reviewer']} rejected this: {decision['reason']}",
        }
    return {"decisions": [answer] * count}


GOVERNANCE = Governance(
    console_nodes=frozenset({ASK_NODE}),
    protected_keys=frozenset(),
    request_key="",
    answered_by="owner",
    shown=shown_calls,
    resume_for=hitl_resume,
)
"""The owner answers the agent's question through the decision protocol
(``studio.reviews.governance``); ``send_email`` trusts only the ledger."""


def _configured_model() -> Any:
    try:
        from django.conf import settings  # noqa: PLC0415 - optional outside the studio

        base_url = getattr(settings, "STUDIO_OPENAI_BASE_URL", "")
    except Exception:
        return None
    if not base_url:
        return None
    from studio.demo_graphs.openai_compatible import OpenAICompatibleChatModel  # noqa: PLC0415

    return OpenAICompatibleChatModel(
        base_url=base_url,
        api_key=getattr(settings, "STUDIO_OPENAI_API_KEY", ""),
        model=getattr(settings, "STUDIO_OPENAI_MODEL", "gpt-4o-mini"),
    )
