"""Graphs for the durable-run tests, with execution counters that survive a crash.

Each node appends its name to ``<workdir>/<node>.runs`` when it starts, so a
parent process can count executions made by a child it killed. The crash graph
is START -> a -> (b, c) -> d; ``c`` sleeps while ``<workdir>/c.sleep`` exists.
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from engine.graph import END, START, StateGraph
from tests._support.savers import SaverSpec

__all__ = (
    "CrashState",
    "crash_graph",
    "loop_graph",
    "run_crash_graph",
    "run_loop_graph",
    "runs",
)


class CrashState(TypedDict):
    log: Annotated[list[str], operator.add]


def runs(workdir: Path, node: str) -> int:
    """How many times ``node`` started, in any process."""
    path = workdir / f"{node}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _node(workdir: Path, name: str) -> Callable[[Any], dict[str, Any]]:
    def node(state: Any) -> dict[str, Any]:
        fd = os.open(workdir / f"{name}.runs", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            os.write(fd, f"{name}\n".encode())
        finally:
            os.close(fd)
        deadline = time.monotonic() + 60
        while (workdir / f"{name}.sleep").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return {"log": [name]}

    return node


def crash_graph(workdir: Path) -> StateGraph[Any, Any, Any, Any]:
    """START -> a -> (b, c) -> d, each node counted in ``workdir``."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(CrashState)
    for name in "abcd":
        builder.add_node(name, _node(workdir, name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")
    builder.add_edge(["b", "c"], "d")
    return builder


def run_crash_graph(spec: SaverSpec, workdir: str, thread_id: str) -> None:
    """Child process: run the crash graph on its own saver (until it is killed)."""
    with spec.open(setup=False) as saver:
        graph = crash_graph(Path(workdir)).compile(checkpointer=saver)
        graph.invoke(
            {"log": []}, {"configurable": {"thread_id": thread_id}}, durability="sync"
        )


class LoopState(TypedDict):
    log: Annotated[list[int], operator.add]


def loop_graph(steps: int) -> StateGraph[Any, Any, Any, Any]:
    """One node appending ``len(log)`` to ``log`` until it holds ``steps`` items."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LoopState)
    builder.add_node("step", lambda state: {"log": [len(state["log"])]})
    builder.add_edge(START, "step")
    builder.add_conditional_edges(
        "step", lambda state: "step" if len(state["log"]) < steps else END
    )
    return builder


def run_loop_graph(spec: SaverSpec, thread_id: str, steps: int) -> None:
    """Child process: run the loop graph as fast as it can (until it is killed)."""
    with spec.open(setup=False) as saver:
        graph = loop_graph(steps).compile(checkpointer=saver)
        graph.invoke(
            {"log": []},
            {"configurable": {"thread_id": thread_id}, "recursion_limit": steps + 10},
            durability="sync",
        )
