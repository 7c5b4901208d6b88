"""A run frees what it made by reference counting alone, interrupts included.

Objects caught in a reference cycle wait for the garbage collector, holding the
run's state (channels, checkpoints, frames) meanwhile: memory that grows with
each invoke until a collection. An ``interrupt()`` used to leave one per invoke
(the signal's traceback held the node's frames, and they the signal).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.graph import END, START, StateGraph
from engine.types import Command, interrupt


class AskState(TypedDict, total=False):
    n: int
    answer: Any


def _ask(state: AskState) -> dict[str, Any]:
    answer = interrupt({"question": state["n"]})
    return {"n": state["n"] + 1, "answer": answer}


def _ask_graph() -> Any:
    builder = StateGraph(AskState)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.fixture
def cycles() -> Iterator[Callable[[Callable[[], Any]], list[str]]]:
    """Runs a call and names the objects it left in reference cycles."""

    def left_by(call: Callable[[], Any]) -> list[str]:
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            call()
            gc.collect()
            return sorted({type(o).__qualname__ for o in gc.garbage})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    yield left_by


def test_an_interrupted_invoke_and_its_resume_leave_no_cycle(cycles) -> None:
    graph = _ask_graph()
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": 0}, config)  # warm: first-use caches are not garbage

    assert (
        cycles(lambda: graph.invoke({"n": 0}, {"configurable": {"thread_id": "u"}}))
        == []
    )
    assert cycles(lambda: graph.invoke(Command(resume="yes"), config)) == []
    assert graph.get_state(config).values == {"n": 1, "answer": "yes"}


def test_an_interrupted_ainvoke_leaves_no_cycle(cycles) -> None:
    graph = _ask_graph()
    config = {"configurable": {"thread_id": "t"}}
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(graph.ainvoke({"n": 0}, config))

        found = cycles(
            lambda: loop.run_until_complete(
                graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "u"}})
            )
        )
    finally:
        loop.close()
    assert "GraphInterrupt" not in found and "PregelLoop" not in found, found
