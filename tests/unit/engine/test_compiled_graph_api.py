"""The compiled graph's API beyond running it: schemas, cache, async getters, copy.

The JSON Schemas expected here are the documents LangGraph 1.2.24 returns for
the same graphs (its ``get_input_jsonschema`` and siblings build them with
pydantic, as the engine does), so tools reading a graph's schemas see the same.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from engine.cache.memory import InMemoryCache
from engine.func import entrypoint
from engine.graph import START, StateGraph
from engine.types import CachePolicy
from engine.warnings import LangGraphDeprecatedSinceV10
from tests._support.graphs import LogState, appender


class State(TypedDict):
    a: int
    log: Annotated[list[str], operator.add]


class In(TypedDict):
    a: int


class Out(TypedDict):
    log: list[str]


@dataclasses.dataclass
class Context:
    user: str
    n: int = 3


class Model(BaseModel):
    a: int = 0
    b: str


@dataclasses.dataclass
class Record:
    a: int
    b: list[int] = dataclasses.field(default_factory=list)


def compiled(schema: type[Any], **kwargs: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema, **kwargs)
    builder.add_node("node", lambda state: {})
    builder.add_edge(START, "node")
    return builder.compile()


A = {"title": "A", "type": "integer"}
LOG = {"items": {"type": "string"}, "title": "Log", "type": "array"}


# -- JSON Schemas ---------------------------------------------------------------------


def test_input_and_output_jsonschemas_of_a_typeddict_state() -> None:
    graph = compiled(State)

    expected = {
        "properties": {"a": A, "log": LOG},
        "required": ["a", "log"],
        "title": "State",
        "type": "object",
    }
    assert graph.get_input_jsonschema() == expected
    assert graph.get_output_jsonschema() == expected


def test_jsonschemas_follow_the_input_and_output_schemas() -> None:
    graph = compiled(State, input_schema=In, output_schema=Out)

    assert graph.get_input_jsonschema() == {
        "properties": {"a": A},
        "required": ["a"],
        "title": "In",
        "type": "object",
    }
    assert graph.get_output_jsonschema() == {
        "properties": {"log": LOG},
        "required": ["log"],
        "title": "Out",
        "type": "object",
    }


def test_jsonschemas_of_pydantic_and_dataclass_states() -> None:
    model = compiled(Model)
    record = compiled(Record)

    assert model.get_input_jsonschema() == Model.model_json_schema()
    assert model.get_output_jsonschema() == Model.model_json_schema()
    assert record.get_input_jsonschema() == {
        "properties": {
            "a": A,
            "b": {
                "default": [],
                "items": {"type": "integer"},
                "title": "B",
                "type": "array",
            },
        },
        "required": ["a"],
        "title": "LangGraphInput",
        "type": "object",
    }
    assert record.get_output_jsonschema()["title"] == "LangGraphOutput"


def test_context_jsonschema_and_none_without_a_context_schema() -> None:
    assert compiled(State, context_schema=Context).get_context_jsonschema() == {
        "properties": {
            "user": {"title": "User", "type": "string"},
            "n": {"default": 3, "title": "N", "type": "integer"},
        },
        "required": ["user"],
        "title": "Context",
        "type": "object",
    }
    assert compiled(State).get_context_jsonschema() is None


def test_config_schema_is_deprecated_and_names_the_context_as_configurable() -> None:
    graph = compiled(State, context_schema=Context)

    with pytest.warns(LangGraphDeprecatedSinceV10):
        schema = graph.get_config_jsonschema(include=["tags"])
    with pytest.warns(LangGraphDeprecatedSinceV10):
        model = graph.config_schema()

    assert schema["title"] == "LangGraphConfig"
    assert schema["properties"]["configurable"] == {
        "$ref": "#/$defs/Context",
        "default": None,
    }
    assert schema["properties"]["tags"]["items"] == {"type": "string"}
    assert model.model_json_schema()["properties"].keys() == {"configurable"}


# -- pydantic models, types and names ---------------------------------------------------


def test_input_and_output_schemas_are_pydantic_models() -> None:
    graph = compiled(State, input_schema=In, output_schema=Out)

    assert graph.get_input_schema().model_json_schema() == {
        "$defs": {
            "In": {
                "properties": {"a": A},
                "required": ["a"],
                "title": "In",
                "type": "object",
            }
        },
        "$ref": "#/$defs/In",
        "title": "LangGraphInput",
    }
    assert graph.get_output_schema().model_json_schema() == {
        "properties": {"log": {**LOG, "default": None}},
        "title": "LangGraphOutput",
        "type": "object",
    }
    assert graph.input_schema.model_json_schema() == (
        graph.get_input_schema().model_json_schema()
    )
    assert graph.output_schema.model_fields.keys() == {"log"}


def test_a_pydantic_input_schema_is_its_own_model() -> None:
    assert compiled(Model).get_input_schema() is Model


def test_input_and_output_types() -> None:
    graph = compiled(State, input_schema=In)

    assert graph.InputType is In
    assert graph.OutputType is None  # several output channels


def test_names_follow_langchains_rule() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("node", lambda state: {})
    builder.add_edge(START, "node")

    assert builder.compile().get_name("Input") == "LangGraphInput"
    assert builder.compile(name="purchase").get_name("Input") == "purchase_input"
    assert builder.compile(name="purchase").get_name() == "purchase"


def test_an_entrypoints_schemas_come_from_its_annotations() -> None:
    # LangGraph reads the raw signature, so under ``from __future__ import
    # annotations`` (this module) it sees the string "int"; the engine resolves
    # the hints, which gives what LangGraph gives without postponed annotations.
    @entrypoint()
    def double(number: int) -> str:
        return str(number * 2)

    assert double.InputType is int
    assert double.OutputType is str
    assert double.get_input_jsonschema()["type"] == "integer"
    assert double.get_output_jsonschema()["type"] == "string"


# -- cache ------------------------------------------------------------------------------


def counted_graph(**compile_kwargs: Any) -> tuple[Any, list[int]]:
    calls: list[int] = []

    def slow(state: LogState) -> dict[str, Any]:
        calls.append(state["x"])
        return {"log": ["slow"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("slow", slow, cache_policy=CachePolicy())
    builder.add_node("quick", appender("quick"), cache_policy=CachePolicy())
    builder.add_edge(START, "slow")
    builder.add_edge("slow", "quick")
    return builder.compile(**compile_kwargs), calls


def test_clear_cache_forgets_the_nodes_results() -> None:
    graph, calls = counted_graph(cache=InMemoryCache())

    graph.invoke({"x": 1, "log": []})
    graph.invoke({"x": 1, "log": []})
    graph.clear_cache(["slow"])
    graph.invoke({"x": 1, "log": []})
    graph.clear_cache()
    graph.invoke({"x": 1, "log": []})

    assert calls == [1, 1, 1]  # ran, cached, ran after each clear


async def test_aclear_cache_forgets_them_too() -> None:
    graph, calls = counted_graph(cache=InMemoryCache())

    await graph.ainvoke({"x": 2, "log": []})
    await graph.aclear_cache()
    await graph.ainvoke({"x": 2, "log": []})

    assert calls == [2, 2]


def test_clear_cache_needs_a_cache() -> None:
    graph, _ = counted_graph()

    with pytest.raises(ValueError, match="No cache"):
        graph.clear_cache()


def test_a_graph_cache_policy_applies_to_nodes_without_their_own() -> None:
    calls: list[int] = []

    def slow(state: LogState) -> dict[str, Any]:
        calls.append(state["x"])
        return {"log": ["slow"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    graph = builder.compile(cache=InMemoryCache())
    cached = graph.copy({"cache_policy": CachePolicy()})

    graph.invoke({"x": 1, "log": []})
    graph.invoke({"x": 1, "log": []})  # no policy: runs again
    cached.invoke({"x": 1, "log": []})
    cached.invoke({"x": 1, "log": []})  # the graph's policy: cached

    assert calls == [1, 1, 1]
    assert graph.cache_policy is None


# -- async getters and copy ---------------------------------------------------------------


async def test_aget_graph_and_aget_subgraphs_match_their_sync_twins() -> None:
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    inner.add_node("inner", appender("inner"))
    inner.add_edge(START, "inner")
    sub = inner.compile()
    outer: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    outer.add_node("child", sub)
    outer.add_edge(START, "child")
    graph = outer.compile()

    drawn = await graph.aget_graph(xray=1)
    subgraphs = [item async for item in graph.aget_subgraphs()]

    assert sorted(drawn.nodes) == sorted(graph.get_graph(xray=1).nodes)
    assert subgraphs == [("child", sub)]


def test_copy_replaces_the_attributes_given() -> None:
    graph = compiled(State)

    renamed = graph.copy({"name": "renamed"})

    assert renamed.name == "renamed"
    assert graph.name == "LangGraph"
    assert renamed.invoke({"a": 1, "log": []}) == {"a": 1, "log": []}
