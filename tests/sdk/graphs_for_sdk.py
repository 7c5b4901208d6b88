"""A graph whose steps take a moment, so a run can be watched, cancelled or kept busy."""

from __future__ import annotations

import operator
import time
from typing import Annotated, TypedDict

from engine.config import get_stream_writer
from engine.graph import END, START, StateGraph


class Steps(TypedDict, total=False):
    n: int
    seen: Annotated[list[int], operator.add]


def step(state: Steps) -> dict[str, object]:
    time.sleep(0.15)
    get_stream_writer()({"progress": state.get("n", 0)})
    return {"n": state.get("n", 0) + 1, "seen": [state.get("n", 0)]}


def again(state: Steps) -> str:
    return "step" if state.get("n", 0) < 6 else END


def slow_steps() -> object:
    graph = StateGraph(Steps)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", again, ["step", END])
    return graph.compile()
