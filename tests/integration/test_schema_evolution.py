"""State schema evolution: older checkpoints migrate, or are refused naming field and version."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from engine.errors import SchemaMigrationError
from engine.graph import START, StateGraph


class V1(TypedDict):
    name: str
    count: int


class V2(TypedDict):
    full_name: str
    count: int


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": "evolve"}}


def v1_graph(saver: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(V1)
    builder.add_node("inc", lambda s: {"count": s["count"] + 1})
    builder.add_edge(START, "inc")
    return builder.compile(checkpointer=saver)


def v2_builder(*, with_migration: bool) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(V2, schema_version=2)
    builder.add_node("inc", lambda s: {"count": s["count"] + 10})
    builder.add_edge(START, "inc")
    if with_migration:
        builder.add_migration(1, lambda v: {"full_name": v.pop("name", ""), **v})
    return builder


def test_checkpoint_of_an_older_schema_is_migrated_and_saved_migrated(saver) -> None:
    v1_graph(saver).invoke({"name": "Ada", "count": 1}, thread())
    graph = v2_builder(with_migration=True).compile(checkpointer=saver)

    assert graph.get_state(thread()).values == {"full_name": "Ada", "count": 2}
    assert graph.invoke({"count": 5}, thread()) == {"full_name": "Ada", "count": 15}
    stored = saver.get_tuple(thread())
    assert stored.checkpoint["schema_version"] == 2
    assert "name" not in stored.checkpoint["channel_values"]


def test_older_schema_without_a_migration_is_refused_naming_the_version(saver) -> None:
    v1_graph(saver).invoke({"name": "Ada", "count": 1}, thread())
    graph = v2_builder(with_migration=False).compile(checkpointer=saver)

    with pytest.raises(
        SchemaMigrationError, match="version 1 and no migration to version 2"
    ):
        graph.get_state(thread())
    with pytest.raises(SchemaMigrationError):
        graph.invoke({"count": 5}, thread())


def test_a_removed_field_without_a_version_bump_is_refused_naming_the_field(
    saver,
) -> None:
    v1_graph(saver).invoke({"name": "Ada", "count": 1}, thread())

    class Renamed(TypedDict):
        full_name: str
        count: int

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Renamed)
    builder.add_node("inc", lambda s: {"count": s["count"] + 1})
    builder.add_edge(START, "inc")

    with pytest.raises(SchemaMigrationError, match="'name'"):
        builder.compile(checkpointer=saver).get_state(thread())


def test_a_newer_checkpoint_is_refused_by_older_code(saver) -> None:
    v2_builder(with_migration=True).compile(checkpointer=saver).invoke(
        {"full_name": "Ada", "count": 1}, thread()
    )

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(V2, schema_version=1)
    builder.add_node("inc", lambda s: {"count": s["count"] + 1})
    builder.add_edge(START, "inc")

    with pytest.raises(SchemaMigrationError, match="newer than this graph's version 1"):
        builder.compile(checkpointer=saver).get_state(thread())
