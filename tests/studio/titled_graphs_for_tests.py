"""A graph that declares its thread title as a format string (``studio.titles``)."""

from __future__ import annotations

from typing import Any, TypedDict

from engine.graph import END, START, StateGraph

THREAD_TITLE = "Trip to {city} · {nights} nights · {missing}"


class Trip(TypedDict, total=False):
    city: str
    nights: int
    missing: str


def trip() -> Any:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Trip)
    graph.add_node("book", lambda state: {})
    graph.add_edge(START, "book")
    graph.add_edge("book", END)
    return graph.compile()
