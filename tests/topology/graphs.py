"""The graph the scale-out test runs: a few steps of 0.1-0.3 s, each execution recorded.

``prepare`` -> ``left`` + ``right`` (in parallel) -> ``merge``, twice, -> ``finish``:
six steps, eight tasks, about a second a run. Every task appends a ``start``
line when it begins and an ``end`` line just before it returns to the file named
by ``TOPOLOGY_TASK_LOG`` (``<thread> <node> <step> <phase> <pid>``, one
``O_APPEND`` write each, so lines from any number of processes never mix). A
task the engine runs again after a crash shows up as a second ``start`` of the
same (thread, node, step), and the pid says which worker ran it.
"""

from __future__ import annotations

import operator
import os
import time
from typing import Annotated, Any, TypedDict

from engine.config import get_config, get_stream_writer
from engine.graph import END, START, StateGraph

__all__ = ("NODES", "ROUNDS", "build", "expected_trail", "read_task_log")

ROUNDS = 2
SECONDS = {"prepare": 0.1, "left": 0.2, "right": 0.3, "merge": 0.15, "finish": 0.1}
NODES = tuple(SECONDS)


class State(TypedDict, total=False):
    label: str
    rounds: int
    trail: Annotated[list[str], operator.add]


def _record(phase: str) -> tuple[str, int]:
    config = get_config()
    node = str(config["metadata"]["langgraph_node"])
    step = int(config["metadata"]["langgraph_step"])
    thread = str(config["configurable"]["thread_id"])
    path = os.environ.get("TOPOLOGY_TASK_LOG")
    if path:
        line = f"{thread} {node} {step} {phase} {os.getpid()}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    return node, step


def _task(state: State, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    node, step = _record("start")
    time.sleep(SECONDS[node])
    get_stream_writer()({"node": node, "step": step})
    _record("end")
    return {"trail": [f"{node}@{step}"], **(extra or {})}


def prepare(state: State) -> dict[str, Any]:
    return _task(state, {"rounds": 0})


def left(state: State) -> dict[str, Any]:
    return _task(state)


def right(state: State) -> dict[str, Any]:
    return _task(state)


def merge(state: State) -> dict[str, Any]:
    return _task(state, {"rounds": state.get("rounds", 0) + 1})


def finish(state: State) -> dict[str, Any]:
    return _task(state)


def _again(state: State) -> list[str]:
    return ["left", "right"] if state.get("rounds", 0) < ROUNDS else ["finish"]


def build() -> Any:
    graph = StateGraph(State)
    for name, fn in (
        ("prepare", prepare),
        ("left", left),
        ("right", right),
        ("merge", merge),
        ("finish", finish),
    ):
        graph.add_node(name, fn)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "left")
    graph.add_edge("prepare", "right")
    graph.add_edge(["left", "right"], "merge")
    graph.add_conditional_edges("merge", _again, ["left", "right", "finish"])
    graph.add_edge("finish", END)
    return graph.compile()


def expected_trail() -> list[str]:
    """The trail of a run, sorted: each task once, at its step."""
    trail = ["prepare@1"]
    step = 2
    for _ in range(ROUNDS):
        trail += [f"left@{step}", f"right@{step}", f"merge@{step + 1}"]
        step += 2
    trail.append(f"finish@{step}")
    return sorted(trail)


def read_task_log(path: str | os.PathLike[str]) -> list[tuple[str, str, int, str, int]]:
    """``(thread, node, step, phase, pid)`` per line, in the order they were written."""
    rows = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            thread, node, step, phase, pid = line.split()
            rows.append((thread, node, int(step), phase, int(pid)))
    return rows
