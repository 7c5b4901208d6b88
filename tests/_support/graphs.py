"""Tiny graphs shared by the engine tests (unit and integration).

Every builder returns a fresh, uncompiled ``StateGraph`` (or a compiled graph where
the name says so), so each test compiles with the options it needs. The expected
outputs in the tests were learned by running the same graphs on LangGraph 1.2.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

from engine.graph import START, StateGraph
from engine.types import interrupt


class LogState(TypedDict):
    """A plain LastValue key and an append-only reducer key."""

    x: int
    log: Annotated[list[Any], operator.add]


def thread(thread_id: str = "t1") -> dict[str, Any]:
    """The config of one thread."""
    return {"configurable": {"thread_id": thread_id}}


def appender(label: Any) -> Callable[[Any], dict[str, Any]]:
    """A node that appends ``label`` to ``log``."""

    def node(state: Any) -> dict[str, Any]:
        return {"log": [label]}

    return node


def chain(names: Sequence[str]) -> StateGraph[Any, Any, Any, Any]:
    """START -> names[0] -> ... -> names[-1]; each node logs its name."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in names:
        builder.add_node(name, appender(name))
    builder.add_edge(START, names[0])
    for src, dst in zip(names, names[1:], strict=False):
        builder.add_edge(src, dst)
    return builder


def asking(label: str, question: Any) -> Callable[[Any], dict[str, Any]]:
    """A node that logs ``label:<answer>`` after asking ``question``."""

    def node(state: Any) -> dict[str, Any]:
        answer = interrupt(question)
        return {"log": [f"{label}:{answer}"]}

    return node


def interrupt_chain() -> StateGraph[Any, Any, Any, Any]:
    """START -> pre -> ask (interrupts) -> post."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("pre", appender("pre"))
    builder.add_node("ask", asking("ans", {"q": "name?"}))
    builder.add_node("post", appender("post"))
    builder.add_edge(START, "pre")
    builder.add_edge("pre", "ask")
    builder.add_edge("ask", "post")
    return builder


def parallel(
    *branches: tuple[str, Callable[[Any], Any]],
) -> StateGraph[Any, Any, Any, Any]:
    """Each (name, node) runs in the first step, in parallel."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name, node in branches:
        builder.add_node(name, node)
        builder.add_edge(START, name)
    return builder


def without_interrupt(output: dict[str, Any]) -> dict[str, Any]:
    """``output`` minus the ``__interrupt__`` key."""
    return {k: v for k, v in output.items() if k != "__interrupt__"}


def interrupt_values(interrupts: Sequence[Any]) -> list[Any]:
    """The values of interrupts (ids differ from LangGraph's by design)."""
    return [item.value for item in interrupts]
