"""``stream(..., version="v2")`` typed parts and ``invoke(..., version="v2")``.

LangGraph 1.2 documents each part as ``{"type": mode, "ns": namespace, "data":
payload}`` whatever modes were asked for (``values`` parts also carry
``interrupts``), state values as the schema's class when it is a pydantic model
or a dataclass, and ``invoke(version="v2")`` as a ``GraphOutput(value,
interrupts)``. The expected parts below were observed on LangGraph 1.2.24 with
the same graphs; ``version="v1"`` stays the default.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
from pydantic import BaseModel

from engine.checkpoint.memory import InMemorySaver
from engine.config import get_stream_writer
from engine.func import entrypoint
from engine.graph import START, MessagesState, StateGraph
from engine.prebuilt import ScriptedChatModel
from engine.types import Command, GraphOutput, Interrupt, interrupt
from engine.warnings import LangGraphDeprecatedSinceV11
from tests._support.graphs import LogState, appender, thread


def review_graph() -> Any:
    """START -> one (writes a custom chunk) -> two (asks); with a checkpointer."""

    def one(state: LogState) -> dict[str, Any]:
        get_stream_writer()({"progress": 1})
        return {"x": state["x"] + 1, "log": ["one"]}

    def two(state: LogState) -> dict[str, Any]:
        return {"log": [interrupt("ok?")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("one", one)
    builder.add_node("two", two)
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    return builder.compile(checkpointer=InMemorySaver())


class Counter(BaseModel):
    a: int = 0


@dataclasses.dataclass
class Tally:
    a: int
    notes: list[str] = dataclasses.field(default_factory=list)


def increment_graph(schema: type[Any], **compile_kwargs: Any) -> Any:
    def inc(state: Any) -> dict[str, Any]:
        return {"a": state.a + 1}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema)
    builder.add_node("inc", inc)
    builder.add_edge(START, "inc")
    return builder.compile(**compile_kwargs)


# -- stream ---------------------------------------------------------------------------


def test_stream_v2_parts_carry_type_ns_and_data_for_every_mode() -> None:
    graph = review_graph()

    parts = list(
        graph.stream(
            {"x": 1, "log": []},
            thread(),
            stream_mode=["values", "updates", "custom"],
            version="v2",
        )
    )

    (asked,) = graph.get_state(thread()).interrupts
    assert parts == [
        {"type": "values", "ns": (), "data": {"x": 1, "log": []}, "interrupts": ()},
        {"type": "custom", "ns": (), "data": {"progress": 1}},
        {"type": "updates", "ns": (), "data": {"one": {"x": 2, "log": ["one"]}}},
        {
            "type": "values",
            "ns": (),
            "data": {"x": 2, "log": ["one"]},
            "interrupts": (),
        },
        {"type": "updates", "ns": (), "data": {"__interrupt__": (asked,)}},
        {
            "type": "values",
            "ns": (),
            "data": {"x": 2, "log": ["one"]},  # no __interrupt__ key in v2 data
            "interrupts": (asked,),
        },
    ]


def test_stream_v2_with_one_mode_still_yields_parts() -> None:
    graph = review_graph()

    parts = list(graph.stream({"x": 1, "log": []}, thread(), version="v2"))

    assert [p["type"] for p in parts] == ["updates", "updates"]  # the default mode
    assert parts[0] == {
        "type": "updates",
        "ns": (),
        "data": {"one": {"x": 2, "log": ["one"]}},
    }


def test_stream_defaults_to_v1_chunks() -> None:
    graph = review_graph()

    chunks = list(
        graph.stream({"x": 1, "log": []}, thread(), stream_mode=["values", "updates"])
    )

    assert chunks[0] == ("values", {"x": 1, "log": []})
    assert "__interrupt__" in chunks[-1][1]


def test_stream_v2_values_of_a_pydantic_or_dataclass_state_are_instances() -> None:
    pydantic_parts = list(
        increment_graph(Counter).stream(
            {"a": 1}, stream_mode=["values", "updates"], version="v2"
        )
    )
    dataclass_parts = list(
        increment_graph(Tally).stream({"a": 1}, stream_mode="values", version="v2")
    )

    assert pydantic_parts == [
        {"type": "values", "ns": (), "data": Counter(a=1), "interrupts": ()},
        {"type": "updates", "ns": (), "data": {"inc": {"a": 2}}},
        {"type": "values", "ns": (), "data": Counter(a=2), "interrupts": ()},
    ]
    assert [p["data"] for p in dataclass_parts] == [Tally(a=1), Tally(a=2)]


def test_stream_v2_checkpoint_and_debug_values_are_instances_but_not_the_input() -> (
    None
):
    graph = increment_graph(Counter, checkpointer=InMemorySaver())

    parts = list(
        graph.stream(
            {"a": 1}, thread(), stream_mode=["checkpoints", "debug"], version="v2"
        )
    )

    checkpoints = [p["data"] for p in parts if p["type"] == "checkpoints"]
    debug = [p["data"]["payload"] for p in parts if p["type"] == "debug"]
    debug_checkpoints = [d for d in debug if "values" in d]
    assert [c["values"] for c in checkpoints] == [{}, Counter(a=1), Counter(a=2)]
    assert [c["values"] for c in debug_checkpoints] == [{}, Counter(a=1), Counter(a=2)]
    assert checkpoints[0]["next"] == ["__start__"]  # the input one stays a dict


def test_stream_v2_tasks_parts_hold_task_payloads() -> None:
    graph = review_graph()

    parts = list(
        graph.stream({"x": 1, "log": []}, thread(), stream_mode="tasks", version="v2")
    )

    started = [p["data"] for p in parts if "input" in p["data"]]
    finished = [p["data"] for p in parts if "result" in p["data"]]
    assert {p["type"] for p in parts} == {"tasks"}
    assert [t["name"] for t in started] == ["one", "two"]
    assert finished[0]["result"] == {"x": 2, "log": ["one"]}
    assert finished[1]["result"] == {}  # paused: wrote nothing (as LangGraph)
    assert finished[1]["interrupts"][0]["value"] == "ok?"


def test_stream_v2_messages_parts_hold_the_message_and_its_metadata() -> None:
    model = ScriptedChatModel([{"content": "hello there"}])

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")

    parts = list(
        builder.compile().stream(
            {"messages": [{"role": "user", "content": "hi"}]},
            stream_mode="messages",
            version="v2",
        )
    )

    ((message, metadata),) = [p["data"] for p in parts]
    assert [(p["type"], p["ns"]) for p in parts] == [("messages", ())]
    assert message["content"] == "hello there"
    assert metadata["langgraph_node"] == "agent"


def test_stream_v2_subgraph_parts_name_their_namespace() -> None:
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    inner.add_node("inner", appender("inner"))
    inner.add_edge(START, "inner")
    outer: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    outer.add_node("outer", inner.compile())
    outer.add_edge(START, "outer")
    graph = outer.compile()

    with_subgraphs = list(
        graph.stream({"x": 1, "log": []}, subgraphs=True, version="v2")
    )
    without = list(graph.stream({"x": 1, "log": []}, version="v2"))

    assert [p["ns"][0].split(":")[0] for p in with_subgraphs if p["ns"]] == ["outer"]
    assert with_subgraphs[-1] == {
        "type": "updates",
        "ns": (),
        "data": {"outer": {"x": 1, "log": ["inner"]}},
    }
    assert without == [with_subgraphs[-1]]


def test_stream_inside_a_node_yields_the_subgraphs_own_chunks() -> None:
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    inner.add_node("inner", appender("inner"))
    inner.add_edge(START, "inner")
    sub = inner.compile()
    seen: list[Any] = []

    def outer(state: LogState) -> dict[str, Any]:
        seen.append(list(sub.stream({"x": 0, "log": []}, stream_mode="updates")))
        seen.append(list(sub.stream({"x": 0, "log": []}, version="v2")))
        return {"log": ["outer"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("outer", outer)
    builder.add_edge(START, "outer")
    builder.compile().invoke({"x": 0, "log": []})

    v1, v2 = seen
    assert v1 == [{"inner": {"log": ["inner"]}}]
    assert [(p["type"], p["data"]) for p in v2] == [
        ("updates", {"inner": {"log": ["inner"]}})
    ]
    assert v2[0]["ns"] and v2[0]["ns"][0].startswith("outer:")


async def test_astream_v2_yields_the_same_parts() -> None:
    graph = review_graph()

    parts = [
        part
        async for part in graph.astream(
            {"x": 1, "log": []}, thread(), stream_mode=["values"], version="v2"
        )
    ]

    assert [p["data"] for p in parts] == [
        {"x": 1, "log": []},
        {"x": 2, "log": ["one"]},
        {"x": 2, "log": ["one"]},
    ]
    assert parts[-1]["interrupts"][0].value == "ok?"


def test_stream_v1_asked_for_by_name_yields_v1_chunks() -> None:
    chunks = list(
        review_graph().stream(
            {"x": 1, "log": []}, thread(), stream_mode="values", version="v1"
        )
    )

    assert chunks[0] == {"x": 1, "log": []}


# -- invoke ---------------------------------------------------------------------------


def test_invoke_v2_returns_the_output_and_the_interrupts_apart() -> None:
    graph = review_graph()

    paused = graph.invoke({"x": 1, "log": []}, thread(), version="v2")
    done = graph.invoke(Command(resume="yes"), thread(), version="v2")

    assert isinstance(paused, GraphOutput)
    assert paused.value == {"x": 2, "log": ["one"]}
    assert [i.value for i in paused.interrupts] == ["ok?"]
    assert isinstance(paused.interrupts[0], Interrupt)
    assert done == GraphOutput({"x": 2, "log": ["one", "yes"]}, ())


def test_invoke_v1_still_merges_the_interrupts_into_the_output() -> None:
    result = review_graph().invoke({"x": 1, "log": []}, thread())

    assert result["log"] == ["one"]
    assert [i.value for i in result["__interrupt__"]] == ["ok?"]


def test_invoke_v2_gives_a_pydantic_or_dataclass_output_as_an_instance() -> None:
    assert increment_graph(Counter).invoke({"a": 1}, version="v2") == GraphOutput(
        Counter(a=2)
    )
    assert increment_graph(Tally).invoke({"a": 1}, version="v2").value == Tally(a=2)
    assert increment_graph(Counter).invoke({"a": 1}) == {"a": 2}  # v1: a dict


def test_invoke_v2_with_another_stream_mode_returns_the_parts() -> None:
    parts = review_graph().invoke(
        {"x": 1, "log": []}, thread(), stream_mode="updates", version="v2"
    )

    assert [p["type"] for p in parts] == ["updates", "updates"]
    assert "__interrupt__" in parts[-1]["data"]


async def test_ainvoke_v2_matches_invoke() -> None:
    graph = review_graph()

    paused = await graph.ainvoke({"x": 1, "log": []}, thread(), version="v2")

    assert paused.value == {"x": 2, "log": ["one"]}
    assert [i.value for i in paused.interrupts] == ["ok?"]


def test_invoke_v2_of_an_entrypoint() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def ask(topic: str) -> dict[str, Any]:
        return {"answer": interrupt(f"{topic}?")}

    paused = ask.invoke("budget", thread(), version="v2")
    done = ask.invoke(Command(resume="yes"), thread(), version="v2")

    assert paused.value == {}  # as LangGraph: the output apart from the interrupt
    assert [i.value for i in paused.interrupts] == ["budget?"]
    assert done == GraphOutput({"answer": "yes"}, ())


def test_invoke_v2_with_one_output_key_returns_its_value() -> None:
    graph = increment_graph(Counter)

    assert graph.invoke({"a": 1}, output_keys="a", version="v2") == GraphOutput(2)


def test_reading_a_graph_output_as_a_dict_works_but_is_deprecated() -> None:
    paused = review_graph().invoke({"x": 1, "log": []}, thread(), version="v2")

    with pytest.warns(LangGraphDeprecatedSinceV11):
        assert paused["log"] == ["one"]
    with pytest.warns(LangGraphDeprecatedSinceV11):
        assert "__interrupt__" in paused
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert paused.value["x"] == 2  # the supported way warns nothing
