"""The ``tools`` stream mode, ``ToolRuntime.emit_output_delta`` and ``ToolCallTransformer``.

The expected events are LangGraph 1.2.24's for the same graphs (observed by
running them): one ``tool-started`` per call the ToolNode makes (with the
model's arguments), ``tool-output-delta`` per ``emit_output_delta``, then
``tool-finished`` (the tool message) or ``tool-error`` (``str(error)``, also
when the ToolNode answers the error), keyed by ``tool_call_id`` at the
namespace of the graph the ToolNode runs in. Calls run in parallel, so the
order is only fixed within one call.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from engine.checkpoint.memory import InMemorySaver
from engine.graph import END, START, MessagesState, StateGraph
from engine.prebuilt import ToolCallTransformer, ToolNode, ToolRuntime
from engine.prebuilt._tool_call_stream import ToolCallStream
from engine.prebuilt._tool_call_transformer import _answer_content
from engine.prebuilt._tool_events import emit_output_delta
from engine.types import Command, interrupt


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def streamy(x: str, runtime: ToolRuntime) -> str:
    """Streams two pieces, then answers."""
    runtime.emit_output_delta("part1")
    runtime.emit_output_delta({"p": 2})
    return "done " + x


def boom(x: str) -> str:
    """Always fails."""
    raise ValueError("bad " + x)


def ask(x: str) -> str:
    """Asks a human."""
    return str(interrupt("q?"))


CALLS = [
    {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"},
    {"name": "streamy", "args": {"x": "y"}, "id": "c2"},
    {"name": "boom", "args": {"x": "z"}, "id": "c3"},
    {"name": "nope", "args": {}, "id": "c4"},  # unknown: never reaches a tool
]


def agent(
    calls: list[dict[str, Any]], tools: list[Any], **tool_node_kw: Any
) -> StateGraph[Any, Any, Any, Any]:
    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("", id="ai1", tool_calls=calls)]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode(tools, **tool_node_kw))
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", END)
    return builder


def by_call(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        found.setdefault(event["tool_call_id"], []).append(event)
    return found


def check_three_calls(events: list[dict[str, Any]]) -> None:
    calls = by_call(events)
    assert sorted(calls) == ["c1", "c2", "c3"]
    assert [e["event"] for e in calls["c1"]] == ["tool-started", "tool-finished"]
    assert calls["c1"][0] == {
        "event": "tool-started",
        "tool_call_id": "c1",
        "tool_name": "add",
        "input": {"a": 1, "b": 2},
    }
    answer = calls["c1"][1]["output"]
    assert isinstance(answer, ToolMessage)
    assert (answer.content, answer.name, answer.tool_call_id) == ("3", "add", "c1")
    # the injected runtime is not part of the input
    assert calls["c2"][0]["input"] == {"x": "y"}
    assert calls["c2"][1:3] == [
        {"event": "tool-output-delta", "tool_call_id": "c2", "delta": "part1"},
        {"event": "tool-output-delta", "tool_call_id": "c2", "delta": {"p": 2}},
    ]
    assert calls["c2"][3]["output"].content == "done y"
    assert calls["c3"][1] == {
        "event": "tool-error",
        "tool_call_id": "c3",
        "message": "bad z",
    }


def test_tools_mode_reports_each_call() -> None:
    graph = agent(CALLS, [add, streamy, boom], handle_tool_errors=True).compile()

    events = list(graph.stream({"messages": []}, stream_mode="tools"))

    check_three_calls(events)


def test_tools_parts_and_tuples() -> None:
    graph = agent(CALLS[:1], [add]).compile()

    parts = list(
        graph.stream({"messages": []}, stream_mode=["tools", "updates"], version="v2")
    )
    tuples = list(graph.stream({"messages": []}, stream_mode=["tools", "updates"]))

    tools = [p for p in parts if p["type"] == "tools"]
    assert [(p["ns"], p["data"]["event"]) for p in tools] == [
        ((), "tool-started"),
        ((), "tool-finished"),
    ]
    assert [mode for mode, _ in tuples] == ["updates", "tools", "tools", "updates"]


def test_without_the_tools_mode_nothing_is_reported_and_deltas_are_ignored() -> None:
    graph = agent(CALLS[1:2], [streamy]).compile()

    updates = list(graph.stream({"messages": []}, stream_mode="updates"))

    assert updates[-1]["tools"]["messages"][0].content == "done y"
    emit_output_delta("outside any tool call")  # a no-op, no error


async def test_async_runs_report_the_same_events() -> None:
    graph = agent(CALLS, [add, streamy, boom], handle_tool_errors=True).compile()

    events = [e async for e in graph.astream({"messages": []}, stream_mode="tools")]

    check_three_calls(events)


def test_an_unhandled_error_is_reported_before_the_run_fails() -> None:
    graph = agent(CALLS[2:3], [boom], handle_tool_errors=False).compile()
    events: list[Any] = []

    with pytest.raises(ValueError, match="bad z"):
        for event in graph.stream({"messages": []}, stream_mode="tools"):
            events.append(event)

    assert [e["event"] for e in events] == ["tool-started", "tool-error"]


def test_bad_arguments_are_reported_as_the_validation_error() -> None:
    calls = [{"name": "add", "args": {"a": "x"}, "id": "c9"}]
    graph = agent(calls, [add]).compile()  # the default answers bad arguments

    started, failed = graph.stream({"messages": []}, stream_mode="tools")

    assert started["input"] == {"a": "x"}
    assert failed["event"] == "tool-error"
    assert failed["message"].startswith("2 validation errors for add")
    assert "Field required" in failed["message"]


def test_a_paused_tool_starts_again_on_resume() -> None:
    graph = agent([{"name": "ask", "args": {"x": "z"}, "id": "c5"}], [ask]).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}

    first = list(graph.stream({"messages": []}, config, stream_mode="tools"))
    second = list(graph.stream(Command(resume="ans"), config, stream_mode="tools"))

    assert [e["event"] for e in first] == ["tool-started"]
    assert [e["event"] for e in second] == ["tool-started", "tool-finished"]
    assert second[1]["output"].content == "ans"


def subgraph_parent(**compile_kw: Any) -> Any:
    inner = agent(CALLS[1:3], [streamy, boom], handle_tool_errors=True).compile()
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("sub", inner)
    builder.add_edge(START, "sub")
    return builder.compile(**compile_kw)


def test_a_subgraphs_tools_are_reported_at_its_namespace() -> None:
    graph = subgraph_parent()

    hidden = list(graph.stream({"messages": []}, stream_mode="tools"))
    shown = list(graph.stream({"messages": []}, stream_mode="tools", subgraphs=True))

    assert hidden == []
    assert {ns for ns, _ in shown} == {shown[0][0]}
    assert shown[0][0][0].startswith("sub:")
    assert [e["event"] for _, e in shown if e["tool_call_id"] == "c2"] == [
        "tool-started",
        "tool-output-delta",
        "tool-output-delta",
        "tool-finished",
    ]


def test_tool_runtime_carries_execution_and_server_info() -> None:
    seen: list[ToolRuntime[Any, Any]] = []

    def inspect_runtime(runtime: ToolRuntime) -> str:
        """Keeps its runtime."""
        seen.append(runtime)
        return "ok"

    graph = agent(
        [{"name": "inspect_runtime", "args": {}, "id": "c7"}], [inspect_runtime]
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1", "assistant_id": "a1"}}

    graph.invoke({"messages": []}, config)

    info = seen[0].execution_info
    assert info is not None
    assert info.thread_id == "t1"
    assert info.checkpoint_ns.startswith("tools:")
    assert info.node_attempt == 1
    assert seen[0].server_info is not None
    assert seen[0].server_info.assistant_id == "a1"


# -- ToolCallTransformer -------------------------------------------------------


def test_transformer_projects_each_call_as_a_handle() -> None:
    graph = agent(CALLS, [add, streamy, boom], handle_tool_errors=True).compile(
        transformers=[ToolCallTransformer]
    )

    run = graph.stream_events({"messages": []}, version="v3")
    handles = {}
    for handle in run.tool_calls:
        assert isinstance(handle, ToolCallStream)
        handles[handle.tool_call_id] = (handle, list(handle))

    streamed, deltas = handles["c2"]
    assert (streamed.tool_name, streamed.input, deltas) == (
        "streamy",
        {"x": "y"},
        ["part1", {"p": 2}],
    )
    assert (streamed.output, streamed.error, streamed.completed) == (
        "done y",
        None,
        True,
    )
    assert repr(streamed) == (
        "ToolCallStream(tool_call_id='c2', tool_name='streamy', status=completed)"
    )
    failed, nothing = handles["c3"]
    assert (failed.output, failed.error, failed.completed, nothing) == (
        None,
        "bad z",
        True,
        [],
    )
    assert "status=failed" in repr(failed)
    assert handles["c1"][0].output == "3"
    assert [m.content for m in run.output["messages"][1:3]] == ["3", "done y"]
    assert len(handles) == 3  # the unknown tool's call reaches no tool


def test_transformer_keeps_the_tools_events_in_the_log() -> None:
    graph = agent(CALLS[1:2], [streamy]).compile()

    run = graph.stream_events(
        {"messages": []}, version="v3", transformers=[ToolCallTransformer]
    )
    events = [e for e in run if e["method"] == "tools"]

    assert [e["params"]["data"]["event"] for e in events] == [
        "tool-started",
        "tool-output-delta",
        "tool-output-delta",
        "tool-finished",
    ]
    assert [e["params"]["namespace"] for e in events] == [[]] * 4


def test_a_subgraphs_calls_are_not_the_roots() -> None:
    run = subgraph_parent(transformers=[ToolCallTransformer]).stream_events(
        {"messages": []}, version="v3"
    )

    assert list(run.tool_calls) == []
    assert run.output is not None


async def test_transformer_in_an_async_run() -> None:
    graph = agent(CALLS[1:3], [streamy, boom], handle_tool_errors=True).compile(
        transformers=[ToolCallTransformer]
    )

    run = await graph.astream_events({"messages": []}, version="v3")
    found = []
    async for handle in run.tool_calls:
        found.append((handle.tool_call_id, [d async for d in handle], handle.output))

    assert sorted(found, key=lambda f: f[0]) == [
        ("c2", ["part1", {"p": 2}], "done y"),
        ("c3", [], None),
    ]


def test_open_calls_close_when_the_run_ends() -> None:
    transformer = ToolCallTransformer()
    transformer._on_register(type("Mux", (), {"is_async": False})())
    started = {
        "type": "event",
        "method": "tools",
        "params": {
            "namespace": [],
            "timestamp": 0,
            "data": {"event": "tool-started", "tool_call_id": "x", "tool_name": "t"},
        },
    }
    transformer.process(started)  # type: ignore[arg-type]
    handle = transformer._open["x"]

    transformer.fail(RuntimeError("run failed"))

    assert (handle.completed, handle.error) == (True, "run failed")


@pytest.mark.parametrize(
    ("output", "content"),
    [
        (ToolMessage("hi", tool_call_id="c"), "hi"),
        ({"role": "tool", "content": "hi", "tool_call_id": "c"}, "hi"),
        (
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain_core", "messages", "ToolMessage"],
                "kwargs": {"content": "hi", "tool_call_id": "c"},
            },
            "hi",
        ),
        ("plain", "plain"),
    ],
)
def test_a_finished_calls_output_is_the_answers_content(
    output: Any, content: Any
) -> None:
    assert _answer_content(output) == content


def test_a_command_answer_is_kept_as_it_is() -> None:
    command = Command(update={"messages": []})
    assert _answer_content(command) is command


def test_async_tools_report_from_their_own_context() -> None:
    async def slow(x: str, runtime: ToolRuntime) -> str:
        """Streams from a coroutine."""
        runtime.emit_output_delta("a")
        await asyncio.sleep(0)
        runtime.emit_output_delta("b")
        return x

    graph = agent([{"name": "slow", "args": {"x": "q"}, "id": "c8"}], [slow]).compile()

    async def run() -> list[Any]:
        return [e async for e in graph.astream({"messages": []}, stream_mode="tools")]

    events = asyncio.run(run())

    assert [e.get("delta") for e in events if e["event"] == "tool-output-delta"] == [
        "a",
        "b",
    ]
