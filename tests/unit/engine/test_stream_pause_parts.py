"""Stream parts around failures and pauses, and ``output_keys``, as LangGraph 1.2.24 gives them.

Observed by running the same graphs on LangGraph: a failed task's ``tasks``
result carries the exception itself; a task paused by ``interrupt()`` is
reported after the pause's ``updates`` and ``values`` parts, and a paused
subgraph streams its own final ``values`` part (with the interrupts) before its
task result, then the parent does the same; interrupts in task payloads are
``{"value", "id", "response_schema"}``. ``invoke`` returns None when no output
key was written in the run, and ``stream(output_keys=...)`` narrows ``updates``
parts to those keys.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.func import entrypoint, task
from engine.graph import START, StateGraph
from engine.types import Command, GraphOutput, interrupt


class S(TypedDict, total=False):
    a: int
    b: int


class Out(TypedDict, total=False):
    b: int


def graph_of(*nodes: Any, output_schema: Any = None) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(S, output_schema=output_schema)
    previous = START
    for node in nodes:
        name = node.__name__ if callable(node) and not hasattr(node, "nodes") else "sub"
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    return builder


def results(parts: list[Any]) -> list[Any]:
    return [p for p in parts if p[0] == "tasks" and "result" in p[1]]


def test_a_failed_tasks_result_carries_the_exception() -> None:
    def bad(state: S) -> dict[str, Any]:
        raise ValueError("bad")

    parts: list[Any] = []
    with pytest.raises(ValueError, match="bad"):
        for part in (
            graph_of(bad).compile().stream({"a": 1}, stream_mode=["tasks", "debug"])
        ):
            parts.append(part)

    ((_, result),) = results(parts)
    debug = [
        p[1]["payload"]
        for p in parts
        if p[0] == "debug" and p[1]["type"] == "task_result"
    ]
    assert isinstance(result["error"], ValueError) and str(result["error"]) == "bad"
    assert result["result"] == {} and result["interrupts"] == []
    assert debug == [result]


def test_a_failed_calls_result_carries_the_exception_and_no_result() -> None:
    @task
    def fails(x: int) -> int:
        raise KeyError("k")

    @entrypoint()
    def main(x: int) -> int:
        return fails(x).result()

    parts: list[Any] = []
    with pytest.raises(KeyError):
        for part in main.stream(1, stream_mode="tasks"):
            parts.append(part)

    ended = [p for p in parts if "result" in p]
    assert [p["name"] for p in ended] == ["fails", "main"]
    assert all(isinstance(p["error"], KeyError) for p in ended)
    assert [p["result"] for p in ended] == [{}, {}]


def asker(state: S) -> dict[str, Any]:
    return {"a": interrupt("q", response_schema={"type": "string"})}


def test_a_pause_streams_updates_values_then_the_task_result() -> None:
    graph = graph_of(asker).compile(checkpointer=InMemorySaver())

    parts = list(
        graph.stream(
            {"a": 1},
            {"configurable": {"thread_id": "t"}},
            stream_mode=["values", "updates", "tasks"],
        )
    )

    modes = [mode for mode, _ in parts]
    assert modes == ["values", "tasks", "updates", "values", "tasks"]
    (pending,) = parts[3][1]["__interrupt__"]
    assert parts[4][1]["interrupts"] == [
        {"value": "q", "id": pending.id, "response_schema": {"type": "string"}}
    ]
    assert list(parts[4][1]["interrupts"][0]) == ["value", "id", "response_schema"]


def test_a_paused_subgraph_streams_its_own_final_values() -> None:
    def pre(state: S) -> dict[str, Any]:
        return {"a": 2}

    sub = graph_of(asker).compile()
    graph = graph_of(pre, sub).compile(checkpointer=InMemorySaver())

    parts = list(
        graph.stream(
            {"a": 1},
            {"configurable": {"thread_id": "t"}},
            stream_mode=["values", "updates", "tasks"],
            subgraphs=True,
        )
    )

    tail = [(len(ns), mode, sorted(data)) for ns, mode, data in parts[-6:]]
    assert tail == [
        (1, "updates", ["__interrupt__"]),
        (1, "values", ["__interrupt__", "a"]),
        (1, "tasks", ["error", "id", "interrupts", "name", "result"]),
        (0, "updates", ["__interrupt__"]),
        (0, "values", ["__interrupt__", "a"]),
        (0, "tasks", ["error", "id", "interrupts", "name", "result"]),
    ]
    assert parts[-5][2]["a"] == 2
    assert parts[-1][2]["name"] == "sub"


def test_a_paused_subgraphs_values_stay_out_without_subgraphs() -> None:
    sub = graph_of(asker).compile()
    graph = graph_of(sub).compile(checkpointer=InMemorySaver())

    parts = list(
        graph.stream(
            {"a": 1}, {"configurable": {"thread_id": "t"}}, stream_mode="values"
        )
    )

    assert [sorted(p) for p in parts] == [["a"], ["__interrupt__", "a"]]


# -- output keys -------------------------------------------------------------------


def only_a(state: S) -> dict[str, Any]:
    return {"a": 1}


def test_invoke_returns_none_when_no_output_key_was_written() -> None:
    graph = graph_of(only_a, output_schema=Out).compile()

    assert graph.invoke({"a": 0}) is None
    assert graph.invoke({"a": 0}, version="v2") == GraphOutput(None, ())


async def test_ainvoke_returns_none_when_no_output_key_was_written() -> None:
    graph = graph_of(only_a, output_schema=Out).compile()

    assert await graph.ainvoke({"a": 0}) is None


def test_on_a_thread_only_this_runs_writes_and_resumes_count() -> None:
    def write_b_first(state: S) -> dict[str, Any]:
        return {"a": 1} if state.get("a") else {"b": 7}

    graph = graph_of(write_b_first, output_schema=Out).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}

    assert graph.invoke({}, config) == {"b": 7}
    assert graph.invoke({"a": 1}, config) is None  # b kept, but not written now
    assert graph.invoke(None, config) == {"b": 7}  # a resume streams the state


def test_a_pause_before_any_output_returns_the_interrupts() -> None:
    def pause(state: S) -> dict[str, Any]:
        interrupt("x")
        return {"b": 1}

    graph = graph_of(pause, output_schema=Out).compile(checkpointer=InMemorySaver())

    result = graph.invoke({"a": 1}, {"configurable": {"thread_id": "t"}})

    assert list(result) == ["__interrupt__"]


def test_updates_with_output_keys_show_only_those_keys() -> None:
    def m(state: S) -> dict[str, Any]:
        return {"a": 1, "b": 2}

    def k(state: S) -> dict[str, Any]:
        return {"a": 3}

    graph = graph_of(m, k).compile()

    assert list(graph.stream({"a": 0}, stream_mode="updates", output_keys="b")) == [
        {"m": 2},
        {"k": None},
    ]
    assert list(graph.stream({"a": 0}, stream_mode="updates", output_keys=["b"])) == [
        {"m": {"b": 2}},
        {"k": None},
    ]
    assert list(graph.stream({"a": 0}, stream_mode="updates")) == [
        {"m": {"a": 1, "b": 2}},
        {"k": {"a": 3}},
    ]


async def test_async_updates_with_output_keys() -> None:
    def m(state: S) -> dict[str, Any]:
        return {"a": 1, "b": 2}

    graph = graph_of(m).compile()

    parts = [
        p
        async for p in graph.astream(
            {"a": 0}, stream_mode="updates", output_keys=["b"], version="v2"
        )
    ]

    assert [p["data"] for p in parts] == [{"m": {"b": 2}}]


def test_resume_after_the_pause_streams_the_result() -> None:
    graph = graph_of(asker).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"a": 1}, config)

    parts = list(graph.stream(Command(resume=5), config, stream_mode="tasks"))

    assert [p["result"] for p in parts if "result" in p] == [{"a": 5}]
