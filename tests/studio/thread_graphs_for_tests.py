"""Small real graphs for the thread pages: every reducer kind, an interrupt, a failure.

``notes``: START -> draft -> review (interrupts) -> publish. Its state has a
last-value string and int, an append list (``operator.add``), chat messages
(``add_messages``) and a dict merged by a custom reducer, so one run exercises
every kind of diff. ``draft`` writes whatever ``title`` the input had into
``log`` too, so an input with markup ends up in several places of the page.

``ledger``: a pydantic state whose validator refuses a negative balance.
``broken``: fails in its second node.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, field_validator

from engine.graph import END, START, StateGraph
from engine.graph.message import add_messages
from engine.types import interrupt


def merge_tags(
    current: dict[str, Any] | None, update: dict[str, Any]
) -> dict[str, Any]:
    return {**(current or {}), **update}


class NotesState(TypedDict, total=False):
    title: str
    count: int
    done: bool
    log: Annotated[list[str], operator.add]
    messages: Annotated[list[Any], add_messages]
    tags: Annotated[dict[str, Any], merge_tags]
    answer: Any


def draft(state: NotesState) -> dict[str, Any]:
    return {
        "count": state.get("count", 0) + 1,
        "log": [f"draft:{state.get('title', '')}"],
        "messages": [{"id": "m1", "role": "user", "content": state.get("title", "")}],
        "tags": {"stage": {"name": "draft", "by": "draft"}},
    }


def review(state: NotesState) -> dict[str, Any]:
    answer = interrupt({"question": "Publish?", "title": state.get("title", "")})
    return {"answer": answer, "log": ["review"]}


def publish(state: NotesState) -> dict[str, Any]:
    return {
        "done": True,
        "log": ["publish"],
        "messages": [
            {"id": "m1", "role": "user", "content": "edited"},
            {"id": "m2", "role": "assistant", "content": "published\n" + "x" * 200},
        ],
        "tags": {"stage": {"name": "published", "by": "publish"}},
    }


def notes(*, checkpointer: Any = None) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(NotesState)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=checkpointer, name="notes")


class LedgerState(BaseModel):
    balance: int = 0
    memo: str = ""

    @field_validator("balance")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError("the balance cannot go below zero")
        return value


def credit(state: LedgerState) -> dict[str, Any]:
    return {"balance": state.balance + 10, "memo": "credited"}


def close(state: LedgerState) -> dict[str, Any]:
    return {"memo": f"closed at {state.balance}"}


def ledger(*, checkpointer: Any = None) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LedgerState)
    builder.add_node("credit", credit)
    builder.add_node("close", close)
    builder.add_edge(START, "credit")
    builder.add_edge("credit", "close")
    builder.add_edge("close", END)
    return builder.compile(checkpointer=checkpointer, name="ledger")


class BrokenState(TypedDict, total=False):
    n: int


def first(state: BrokenState) -> dict[str, Any]:
    return {"n": 1}


def second(state: BrokenState) -> dict[str, Any]:
    raise ValueError("second node exploded")


def broken(*, checkpointer: Any = None) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(BrokenState)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    return builder.compile(checkpointer=checkpointer, name="broken")


class CounterState(TypedDict):
    n: int
    target: int
    log: Annotated[list[str], operator.add]


def tick(state: CounterState) -> dict[str, Any]:
    return {"n": state["n"] + 1, "log": [f"tick {state['n'] + 1}"]}


def counter(*, checkpointer: Any = None) -> Any:
    """``tick`` until ``n`` reaches ``target``, one string appended a step: a long history."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(CounterState)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges(
        "tick", lambda s: "tick" if s["n"] < s["target"] else END, ["tick", END]
    )
    return builder.compile(checkpointer=checkpointer, name="counter")
