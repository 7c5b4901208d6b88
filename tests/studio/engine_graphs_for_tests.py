"""Small real engine graphs for studio tests (runs, worker, pages)."""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, TypedDict

from engine.graph import END, START, StateGraph

calls: dict[str, int] = {"slow": 0}


class LogState(TypedDict, total=False):
    text: str
    log: Annotated[list[str], operator.add]


def failing() -> Any:
    def boom(state: LogState) -> dict[str, Any]:
        raise ValueError("the node failed on purpose")

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    graph.add_node("boom", boom)
    graph.add_edge(START, "boom")
    return graph.compile()


def slow() -> Any:
    def first(state: LogState) -> dict[str, Any]:
        calls["slow"] += 1
        return {"log": ["first"]}

    def wait(state: LogState) -> dict[str, Any]:
        time.sleep(0.5)
        return {"log": ["waited"]}

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    graph.add_node("first", first)
    graph.add_node("wait", wait)
    graph.add_edge(START, "first")
    graph.add_edge("first", "wait")
    graph.add_edge("wait", END)
    return graph.compile()


drain_calls: dict[str, int] = {"ask": 0, "first": 0, "second": 0}
on_first: list[Any] = []
"""Callables the ``draining`` graph's ``first`` node calls (a test's drain request)."""


def draining() -> Any:
    """``ask`` (an interrupt) -> ``first`` (calls ``on_first``) -> ``second``."""
    from engine.types import interrupt  # noqa: PLC0415 - keeps the module's imports small

    def ask(state: LogState) -> dict[str, Any]:
        drain_calls["ask"] += 1
        return {"log": [f"answer:{interrupt('go on?')}"]}

    def first(state: LogState) -> dict[str, Any]:
        drain_calls["first"] += 1
        for hook in on_first:
            hook()
        return {"log": ["first"]}

    def second(state: LogState) -> dict[str, Any]:
        drain_calls["second"] += 1
        return {"log": ["second"]}

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    graph.add_node("ask", ask)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph.compile()
