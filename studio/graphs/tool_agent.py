"""A small tool-calling agent: ``create_react_agent`` with a scripted model by default.

The default model is deterministic (``engine.prebuilt.ScriptedChatModel``): it
looks up an order, converts its total to another currency, then answers, so the
demo always behaves the same and needs no network. Set
``STUDIO_OPENAI_BASE_URL`` (and ``STUDIO_OPENAI_API_KEY``, ``STUDIO_OPENAI_MODEL``)
to drive it with any OpenAI-compatible chat completions endpoint instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.prebuilt import ScriptedChatModel, ToolNode, create_react_agent

__all__ = ("build", "scripted_model")

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


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by id (e.g. A-1001)."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise KeyError(f"no order {order_id!r}")
    return order


def convert_currency(amount_minor: int, source: str, target: str) -> dict[str, Any]:
    """Convert an amount in minor units between currencies (CNY, USD, EUR)."""
    rate = RATES.get((source.upper(), target.upper()))
    if rate is None:
        raise ValueError(f"no rate for {source}->{target}")
    return {
        "amount_minor": round(amount_minor * rate),
        "currency": target.upper(),
        "rate": rate,
    }


def _last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def _ask_order(messages: list[dict[str, Any]]) -> dict[str, Any]:
    question = _last_user(messages)
    match = re.search(r"[A-Z]-\d{4}", question.upper())
    if match is None:
        return {"content": "Which order? Give me an id like A-1001."}
    return {
        "content": "",
        "tool_calls": [{"name": "lookup_order", "args": {"order_id": match.group(0)}}],
    }


def _convert(messages: list[dict[str, Any]]) -> dict[str, Any]:
    last = messages[-1]
    if last.get("role") != "tool" or str(last.get("content", "")).startswith("Error"):
        return {"content": f"I could not find that order: {last.get('content')}"}
    order = json.loads(last["content"])
    target = "EUR" if "EUR" in _last_user(messages).upper() else "USD"
    return {
        "content": "",
        "tool_calls": [
            {
                "name": "convert_currency",
                "args": {
                    "amount_minor": order["total_minor"],
                    "source": order["currency"],
                    "target": target,
                },
            }
        ],
    }


def _answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    last = messages[-1]
    if last.get("role") != "tool" or str(last.get("content", "")).startswith("Error"):
        return {"content": f"Sorry, that did not work: {last.get('content')}"}
    converted = json.loads(last["content"])
    amount = converted["amount_minor"] / 100
    return {
        "content": f"That order totals {amount:,.2f} {converted['currency']} (rate {converted['rate']})."
    }


def scripted_model() -> ScriptedChatModel:
    """The deterministic model: look up, convert, answer."""
    return ScriptedChatModel([_ask_order, _convert, _answer])


def build(*, model: Any = None, checkpointer: Any = None) -> Any:
    if model is None:
        model = _configured_model() or scripted_model()
    # a failing tool (an unknown order) is answered to the model, not a failed run
    tools = ToolNode([lookup_order, convert_currency], handle_tool_errors=True)
    return create_react_agent(
        model,
        tools,
        prompt="You answer questions about orders. Use the tools.",
        checkpointer=checkpointer,
        name="tool_agent",
    )


def _configured_model() -> Any:
    try:
        from django.conf import settings  # noqa: PLC0415 - optional outside the studio

        base_url = getattr(settings, "STUDIO_OPENAI_BASE_URL", "")
    except Exception:
        return None
    if not base_url:
        return None
    from studio.graphs.openai_compatible import OpenAICompatibleChatModel  # noqa: PLC0415

    return OpenAICompatibleChatModel(
        base_url=base_url,
        api_key=getattr(settings, "STUDIO_OPENAI_API_KEY", ""),
        model=getattr(settings, "STUDIO_OPENAI_MODEL", "gpt-4o-mini"),
    )
