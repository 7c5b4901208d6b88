"""Graph lifecycle callbacks fired by real runs, on every checkpointer backend.

The expected sequences are LangGraph 1.2's, observed with the same graphs: a
root run that stops reports ``on_interrupt`` (status ``pending`` for
``interrupt()``, the breakpoint's name for a static breakpoint), every run that
continues a saved checkpoint reports ``on_resume`` (subgraphs too, with their
namespace), and a nested graph's pause is reported by the root only.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, TypedDict

from engine.callbacks import GraphCallbackHandler, GraphInterruptEvent, GraphResumeEvent
from engine.graph import END, START, StateGraph
from engine.types import Command, interrupt


class State(TypedDict):
    x: int
    answer: str


class Recorder(GraphCallbackHandler):
    def __init__(self) -> None:
        self.events: list[GraphInterruptEvent | GraphResumeEvent] = []

    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        self.events.append(event)

    def on_resume(self, event: GraphResumeEvent) -> None:
        self.events.append(event)


class AsyncRecorder(GraphCallbackHandler):
    def __init__(self) -> None:
        self.events: list[GraphInterruptEvent | GraphResumeEvent] = []

    async def on_interrupt(self, event: GraphInterruptEvent) -> None:
        await asyncio.sleep(0)
        self.events.append(event)

    async def on_resume(self, event: GraphResumeEvent) -> None:
        self.events.append(event)


def builder() -> StateGraph[Any, Any, Any, Any]:
    def inc(state: State) -> dict[str, Any]:
        return {"x": state["x"] + 1}

    def ask(state: State) -> dict[str, Any]:
        return {"answer": interrupt("approve?")}

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    graph.add_node("inc", inc)
    graph.add_node("ask", ask)
    graph.add_edge(START, "inc")
    graph.add_edge("inc", "ask")
    graph.add_edge("ask", END)
    return graph


def summary(events: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, GraphInterruptEvent):
            out.append(
                (
                    "interrupt",
                    e.status,
                    e.checkpoint_ns,
                    [i.value for i in e.interrupts],
                )
            )
        else:
            out.append(("resume", e.status, e.checkpoint_ns))
    return out


def head_id(graph: Any, config: dict[str, Any]) -> str:
    return str(graph.get_state(config).config["configurable"]["checkpoint_id"])


def test_breakpoint_then_interrupt_then_resume(saver) -> None:
    graph = builder().compile(checkpointer=saver, interrupt_before=["ask"])
    recorder = Recorder()
    run_id = uuid.UUID(int=7)
    config: dict[str, Any] = {
        "configurable": {"thread_id": "t"},
        "callbacks": [recorder],
    }

    graph.invoke({"x": 1, "answer": ""}, {**config, "run_id": run_id})
    paused_at = head_id(graph, config)
    graph.invoke(None, config)
    graph.invoke(Command(resume="yes"), config)

    assert summary(recorder.events) == [
        ("interrupt", "interrupt_before", (), []),
        ("resume", "pending", ()),
        ("interrupt", "pending", (), ["approve?"]),
        ("resume", "pending", ()),
    ]
    # all four happen at the checkpoint saved after "inc"
    assert {e.checkpoint_id for e in recorder.events} == {paused_at}
    assert recorder.events[0].run_id == run_id
    later = {e.run_id for e in recorder.events[1:3]}
    assert len(later) == 1 and run_id not in later  # one fresh id for the second run
    assert recorder.events[3].run_id not in later | {run_id}


def test_interrupt_after_reports_its_status(saver) -> None:
    graph = builder().compile(checkpointer=saver, interrupt_after=["inc"])
    recorder = Recorder()
    config: dict[str, Any] = {
        "configurable": {"thread_id": "t"},
        "callbacks": [recorder],
    }

    graph.invoke({"x": 1, "answer": ""}, config)

    assert summary(recorder.events) == [("interrupt", "interrupt_after", (), [])]
    assert recorder.events[0].checkpoint_id == head_id(graph, config)


def test_subgraph_pause_is_reported_by_the_root_and_both_resume(saver) -> None:
    parent: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    parent.add_node("sub", builder().compile())
    parent.add_edge(START, "sub")
    graph = parent.compile(checkpointer=saver)
    recorder = Recorder()
    config: dict[str, Any] = {
        "configurable": {"thread_id": "t"},
        "callbacks": [recorder],
    }

    graph.invoke({"x": 1, "answer": ""}, config)
    assert summary(recorder.events) == [("interrupt", "pending", (), ["approve?"])]
    recorder.events.clear()

    graph.invoke(Command(resume="ok"), config)

    root, sub = recorder.events
    assert summary([root]) == [("resume", "pending", ())]
    assert isinstance(sub, GraphResumeEvent)
    assert len(sub.checkpoint_ns) == 1 and sub.checkpoint_ns[0].startswith("sub:")
    assert sub.checkpoint_id != root.checkpoint_id  # the subgraph's own checkpoint


def test_finished_failed_and_plain_runs_report_nothing(saver) -> None:
    graph = builder().compile(checkpointer=saver)
    recorder = Recorder()
    config: dict[str, Any] = {
        "configurable": {"thread_id": "t"},
        "callbacks": [recorder],
    }

    graph.invoke({"x": 1, "answer": ""}, config)
    graph.invoke(Command(resume="a"), config)
    recorder.events.clear()
    graph.invoke({"x": 1, "answer": ""}, {"configurable": {"thread_id": "other"}})
    assert recorder.events == []  # no callbacks in that run's config

    # a thread that finished still "resumes" on invoke(None), as in LangGraph
    graph.invoke(None, config)
    assert summary(recorder.events) == [("resume", "pending", ())]


async def test_async_runs_await_async_handlers(asaver) -> None:
    graph = builder().compile(checkpointer=asaver)
    recorder = AsyncRecorder()
    config: dict[str, Any] = {
        "configurable": {"thread_id": "t"},
        "callbacks": [recorder],
    }

    await graph.ainvoke({"x": 1, "answer": ""}, config)
    chunks = [c async for c in graph.astream(Command(resume="z"), config)]

    assert chunks  # the resumed run streamed as usual
    assert summary(recorder.events) == [
        ("interrupt", "pending", (), ["approve?"]),
        ("resume", "pending", ()),
    ]


def test_stream_reports_the_pause_before_its_final_values_chunk(saver) -> None:
    graph = builder().compile(checkpointer=saver)
    seen: list[str] = []

    class Marker(GraphCallbackHandler):
        def on_interrupt(self, event: GraphInterruptEvent) -> None:
            seen.append("on_interrupt")

    config: dict[str, Any] = {
        "configurable": {"thread_id": "t"},
        "callbacks": [Marker()],
    }
    for chunk in graph.stream({"x": 1, "answer": ""}, config, stream_mode="values"):
        seen.append("interrupt-values" if "__interrupt__" in chunk else "values")

    assert seen[-2:] == ["on_interrupt", "interrupt-values"]
