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
