"""The graph the outage tests run: ``tick`` again and again, a custom event each time.

``{"target": n, "pause": s}`` runs ``tick`` n times, each sleeping ``pause``
seconds, writing ``{"tick": i}`` to the custom stream and adding one to ``n``:
a run that lasts about ``n * pause`` seconds and writes an event at every step.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from engine.config import get_stream_writer
from engine.graph import END, START, StateGraph

__all__ = ("build",)


class State(TypedDict, total=False):
    n: int
    target: int
    pause: float


def tick(state: State) -> dict[str, int]:
    time.sleep(state.get("pause", 0.1))
    n = state.get("n", 0) + 1
    get_stream_writer()({"tick": n})
    return {"n": n}


def again(state: State) -> str:
    return "tick" if state.get("n", 0) < state.get("target", 1) else END


def build() -> Any:
    graph = StateGraph(State)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", again, ["tick", END])
    return graph.compile()
