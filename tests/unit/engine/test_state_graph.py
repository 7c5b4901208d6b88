"""StateGraph: builder validation, state schemas, edges, Send, Command, drawing.

Every expected output below was learned by running the same graph on LangGraph 1.2.
Where the engine is deliberately stricter (issue 3), the test says so: unknown keys
in a node's update raise ``InvalidUpdateError``; a conditional edge answering
outside its path map raises ``InvalidUpdateError`` (LangGraph: ``KeyError``). Input
keys outside the input schema are ignored, as in LangGraph (issue 13), unless the
graph is compiled with ``strict_input=True``.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
import subprocess
import sys
from typing import Annotated, Any, Literal, TypedDict

import pydantic
import pytest

from engine.channels import Topic
from engine.errors import (
    EmptyInputError,
    GraphRecursionError,
    GraphValidationError,
    InvalidUpdateError,
)
from engine.graph import END, START, StateGraph
from engine.types import Command, Overwrite, Send
from tests._support.graphs import LogState, appender, chain


def noop(state: Any) -> dict[str, Any]:
    return {}


def one_node_builder() -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", noop)
    return builder


def updates_by_step(graph: Any, inputs: Any, **kwargs: Any) -> list[Any]:
    return list(graph.stream(inputs, stream_mode="updates", **kwargs))


# -- builder validation ---------------------------------------------------------------


def test_add_node_duplicate_name_is_refused() -> None:
    builder = one_node_builder()

    with pytest.raises(GraphValidationError, match="'a'"):
        builder.add_node("a", noop)


@pytest.mark.parametrize("name", [START, END, "__interrupt__", "__pregel_tasks"])
def test_add_node_reserved_name_is_refused(name: str) -> None:
    with pytest.raises(GraphValidationError, match=re.escape(repr(name))) as info:
        one_node_builder().add_node(name, noop)

    assert "reserved" in str(info.value)


@pytest.mark.parametrize("name", ["x|y", "x:y"])
def test_add_node_name_with_namespace_separator_is_refused(name: str) -> None:
    with pytest.raises(GraphValidationError, match=re.escape(repr(name))):
        one_node_builder().add_node(name, noop)


def test_graph_validation_error_is_a_value_error_like_langgraph() -> None:
    assert issubclass(GraphValidationError, ValueError)


def test_compile_without_entry_point_is_refused() -> None:
    with pytest.raises(GraphValidationError, match="entrypoint"):
        one_node_builder().compile()


def test_compile_edge_to_unknown_node_names_it() -> None:
    builder = one_node_builder()
    builder.add_edge(START, "a")
    builder.add_edge("a", "nope")

    with pytest.raises(GraphValidationError, match="unknown node 'nope'") as info:
        builder.compile()

    assert "'a'" in str(info.value)


def test_compile_edge_from_unknown_node_names_it() -> None:
    builder = one_node_builder()
    builder.add_edge(START, "a")
    builder.add_edge("nope", "a")

    with pytest.raises(GraphValidationError, match="starting at unknown node 'nope'"):
        builder.compile()


def test_compile_entry_edge_to_unknown_node_names_it() -> None:
    builder = one_node_builder()
    builder.add_edge(START, "nope")

    with pytest.raises(GraphValidationError, match="'nope'"):
        builder.compile()


def test_compile_join_edge_with_unknown_source_names_it() -> None:
    builder = one_node_builder()
    builder.add_edge(START, "a")
    builder.add_edge(["a", "ghost"], END)

    with pytest.raises(GraphValidationError, match="'ghost'"):
        builder.compile()


def test_compile_path_map_to_unknown_node_names_it() -> None:
    builder = one_node_builder()
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: "x", {"x": "nope"})

    with pytest.raises(GraphValidationError, match="'nope'") as info:
        builder.compile()

    assert "'a'" in str(info.value)


def test_compile_interrupt_on_unknown_node_names_it() -> None:
    builder = one_node_builder()
    builder.add_edge(START, "a")

    with pytest.raises(GraphValidationError, match="'nope'"):
        builder.compile(interrupt_before=["nope"])


def test_add_edge_from_end_or_to_start_is_refused() -> None:
    builder = one_node_builder()

    with pytest.raises(GraphValidationError, match="END"):
        builder.add_edge(END, "a")
    with pytest.raises(GraphValidationError, match="START"):
        builder.add_edge("a", START)


def test_add_node_infers_the_name_from_the_function() -> None:
    def research(state: Any) -> dict[str, Any]:
        return {"log": ["research"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node(research)
    builder.add_edge(START, "research")

    assert builder.compile().invoke({"x": 0}) == {"x": 0, "log": ["research"]}


def test_add_node_named_like_a_state_key_runs_as_in_langgraph() -> None:
    class QA(TypedDict):
        question: str
        answer: str

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(QA)
    builder.add_node("answer", lambda s: {"answer": s["question"].upper()})
    builder.add_edge(START, "answer")

    assert builder.compile().invoke({"question": "q"}) == {
        "question": "q",
        "answer": "Q",
    }


def test_adding_after_compile_warns_and_leaves_compiled_graphs_as_they_were(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As LangGraph: a warning, not an error (a notebook cell run again); a graph
    # compiled before keeps its nodes and its drawing.
    builder = chain(["a"])
    first = builder.compile()
    with caplog.at_level("WARNING", logger="engine.graph.state"):
        builder.add_node("b", appender("b"))
        builder.add_edge("a", "b")
        builder.add_conditional_edges("b", lambda s: END)
    second = builder.compile()

    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "Adding a node to a graph that was already compiled",
        "Adding an edge to a graph that was already compiled",
        "Adding an edge to a graph that was already compiled",
    ]
    assert first.invoke({"x": 0}) == {"x": 0, "log": ["a"]}
    assert second.invoke({"x": 0}) == {"x": 0, "log": ["a", "b"]}
    assert "b" not in first.get_graph().nodes
    assert "b" in second.get_graph().nodes


# -- run-time errors ------------------------------------------------------------------


def test_invoke_node_returning_a_non_dict_raises_naming_the_node() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", lambda s: 5)
    builder.add_edge(START, "a")

    with pytest.raises(InvalidUpdateError, match="Expected dict, got 5") as info:
        builder.compile().invoke({"x": 0})

    assert "'a'" in str(info.value)
    assert "INVALID_GRAPH_NODE_RETURN_VALUE" in str(info.value)


def test_invoke_node_returning_none_changes_nothing() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", lambda s: None)
    builder.add_edge(START, "a")

    assert builder.compile().invoke({"x": 0}) == {"x": 0, "log": []}


def test_invoke_node_writing_an_unknown_key_raises_naming_node_and_key() -> None:
    # Issue 3, deliberate difference (a): LangGraph silently ignores the key.
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", lambda s: {"zzz": 5})
    builder.add_edge(START, "a")

    with pytest.raises(InvalidUpdateError, match="'zzz'") as info:
        builder.compile().invoke({"x": 0})

    assert "'a'" in str(info.value)


class _SubState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    scratch: str  # the subgraph's own key, which the parent does not have
    item: int


def _subgraph_with_a_private_key() -> Any:
    sub: StateGraph[Any, Any, Any, Any] = StateGraph(_SubState)
    sub.add_node(
        "inner", lambda s: {"log": [f"inner{s.get('item', '')}"], "scratch": "x"}
    )
    sub.add_edge(START, "inner")
    return sub.compile()


def test_a_subgraph_nodes_own_keys_are_dropped_as_in_langgraph() -> None:
    # LangGraph's documented pattern: a subgraph sharing some keys with its parent
    # is added as a node; its output is its whole state, whose other keys (here
    # ``scratch``) stay its own. Only a function node's unknown key is refused.
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("sub", _subgraph_with_a_private_key())
    builder.add_edge(START, "sub")
    graph = builder.compile()

    assert graph.invoke({"x": 1, "log": []}) == {"x": 1, "log": ["inner"]}
    assert updates_by_step(graph, {"x": 1, "log": []}) == [{"sub": {"log": ["inner"]}}]

    sent: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    sent.add_node("sub", _subgraph_with_a_private_key())
    sent.add_conditional_edges(
        START, lambda s: [Send("sub", {"item": i}) for i in (1, 2)]
    )
    assert sent.compile().invoke({"x": 0, "log": []}) == {
        "x": 0,
        "log": ["inner1", "inner2"],
    }


def test_a_subgraphs_checkpoints_do_not_copy_the_task_keys_into_metadata() -> None:
    # A subgraph's config metadata holds its task's keys (``thread_id``,
    # ``langgraph_*``): LangGraph leaves them out of checkpoint metadata.
    from engine.checkpoint.memory import InMemorySaver  # noqa: PLC0415

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("sub", _subgraph_with_a_private_key())
    builder.add_edge(START, "sub")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "metadata": {"user": "u1"}}

    parts = list(
        graph.stream(
            {"x": 0, "log": []}, config, stream_mode="checkpoints", subgraphs=True
        )
    )

    inner = [part["metadata"] for ns, part in parts if ns]
    assert [m["source"] for m in inner] == ["input", "loop", "loop"]
    for metadata in inner:
        assert "thread_id" not in metadata
        assert not any(key.startswith("langgraph_") for key in metadata)
        assert metadata["user"] == "u1"  # the run's own metadata is kept


def test_invoke_input_with_an_unknown_key_ignores_it_as_langgraph_does() -> None:
    graph = chain(["a"]).compile()

    assert graph.invoke({"x": 0, "q": 1}) == {"x": 0, "log": ["a"]}


def test_strict_input_refuses_an_unknown_input_key_naming_it() -> None:
    graph = chain(["a"]).compile(strict_input=True)

    with pytest.raises(InvalidUpdateError, match="'q'") as info:
        graph.invoke({"x": 0, "q": 1})

    assert "strict_input=True" in str(info.value)
    assert "INVALID_GRAPH_NODE_RETURN_VALUE" in str(info.value)
    assert graph.invoke({"x": 0}) == {"x": 0, "log": ["a"]}


def test_invoke_empty_dict_input_runs_and_none_input_raises() -> None:
    graph = chain(["a"]).compile()

    assert graph.invoke({}) == {"log": ["a"]}
    with pytest.raises(EmptyInputError, match="__start__"):
        graph.invoke(None)


def test_invoke_parallel_writes_to_a_plain_key_raise() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", lambda s: {"x": 1})
    builder.add_node("b", lambda s: {"x": 2})
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")

    with pytest.raises(InvalidUpdateError, match="At key 'x'") as info:
        builder.compile().invoke({"x": 0})

    assert "INVALID_CONCURRENT_GRAPH_UPDATE" in str(info.value)


def test_invoke_conditional_edge_outside_its_path_map_raises_naming_the_source() -> (
    None
):
    # LangGraph raises a bare KeyError('zzz'); issue 3 asks for a typed error.
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", appender("a"))
    builder.add_node("b", appender("b"))
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: "zzz", {"go": "b"})

    with pytest.raises(InvalidUpdateError, match="'zzz'") as info:
        builder.compile().invoke({"x": 0})

    assert "'a'" in str(info.value)


def test_invoke_conditional_edge_to_unknown_node_raises() -> None:
    # LangGraph only warns and stops; the engine refuses with a typed error.
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", appender("a"))
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: "zzz")

    with pytest.raises(InvalidUpdateError, match="'zzz'"):
        builder.compile().invoke({"x": 0})


# -- recursion limit ----------------------------------------------------------------


@pytest.mark.parametrize("length", [1, 3, 4])
def test_recursion_limit_a_chain_of_n_nodes_needs_n_plus_one(length: int) -> None:
    names = [f"n{i}" for i in range(length)]
    graph = chain(names).compile()

    assert graph.invoke({"x": 0}, {"recursion_limit": length + 1})["log"] == names
    with pytest.raises(GraphRecursionError) as info:
        graph.invoke({"x": 0}, {"recursion_limit": length})

    assert str(info.value).startswith(
        f"Recursion limit of {length} reached without hitting a stop condition. "
        "You can increase the limit by setting the `recursion_limit` config key."
    )
    assert "GRAPH_RECURSION_LIMIT" in str(info.value)


def _loop_until(limit: int) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("inc", lambda s: {"x": s["x"] + 1})
    builder.add_edge(START, "inc")
    builder.add_conditional_edges("inc", lambda s: "inc" if s["x"] < limit else END)
    return builder.compile()


def test_recursion_limit_defaults_to_langgraphs_10007() -> None:
    # LangGraph 1.2: DEFAULT_RECURSION_LIMIT = 10007 (issue 13; issue 3 had 25)
    with pytest.raises(GraphRecursionError, match="Recursion limit of 10007 reached"):
        _loop_until(20_000).invoke({"x": 0})
    assert issubclass(GraphRecursionError, RecursionError)


def test_a_50_node_chain_runs_with_no_config() -> None:
    names = [f"n{i}" for i in range(50)]

    assert chain(names).compile().invoke({"x": 0})["log"] == names


def test_an_explicit_limit_equal_to_the_default_still_applies() -> None:
    bound = _loop_until(100).with_config(recursion_limit=10)

    with pytest.raises(GraphRecursionError, match="Recursion limit of 10 reached"):
        bound.invoke({"x": 0})
    assert bound.invoke({"x": 0}, {"recursion_limit": 10007})["x"] == 100


def test_the_default_does_not_replace_a_limit_bound_with_with_config() -> None:
    bound = _loop_until(100).with_config(recursion_limit=10)

    with pytest.raises(GraphRecursionError, match="Recursion limit of 10 reached"):
        bound.invoke({"x": 0}, {"configurable": {"k": "v"}})


def test_the_default_comes_from_the_environment_at_import() -> None:
    code = (
        "from tests._support.graphs import LogState\n"
        "from engine.graph import END, START, StateGraph\n"
        "from engine.errors import GraphRecursionError\n"
        "b = StateGraph(LogState)\n"
        "b.add_node('inc', lambda s: {'x': s['x'] + 1})\n"
        "b.add_edge(START, 'inc')\n"
        "b.add_conditional_edges('inc', lambda s: 'inc' if s['x'] < 99 else END)\n"
        "try:\n"
        "    b.compile().invoke({'x': 0})\n"
        "except GraphRecursionError as exc:\n"
        "    print(str(exc).splitlines()[0])\n"
    )
    env = {**os.environ, "LANGGRAPH_DEFAULT_RECURSION_LIMIT": "7"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.startswith("Recursion limit of 7 reached")


# -- schemas --------------------------------------------------------------------------


def test_typed_dict_state_with_annotated_reducer() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", lambda s: {"x": s["x"] + 1, "log": ["a"]})
    builder.add_node("b", lambda s: {"x": s["x"] * 2, "log": ["b"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)

    assert builder.compile().invoke({"x": 1, "log": []}) == {"x": 4, "log": ["a", "b"]}


class Person(pydantic.BaseModel):
    name: str
    count: int = 0
    tags: Annotated[list[str], operator.add] = []


def test_pydantic_state_node_sees_a_model_and_output_is_a_dict() -> None:
    seen: list[type[Any]] = []

    def count(state: Person) -> dict[str, Any]:
        seen.append(type(state))
        return {"count": state.count + 1, "tags": [state.name]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Person)
    builder.add_node("bump", count)
    builder.add_edge(START, "bump")
    graph = builder.compile()

    assert graph.invoke({"name": "a"}) == {"name": "a", "count": 1, "tags": ["a"]}
    assert graph.invoke(Person(name="b", count=3)) == {
        "name": "b",
        "count": 4,
        "tags": ["b"],
    }
    assert seen == [Person, Person]
    assert list(graph.stream({"name": "a"}, stream_mode="values")) == [
        {"name": "a", "tags": []},
        {"name": "a", "count": 1, "tags": ["a"]},
    ]


def test_pydantic_state_node_may_return_a_model() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Person)
    builder.add_node("n", lambda s: Person(name="z", count=9))
    builder.add_edge(START, "n")

    assert builder.compile().invoke({"name": "a", "tags": ["t"]}) == {
        "name": "z",
        "count": 9,
        "tags": ["t"],
    }


@pytest.mark.parametrize(
    ("inputs", "field"), [({"name": 5}, "name"), ({"count": 1}, "name")]
)
def test_pydantic_state_invalid_input_raises_a_typed_error_naming_the_field(
    inputs: dict[str, Any], field: str
) -> None:
    # LangGraph raises pydantic's ValidationError (a ValueError); the engine raises
    # one too (issue 13), which is also an InvalidUpdateError naming the input.
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Person)
    builder.add_node("n", noop)
    builder.add_edge(START, "n")

    with pytest.raises(pydantic.ValidationError, match=field) as info:
        builder.compile().invoke(inputs)

    assert isinstance(info.value, InvalidUpdateError)
    assert isinstance(info.value, ValueError)
    assert [err["loc"] for err in info.value.errors()] == [(field,)]
    assert info.value.title == "Person"
    assert "Invalid value for the input in state Person" in str(info.value)
    assert "INVALID_STATE" in str(info.value)


def test_pydantic_state_input_with_an_unknown_key_ignores_it() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Person)
    builder.add_node("n", lambda s: {"count": s.count + 1})
    builder.add_edge(START, "n")
    graph = builder.compile()

    assert graph.invoke({"name": "a", "zzz": 1}) == {
        "name": "a",
        "count": 1,
        "tags": [],
    }
    with pytest.raises(InvalidUpdateError, match="'zzz'"):
        builder.compile(strict_input=True).invoke({"name": "a", "zzz": 1})


@dataclasses.dataclass
class Counter:
    name: str
    count: int = 0
    tags: Annotated[list[str], operator.add] = dataclasses.field(default_factory=list)


def test_dataclass_state_node_sees_a_dataclass_and_output_is_a_dict() -> None:
    seen: list[type[Any]] = []

    def count(state: Counter) -> dict[str, Any]:
        seen.append(type(state))
        return {"count": state.count + 1, "tags": [state.name]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Counter)
    builder.add_node("bump", count)
    builder.add_edge(START, "bump")
    graph = builder.compile()

    assert graph.invoke({"name": "a"}) == {"name": "a", "count": 1, "tags": ["a"]}
    assert graph.invoke(Counter(name="b", count=3)) == {
        "name": "b",
        "count": 4,
        "tags": ["b"],
    }
    assert seen == [Counter, Counter]


class Question(TypedDict):
    question: str


class Answer(TypedDict):
    answer: str


class Worksheet(TypedDict):
    question: str
    answer: str
    scratch: str


def worksheet_graph() -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        Worksheet, input_schema=Question, output_schema=Answer
    )
    builder.add_node("think", lambda s: {"scratch": "thinking about " + s["question"]})
    builder.add_node("reply", lambda s: {"answer": s["scratch"].upper()})
    builder.add_edge(START, "think")
    builder.add_edge("think", "reply")
    return builder.compile()


def test_output_schema_filters_the_result() -> None:
    assert worksheet_graph().invoke({"question": "q"}) == {"answer": "THINKING ABOUT Q"}


def test_output_schema_does_not_filter_values_or_updates_streams() -> None:
    graph = worksheet_graph()

    assert list(graph.stream({"question": "q"}, stream_mode="values")) == [
        {"question": "q"},
        {"question": "q", "scratch": "thinking about q"},
        {"question": "q", "answer": "THINKING ABOUT Q", "scratch": "thinking about q"},
    ]
    assert updates_by_step(graph, {"question": "q"}) == [
        {"think": {"scratch": "thinking about q"}},
        {"reply": {"answer": "THINKING ABOUT Q"}},
    ]


def test_input_schema_drops_keys_outside_it() -> None:
    # LangGraph 1.2 drops "scratch" silently: it is state, but not input
    assert worksheet_graph().invoke({"question": "q", "scratch": "x"}) == {
        "answer": "THINKING ABOUT Q"
    }


def test_strict_input_refuses_keys_outside_the_input_schema() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        Worksheet, input_schema=Question, output_schema=Answer
    )
    builder.add_node("think", lambda s: {"scratch": "x"})
    builder.add_edge(START, "think")

    with pytest.raises(InvalidUpdateError, match="'scratch'"):
        builder.compile(strict_input=True).invoke({"question": "q", "scratch": "x"})


class Overall(TypedDict):
    a: str


class Private(TypedDict):
    secret: str


def private_graph() -> Any:
    def write_secret(state: Overall) -> Private:
        return {"secret": state["a"] + "!"}

    def read_secret(state: Private) -> Overall:
        return {"a": state["secret"] * 2}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Overall)
    builder.add_node("write_secret", write_secret)
    builder.add_node("read_secret", read_secret)
    builder.add_edge(START, "write_secret")
    builder.add_edge("write_secret", "read_secret")
    return builder.compile()


def test_private_state_passes_between_nodes_but_not_to_the_output() -> None:
    graph = private_graph()

    assert graph.invoke({"a": "x"}) == {"a": "x!x!"}
    assert updates_by_step(graph, {"a": "x"}) == [
        {"write_secret": {"secret": "x!"}},
        {"read_secret": {"a": "x!x!"}},
    ]


def test_private_state_appears_in_the_values_stream_as_in_langgraph() -> None:
    assert list(private_graph().stream({"a": "x"}, stream_mode="values")) == [
        {"a": "x"},
        {"a": "x", "secret": "x!"},
        {"a": "x!x!", "secret": "x!"},
    ]


def test_node_input_schema_selects_the_keys_the_node_reads() -> None:
    seen: list[dict[str, Any]] = []

    def write_secret(state: Overall) -> Private:
        return {"secret": state["a"] + "!"}

    def peek(state: Any) -> dict[str, Any]:
        seen.append(dict(state))
        return {"a": "done"}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Overall)
    builder.add_node("write_secret", write_secret)
    builder.add_node("peek", peek, input_schema=Private)
    builder.add_edge(START, "write_secret")
    builder.add_edge("write_secret", "peek")

    assert builder.compile().invoke({"a": "x"}) == {"a": "done"}
    assert seen == [{"secret": "x!"}]


def test_overwrite_replaces_a_reduced_value() -> None:
    class Items(TypedDict):
        items: Annotated[list[str], operator.add]

    for overwrite in (Overwrite(["fresh"]), {"__overwrite__": ["fresh"]}):
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(Items)
        builder.add_node("a", lambda s, o=overwrite: {"items": o})
        builder.add_edge(START, "a")

        assert builder.compile().invoke({"items": ["old"]}) == {"items": ["fresh"]}


class TopicState(TypedDict, total=False):
    items: Annotated[list[str], Topic(str, accumulate=True)]


def test_a_key_annotated_with_a_channel_instance_uses_that_channel() -> None:
    # LangGraph accepts a channel as a key's annotation; its schema walk used to
    # fail on it (``Annotated[...]`` holding a channel is unhashable).
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(TopicState)
    builder.add_node("a", lambda s: {"items": "x"})
    builder.add_node("b", lambda s: {"items": ["y", "z"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")

    assert builder.compile().invoke({"items": "start"}) == {
        "items": ["start", "x", "y", "z"]
    }


# -- edges ----------------------------------------------------------------------------


def test_add_sequence_links_nodes_in_order() -> None:
    def step1(state: Any) -> dict[str, Any]:
        return {"log": ["s1"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_sequence([step1, ("named", appender("s2"))])
    builder.add_edge(START, "step1")

    assert updates_by_step(builder.compile(), {"x": 0}) == [
        {"step1": {"log": ["s1"]}},
        {"named": {"log": ["s2"]}},
    ]


def test_add_sequence_needs_a_node() -> None:
    with pytest.raises(ValueError):
        StateGraph(LogState).add_sequence([])


def branches_of_different_length(**node_options: Any) -> Any:
    """START -> a;  START -> b1 -> b2;  then c after both (a and b2)."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in ("a", "b1", "b2"):
        builder.add_node(name, appender(name))
    builder.add_node("c", appender("c"), **node_options)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b1")
    builder.add_edge("b1", "b2")
    return builder


def test_add_edge_from_several_sources_waits_for_all_across_steps() -> None:
    builder = branches_of_different_length()
    builder.add_edge(["a", "b2"], "c")
    graph = builder.compile()

    updates = updates_by_step(graph, {"x": 0, "log": []})

    assert sorted(map(str, updates[:2])) == [
        "{'a': {'log': ['a']}}",
        "{'b1': {'log': ['b1']}}",
    ]
    assert updates[2:] == [{"b2": {"log": ["b2"]}}, {"c": {"log": ["c"]}}]
    assert graph.invoke({"x": 0})["log"] == ["a", "b1", "b2", "c"]


def test_add_edge_plain_edges_from_two_sources_run_the_target_twice() -> None:
    builder = branches_of_different_length()
    builder.add_edge("a", "c")
    builder.add_edge("b2", "c")

    assert builder.compile().invoke({"x": 0})["log"] == ["a", "b1", "b2", "c", "c"]


def test_add_node_defer_waits_until_nothing_else_runs() -> None:
    builder = branches_of_different_length(defer=True)
    builder.add_edge("a", "c")
    builder.add_edge("b2", "c")

    updates = updates_by_step(builder.compile(), {"x": 0})

    assert [next(iter(u)) for u in updates][2:] == ["b2", "c"]
    assert len(updates) == 4


def test_conditional_edges_with_a_list_result_fan_out() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in "abc":
        builder.add_node(name, appender(name))
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: ["b", "c"])

    assert builder.compile().invoke({"x": 0})["log"] == ["a", "b", "c"]


def test_conditional_edges_with_a_path_map_and_end() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in "abc":
        builder.add_node(name, appender(name))
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: ["B", END], {"B": "b", END: END})

    assert updates_by_step(builder.compile(), {"x": 0}) == [
        {"a": {"log": ["a"]}},
        {"b": {"log": ["b"]}},
    ]


def test_conditional_edges_loop_until_end() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("inc", lambda s: {"x": s["x"] + 1, "log": [s["x"]]})
    builder.add_edge(START, "inc")
    builder.add_conditional_edges("inc", lambda s: "inc" if s["x"] < 3 else END)

    assert builder.compile().invoke({"x": 0}) == {"x": 3, "log": [0, 1, 2]}


class Routed(TypedDict, total=False):
    x: int | None
    log: Annotated[list[Any], operator.add]
    kept: str


def test_a_conditional_edge_sees_its_nodes_own_writes() -> None:
    """The router reads the state as the node's writes will leave it: a plain key
    holds the written value (None included), a reducer key the merged one, an
    unwritten key what it held."""
    seen: list[tuple[Any, list[Any], str]] = []

    def step(s: Routed) -> dict[str, Any]:
        x = s.get("x")
        if x is None:
            return {"x": 0}
        return {"x": None if x == 2 else x + 1, "log": [x]}

    def route(s: Routed) -> str:
        seen.append((s.get("x"), list(s.get("log", [])), s["kept"]))
        return "step" if s.get("x") is not None else END

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Routed)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", route)

    out = builder.compile().invoke({"x": None, "kept": "k"})
    assert seen == [
        (0, [], "k"),
        (1, [0], "k"),
        (2, [0, 1], "k"),
        (None, [0, 1, 2], "k"),
    ]
    assert out == {"x": None, "log": [0, 1, 2], "kept": "k"}


def test_a_conditional_edge_after_two_writes_to_a_plain_key_refuses_them() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Routed)
    builder.add_node("twice", lambda s: Command(update=[("x", 1), ("x", 2)]))
    builder.add_edge(START, "twice")
    builder.add_conditional_edges("twice", lambda s: END)

    with pytest.raises(InvalidUpdateError):
        builder.compile().invoke({"kept": "k"})


class FanOut(TypedDict):
    items: list[int]
    results: Annotated[list[Any], operator.add]


def test_send_fans_out_and_operator_add_fans_in() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(FanOut)
    builder.add_node("work", lambda s: {"results": [s["item"] * 10]})
    builder.add_node("done", appender_to("results", "done"))
    builder.add_conditional_edges(
        START, lambda s: [Send("work", {"item": i}) for i in s["items"]], ["work"]
    )
    builder.add_edge("work", "done")
    graph = builder.compile()

    assert graph.invoke({"items": [1, 2, 3]}) == {
        "items": [1, 2, 3],
        "results": [10, 20, 30, "done"],
    }
    updates = updates_by_step(graph, {"items": [3, 1, 2]})
    assert sorted(u["work"]["results"][0] for u in updates[:3]) == [10, 20, 30]
    assert updates[3:] == [{"done": {"results": ["done"]}}]


def appender_to(key: str, label: Any) -> Any:
    return lambda state: {key: [label]}


def test_parallel_nodes_do_not_see_each_others_writes() -> None:
    seen: dict[str, int] = {}

    def a(state: Any) -> dict[str, Any]:
        seen["a"] = state["x"]
        return {"x": 10, "log": ["a"]}

    def b(state: Any) -> dict[str, Any]:
        seen["b"] = state["x"]
        return {"log": ["b"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")

    assert builder.compile().invoke({"x": 1}) == {"x": 10, "log": ["a", "b"]}
    assert seen == {"a": 1, "b": 1}


# -- Command -------------------------------------------------------------------------


def command_graph(node: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", node)
    builder.add_node("b", appender("b"))
    builder.add_node("c", appender("c"))
    builder.add_edge(START, "a")
    return builder.compile()


def test_command_update_and_goto_one_node() -> None:
    def a(state: Any) -> Command[Literal["b", "c"]]:
        return Command(update={"x": 5, "log": ["a"]}, goto="c")

    graph = command_graph(a)

    assert updates_by_step(graph, {"x": 0}) == [
        {"a": {"x": 5, "log": ["a"]}},
        {"c": {"log": ["c"]}},
    ]
    assert graph.invoke({"x": 0}) == {"x": 5, "log": ["a", "c"]}


def test_command_goto_several_nodes() -> None:
    graph = command_graph(lambda s: Command(update={"log": ["a"]}, goto=["b", "c"]))

    assert graph.invoke({"x": 0}) == {"x": 0, "log": ["a", "b", "c"]}


def test_command_goto_send() -> None:
    graph = command_graph(lambda s: Command(goto=[Send("b", {"x": 7, "log": []})]))

    assert graph.invoke({"x": 0}) == {"x": 0, "log": ["b"]}


def test_command_goto_unknown_node_raises_naming_it() -> None:
    # LangGraph warns and drops the write; issue 3 wants unknown names refused.
    graph = command_graph(lambda s: Command(goto="nowhere"))

    with pytest.raises(InvalidUpdateError, match="'nowhere'"):
        graph.invoke({"x": 0})


# -- drawing --------------------------------------------------------------------------


def route(state: Any) -> Literal["b", "c"]:
    return "b"


def drawn_graph(path_map: dict[str, str] | None) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in "abc":
        builder.add_node(name, noop)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", route, path_map)
    builder.add_edge("b", END)
    builder.add_edge("c", END)
    return builder.compile()


def edge_set(graph: Any) -> set[tuple[str, str, bool]]:
    return {(e.source, e.target, e.conditional) for e in graph.get_graph().edges}


def test_get_graph_marks_conditional_edges() -> None:
    expected = {
        (START, "a", False),
        ("a", "b", True),
        ("a", "c", True),
        ("b", END, False),
        ("c", END, False),
    }
    for path_map in (None, {"go_b": "b", "go_c": "c"}):
        drawing = drawn_graph(path_map).get_graph()

        assert sorted(drawing.nodes) == sorted([START, END, "a", "b", "c"])
        assert edge_set(drawn_graph(path_map)) == expected


def test_get_graph_labels_conditional_edges_with_path_map_keys() -> None:
    edges = drawn_graph({"go_b": "b", "go_c": "c"}).get_graph().edges

    assert {(e.target, e.data) for e in edges if e.conditional} == {
        ("b", "go_b"),
        ("c", "go_c"),
    }


def test_get_graph_join_edges_and_implicit_end() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in "abc":
        builder.add_node(name, noop)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "c")

    assert edge_set(builder.compile()) == {
        (START, "a", False),
        (START, "b", False),
        ("a", "c", False),
        ("b", "c", False),
        ("c", END, False),
    }


def test_draw_mermaid_lists_nodes_and_edges() -> None:
    text = drawn_graph(None).draw_mermaid()

    assert text.startswith("graph TD;") or "\ngraph TD;" in text
    assert "__start__([<p>__start__</p>]):::first" in text
    assert "__end__([<p>__end__</p>]):::last" in text
    assert "__start__ --> a;" in text
    assert "b --> __end__;" in text
    assert re.search(r"a -\.-> b;", text)


def test_draw_mermaid_labels_conditional_edges_in_mermaid_syntax() -> None:
    text = drawn_graph({"go_b": "b", "go_c": "c"}).draw_mermaid()

    # Mermaid's documented forms: `a -. text .-> b` (LangGraph's) or `a -.->|text| b`.
    assert re.search(r"a -\. ?(&nbsp;)?go_b(&nbsp;)? ?\.-> b|a -\.->\|go_b\| ?b", text)


# -- ported programs (issue 13) -------------------------------------------------------


class Inner(TypedDict):
    x: int


class Outer(TypedDict):
    x: int
    note: str


def test_a_node_can_call_a_subgraph_with_the_parents_whole_state() -> None:
    # LangGraph's documented pattern: the subgraph ignores keys it does not declare
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(Inner)
    inner.add_node("times_ten", lambda s: {"x": s["x"] * 10})
    inner.add_edge(START, "times_ten")
    subgraph = inner.compile()

    def call_subgraph(state: Outer) -> dict[str, Any]:
        return {"x": subgraph.invoke(state)["x"]}

    outer: StateGraph[Any, Any, Any, Any] = StateGraph(Outer)
    outer.add_node("call", call_subgraph)
    outer.add_edge(START, "call")

    assert outer.compile().invoke({"x": 2, "note": "n"}) == {"x": 20, "note": "n"}


def test_a_timeout_on_a_sync_node_is_refused_at_compile_with_a_value_error() -> None:
    # LangGraph 1.2 accepts add_node(..., timeout=) and refuses at compile, ValueError
    builder = one_node_builder()
    builder.add_node("slow", lambda s: {}, timeout=1.0)
    builder.add_edge(START, "slow")

    with pytest.raises(ValueError, match="'slow'") as info:
        builder.compile()

    assert isinstance(info.value, GraphValidationError)
    assert "INVALID_GRAPH" in str(info.value)


def test_a_timeout_on_an_async_node_compiles() -> None:
    async def slow(state: Any) -> dict[str, Any]:
        return {}

    builder = one_node_builder()
    builder.add_node("slow", slow, timeout=1.0)
    builder.add_edge(START, "slow")

    assert builder.compile() is not None
