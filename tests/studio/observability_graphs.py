"""A graph that does what operators must see: log from a node, retry, pause, fail.

``observed``: ``plan`` (logs from the node) -> ``flaky`` (fails its first
attempt with ``ConnectionError``, retried once) -> ``review`` (``interrupt``)
-> ``finish`` (raises ``ValueError`` when the input said ``fail``).
"""

from __future__ import annotations

import logging
import operator
from typing import Annotated, Any, TypedDict

from engine.graph import END, START, StateGraph
from engine.runtime import get_runtime
from engine.types import RetryPolicy, interrupt

node_log = logging.getLogger("tests.node")


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    fail: bool


def observed() -> Any:
    def plan(state: State) -> dict[str, Any]:
        node_log.info("planning")
        return {"log": ["plan"]}

    def flaky(state: State) -> dict[str, Any]:
        info = get_runtime().execution_info
        if info is not None and info.node_attempt == 1:
            raise ConnectionError("the first attempt fails on purpose")
        return {"log": ["flaky"]}

    def review(state: State) -> dict[str, Any]:
        answer = interrupt("go on?")
        return {"log": [f"review:{answer}"]}

    def finish(state: State) -> dict[str, Any]:
        if state.get("fail"):
            raise ValueError("the last node failed on purpose")
        return {"log": ["finish"]}

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node(
        "flaky",
        flaky,
        retry_policy=RetryPolicy(
            max_attempts=2, initial_interval=0.0, jitter=False, retry_on=ConnectionError
        ),
    )
    graph.add_node("review", review)
    graph.add_node("finish", finish)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "flaky")
    graph.add_edge("flaky", "review")
    graph.add_edge("review", "finish")
    graph.add_edge("finish", END)
    return graph.compile()
