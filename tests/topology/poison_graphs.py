"""A graph whose one node kills the worker process that runs it, every time.

``start`` -> ``work``: ``work`` sends SIGKILL to its own process when the run's
``label`` is ``poison`` (a stand-in for a segfault or an out-of-memory kill that
a node causes whenever it runs), else it sleeps a moment and returns.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, TypedDict

from engine.graph import END, START, StateGraph

__all__ = ("build",)


class State(TypedDict, total=False):
    label: str
    done: str


def start(state: State) -> dict[str, Any]:
    return {}


def work(state: State) -> dict[str, Any]:
    if state.get("label") == "poison":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return {"done": state.get("label", "")}


def build() -> Any:
    graph = StateGraph(State)
    graph.add_node("start", start)
    graph.add_node("work", work)
    graph.add_edge(START, "start")
    graph.add_edge("start", "work")
    graph.add_edge("work", END)
    return graph.compile()
