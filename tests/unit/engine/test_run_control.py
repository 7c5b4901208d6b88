"""Run control: ``invoke(..., control=RunControl())`` and a cooperative drain.

As LangGraph 1.2 behaves (checked on 1.2.24): after ``request_drain(reason)``
the run finishes the step in progress, starts no further step and raises
``GraphDrained(reason)``; the steps that finished are saved, so invoking the
thread again with ``None`` carries on. A drain asked during the last step does
not stop anything. Every run has a control (``runtime.control``), made when the
caller gives none; a subgraph obeys its parent's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.errors import GraphDrained
from engine.func import entrypoint, task
from engine.graph import END, START, StateGraph
from engine.runtime import RunControl, Runtime
from tests._support.graphs import LogState, appender, thread


def draining(control: RunControl, label: str, reason: str = "shutdown") -> Any:
    """A node that asks for a drain, then logs ``label``."""

    def node(state: LogState) -> dict[str, Any]:
        control.request_drain(reason)
        return {"log": [label]}

    return node


def led_by(first: Any, *rest: str) -> StateGraph[Any, Any, Any, Any]:
    """START -> first (the given node) -> rest..., each of the rest logging its name."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("first", first)
    builder.add_edge(START, "first")
    previous = "first"
    for name in rest:
        builder.add_node(name, appender(name))
        builder.add_edge(previous, name)
        previous = name
    return builder


def first_drains(control: RunControl, reason: str = "shutdown") -> Any:
    """START -> first (asks for a drain) -> second -> third."""
    return led_by(draining(control, "first", reason), "second", "third")


# -- RunControl and Runtime ---------------------------------------------------------


def test_a_run_control_starts_undrained_and_keeps_the_reason_it_is_given() -> None:
    control = RunControl()
    assert not control.drain_requested
    assert control.drain_reason is None

    control.request_drain()
    assert control.drain_requested
    assert control.drain_reason == "shutdown"

    control.request_drain("sigterm")
    assert control.drain_reason == "sigterm"


def test_runtime_reports_its_controls_drain_and_nothing_without_one() -> None:
    control = RunControl()
    runtime: Runtime[Any] = Runtime(control=control)
    assert not runtime.drain_requested
    control.request_drain("deploy")

    assert runtime.drain_requested
    assert runtime.drain_reason == "deploy"
    assert not Runtime().drain_requested
    assert Runtime().drain_reason is None


def test_merging_runtimes_keeps_the_control() -> None:
    control = RunControl()

    merged = Runtime(control=control).merge(Runtime(context={"user": "ada"}))

    assert merged.control is control
    assert merged.context == {"user": "ada"}


def test_graph_drained_carries_its_reason_and_is_not_an_exception() -> None:
    error = GraphDrained("sigterm")

    assert error.reason == "sigterm"
    assert "sigterm" in str(error)
    assert GraphDrained().reason == "shutdown"
    # like interrupts, a drain is a control-flow signal: `except Exception` in a
    # worker's failure handling does not mistake it for a failed run
    assert not isinstance(error, Exception)


# -- draining a run ---------------------------------------------------------------------


def test_a_drain_asked_in_a_step_stops_the_run_before_the_next_step() -> None:
    control = RunControl()
    graph = first_drains(control).compile()

    with pytest.raises(GraphDrained, match="shutdown") as info:
        graph.invoke({"x": 0, "log": []}, control=control)

    assert info.value.reason == "shutdown"


async def test_an_async_run_drains_the_same_way() -> None:
    control = RunControl()
    ran: list[str] = []

    async def first(state: LogState) -> dict[str, Any]:
        control.request_drain("sigterm")
        return {"log": ["first"]}

    async def second(state: LogState) -> dict[str, Any]:
        ran.append("second")
        return {"log": ["second"]}

    builder = StateGraph(LogState)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")

    with pytest.raises(GraphDrained, match="sigterm"):
        await builder.compile().ainvoke({"x": 0, "log": []}, control=control)
    assert ran == []


def test_a_drain_asked_in_the_last_step_lets_the_run_finish() -> None:
    control = RunControl()
    builder = StateGraph(LogState)
    builder.add_node("only", draining(control, "only"))
    builder.add_edge(START, "only")
    builder.add_edge("only", END)

    result = builder.compile().invoke({"x": 0, "log": []}, control=control)

    assert result == {"x": 0, "log": ["only"]}
    assert control.drain_requested


def test_an_already_drained_control_stops_before_the_first_node_runs() -> None:
    ran: list[str] = []

    def node(state: LogState) -> dict[str, Any]:
        ran.append("node")
        return {"log": ["node"]}

    builder = StateGraph(LogState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    control = RunControl()
    control.request_drain("pre-drained")

    with pytest.raises(GraphDrained, match="pre-drained"):
        builder.compile().invoke({"x": 0, "log": []}, control=control)
    assert ran == []


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_drained_thread_continues_where_it_stopped(durability: Any) -> None:
    control = RunControl()
    graph = first_drains(control, "sigterm").compile(checkpointer=InMemorySaver())
    config = thread("drained")

    with pytest.raises(GraphDrained, match="sigterm"):
        graph.invoke(
            {"x": 0, "log": []}, config, durability=durability, control=control
        )
    assert graph.get_state(config).values["log"] == ["first"]
    assert graph.get_state(config).next == ("second",)

    result = graph.invoke(None, config, durability=durability)

    assert result == {"x": 0, "log": ["first", "second", "third"]}


def test_a_drain_from_another_thread_stops_a_running_graph() -> None:
    started = threading.Event()

    def slow(state: LogState) -> dict[str, Any]:
        started.set()
        time.sleep(0.05)
        return {"log": ["slow"]}

    builder = led_by(slow, "never")
    control = RunControl()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            builder.compile().invoke({"x": 0, "log": []}, control=control)
        except GraphDrained as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(5)
    control.request_drain("sigterm")
    worker.join(10)

    assert [type(e) for e in outcome] == [GraphDrained]
    assert isinstance(outcome[0], GraphDrained) and outcome[0].reason == "sigterm"


def test_stream_yields_the_finished_steps_then_raises_graph_drained() -> None:
    control = RunControl()
    graph = first_drains(control).compile()
    chunks: list[Any] = []

    with pytest.raises(GraphDrained):
        for chunk in graph.stream(
            {"x": 0, "log": []}, stream_mode="updates", control=control
        ):
            chunks.append(chunk)

    assert chunks == [{"first": {"log": ["first"]}}]


async def test_astream_takes_a_control_too() -> None:
    control = RunControl()
    graph = first_drains(control).compile()
    chunks: list[Any] = []

    with pytest.raises(GraphDrained):
        async for chunk in graph.astream(
            {"x": 0, "log": []}, stream_mode="updates", control=control
        ):
            chunks.append(chunk)

    assert chunks == [{"first": {"log": ["first"]}}]


def test_stream_events_takes_a_control_in_every_version() -> None:
    for version in ("v2", "v3"):
        control = RunControl()
        graph = first_drains(control).compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": version}}

        with pytest.raises(GraphDrained):
            events = graph.stream_events(
                {"x": 0, "log": []}, config, version=version, control=control
            )
            for _ in events:
                pass

        assert graph.get_state(config).next == ("second",)


async def test_astream_events_takes_a_control_in_every_version() -> None:
    for version in ("v2", "v3"):
        control = RunControl()
        graph = first_drains(control).compile()

        with pytest.raises(GraphDrained):
            if version == "v3":
                run = await graph.astream_events(
                    {"x": 0, "log": []}, version="v3", control=control
                )
                async for _ in run:
                    pass
            else:
                async for _ in graph.astream_events(
                    {"x": 0, "log": []}, control=control
                ):
                    pass


def test_invoke_with_another_stream_mode_passes_the_control_on() -> None:
    control = RunControl()
    graph = first_drains(control).compile()

    with pytest.raises(GraphDrained):
        graph.invoke({"x": 0, "log": []}, stream_mode="updates", control=control)


def test_a_drain_asked_in_a_subgraph_stops_the_parent_and_both_continue() -> None:
    control = RunControl()
    child = led_by(draining(control, "child_first", "sigterm"), "child_second")
    parent = StateGraph(LogState)
    parent.add_node("child", child.compile(checkpointer=True))
    parent.add_node("after", appender("after"))
    parent.add_edge(START, "child")
    parent.add_edge("child", "after")
    graph = parent.compile(checkpointer=InMemorySaver())
    config = thread("nested")

    with pytest.raises(GraphDrained, match="sigterm"):
        graph.invoke({"x": 0, "log": []}, config, control=control)

    result = graph.invoke(None, config)
    assert result["log"] == ["child_first", "child_second", "after"]


def test_a_node_finds_the_runs_control_in_its_runtime() -> None:
    seen: list[Any] = []

    def node(state: LogState, runtime: Runtime) -> dict[str, Any]:
        seen.append(runtime.control)
        return {"log": ["node"]}

    builder = StateGraph(LogState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile()
    control = RunControl()

    graph.invoke({"x": 0, "log": []}, control=control)
    graph.invoke({"x": 0, "log": []})

    assert seen[0] is control
    assert isinstance(seen[1], RunControl) and seen[1] is not control
    assert not seen[1].drain_requested


def test_a_node_can_drain_its_own_run_through_the_runtime() -> None:
    def stop_after_me(state: LogState, runtime: Runtime) -> dict[str, Any]:
        assert runtime.control is not None
        runtime.control.request_drain("done for today")
        return {"log": ["stop"]}

    builder = led_by(stop_after_me, "never")

    with pytest.raises(GraphDrained, match="done for today"):
        builder.compile().invoke({"x": 0, "log": []})


def test_a_drain_lets_task_calls_already_made_in_the_step_run() -> None:
    @task
    def child(x: int) -> int:
        return x + 1

    control = RunControl()

    @entrypoint(checkpointer=InMemorySaver())
    def workflow(x: int) -> int:
        control.request_drain()
        return int(child(x).result())

    assert workflow.invoke(1, thread("calls"), control=control) == 2
    assert control.drain_requested


def test_an_async_drain_waits_for_the_running_node() -> None:
    async def scenario() -> list[str]:
        started = asyncio.Event()
        log: list[str] = []

        async def slow(state: LogState) -> dict[str, Any]:
            started.set()
            await asyncio.sleep(0.05)
            log.append("slow finished")
            return {"log": ["slow"]}

        builder = led_by(slow, "never")
        control = RunControl()
        run = asyncio.create_task(
            builder.compile().ainvoke({"x": 0, "log": []}, control=control)
        )
        await started.wait()
        control.request_drain("sigterm")
        with pytest.raises(GraphDrained):
            await run
        return log

    assert asyncio.run(scenario()) == ["slow finished"]
