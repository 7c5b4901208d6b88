"""Graphs the browser tests' live server registers besides the demo graphs.

``gate`` keeps the (one, embedded) worker busy until a file exists, so runs
queued after it wait: a test can open their page before they start
(``LiveServer.worker_held``). ``gate_twice`` is the gate with a second step
after it (a run stopped during the first has something left to continue).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from engine.graph import END, START, StateGraph

__all__ = ("gate", "gate_twice")

GATE_LIMIT = 60.0
"""Seconds the gate waits at most (a test that never releases it still ends)."""


class GateState(TypedDict, total=False):
    release: str
    waited: float


def _wait(state: GateState) -> dict[str, Any]:
    started = time.monotonic()
    release = Path(state["release"])
    while not release.exists() and time.monotonic() - started < GATE_LIMIT:
        time.sleep(0.02)
    return {"waited": time.monotonic() - started}


def _gate(*, then_after: bool) -> StateGraph[Any, Any, Any, Any]:
    """``wait``, then (``then_after``) ``after``, then the end."""
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(GateState)
    graph.add_node("wait", _wait)
    graph.add_edge(START, "wait")
    if then_after:
        graph.add_node("after", _after)
        graph.add_edge("wait", "after")
    graph.add_edge("after" if then_after else "wait", END)
    return graph


def _after(state: GateState) -> dict[str, Any]:
    return {"waited": state.get("waited", 0.0)}


def gate() -> Any:
    return _gate(then_after=False).compile(name="gate")


def gate_twice() -> Any:
    return _gate(then_after=True).compile(name="gate_twice")
