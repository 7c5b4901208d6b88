"""UI messages (``engine.graph.ui``): the reducer, and pushing from a node.

Payloads are the ones LangGraph 1.2 sends: the message goes to the ``custom``
stream as it is pushed and into the ``ui`` state key through the reducer.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.graph import START, StateGraph
from engine.graph.ui import (
    AnyUIMessage,
    delete_ui_message,
    push_ui_message,
    ui_message_reducer,
)


def ui(id: str, props: dict[str, Any], *, merge: bool = False) -> dict[str, Any]:
    return {
        "type": "ui",
        "id": id,
        "name": "card",
        "props": props,
        "metadata": {"merge": merge},
    }


# -- the reducer ---------------------------------------------------------------------


def test_ui_message_reducer_appends_new_ids_in_order() -> None:
    assert ui_message_reducer([ui("1", {})], [ui("2", {}), ui("3", {})]) == [
        ui("1", {}),
        ui("2", {}),
        ui("3", {}),
    ]


def test_ui_message_reducer_accepts_single_messages_on_either_side() -> None:
    assert ui_message_reducer(ui("1", {}), ui("2", {})) == [ui("1", {}), ui("2", {})]  # type: ignore[arg-type]


def test_ui_message_reducer_replaces_a_shown_id_in_place() -> None:
    left = [ui("1", {"a": 1}), ui("2", {})]

    assert ui_message_reducer(left, [ui("1", {"b": 2})]) == [  # type: ignore[arg-type]
        ui("1", {"b": 2}),
        ui("2", {}),
    ]


def test_ui_message_reducer_merges_props_when_asked() -> None:
    merged = ui_message_reducer(
        [ui("1", {"a": 1, "b": 1})], [ui("1", {"b": 2}, merge=True)]
    )  # type: ignore[list-item]

    assert merged == [ui("1", {"a": 1, "b": 2}, merge=True)]


def test_ui_message_reducer_does_not_mutate_its_arguments() -> None:
    left = [ui("1", {"a": 1})]
    right = [ui("1", {"b": 2}, merge=True)]

    ui_message_reducer(left, right)  # type: ignore[arg-type]

    assert left == [ui("1", {"a": 1})]
    assert right == [ui("1", {"b": 2}, merge=True)]


def test_ui_message_reducer_removes_by_id() -> None:
    left = [ui("1", {}), ui("2", {})]

    assert ui_message_reducer(left, {"type": "remove-ui", "id": "1"}) == [ui("2", {})]  # type: ignore[arg-type]


def test_ui_message_reducer_refuses_to_remove_an_unknown_id() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        ui_message_reducer([ui("1", {})], [{"type": "remove-ui", "id": "nope"}])  # type: ignore[list-item]


def test_a_component_removed_and_pushed_again_in_one_update_stays() -> None:
    merged = ui_message_reducer(
        [ui("1", {"a": 1})],  # type: ignore[list-item]
        [{"type": "remove-ui", "id": "1"}, ui("1", {"b": 1}, merge=True)],  # type: ignore[list-item]
    )

    assert merged == [ui("1", {"a": 1, "b": 1}, merge=True)]


# -- pushing from a node -------------------------------------------------------------


class State(TypedDict, total=False):
    ui: Annotated[Sequence[AnyUIMessage], ui_message_reducer]
    n: int


def _graph(*nodes: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    previous = START
    for node in nodes:
        builder.add_node(node)
        builder.add_edge(previous, node.__name__)
        previous = node.__name__
    return builder.compile(checkpointer=InMemorySaver())


def test_push_ui_message_streams_it_and_writes_it_to_the_state() -> None:
    def show(state: State) -> dict[str, Any]:
        push_ui_message(
            "card",
            {"title": "x"},
            id="m1",
            metadata={"k": 1},
            message={"id": "msg-1", "content": "hi"},
        )
        push_ui_message("card", {"body": "y"}, id="m1", merge=True)
        return {"n": 1}

    config = {"configurable": {"thread_id": "t"}, "tags": ["t"]}
    chunks = list(_graph(show).stream({}, config, stream_mode=["custom", "values"]))

    first = {
        "type": "ui",
        "id": "m1",
        "name": "card",
        "props": {"title": "x"},
        "metadata": {
            "merge": False,
            "run_id": None,
            "tags": ["t"],
            "name": None,
            "k": 1,
            "message_id": "msg-1",
        },
    }
    second = {
        "type": "ui",
        "id": "m1",
        "name": "card",
        "props": {"body": "y"},
        "metadata": {"merge": True, "run_id": None, "tags": ["t"], "name": None},
    }
    assert [c for c in chunks if c[0] == "custom"] == [
        ("custom", first),
        ("custom", second),
    ]
    assert chunks[-1] == (
        "values",
        {"ui": [{**second, "props": {"title": "x", "body": "y"}}], "n": 1},
    )


def test_push_ui_message_makes_an_id_and_reads_a_message_objects_id() -> None:
    class Message:
        id = "msg-2"

    pushed: list[Any] = []

    def show(state: State) -> dict[str, Any]:
        pushed.append(push_ui_message("card", {}, message=Message()))
        return {}

    _graph(show).invoke({}, {"configurable": {"thread_id": "t"}})

    assert uuid.UUID(pushed[0]["id"])
    assert pushed[0]["metadata"] == {
        "merge": False,
        "run_id": None,
        "tags": None,  # no tags given: None, as in LangGraph
        "name": None,
        "message_id": "msg-2",
    }


def test_push_ui_message_with_no_state_key_only_streams() -> None:
    def show(state: State) -> dict[str, Any]:
        push_ui_message("card", {}, id="m1", state_key=None)
        return {"n": 1}

    graph = _graph(show)
    chunks = list(
        graph.stream({}, {"configurable": {"thread_id": "t"}}, stream_mode="custom")
    )

    assert [c["id"] for c in chunks] == ["m1"]
    values = graph.get_state({"configurable": {"thread_id": "t"}}).values
    assert values == {"ui": [], "n": 1}  # as in LangGraph: the reducer's empty list


def test_delete_ui_message_streams_the_removal_and_drops_the_component() -> None:
    def show(state: State) -> dict[str, Any]:
        push_ui_message("card", {}, id="m1")
        push_ui_message("card", {}, id="m2")
        return {}

    def hide(state: State) -> dict[str, Any]:
        assert delete_ui_message("m1") == {"type": "remove-ui", "id": "m1"}
        return {}

    graph = _graph(show, hide)
    config = {"configurable": {"thread_id": "t"}}
    custom = list(graph.stream({}, config, stream_mode="custom"))

    assert custom[-1] == {"type": "remove-ui", "id": "m1"}
    assert [m["id"] for m in graph.get_state(config).values["ui"]] == ["m2"]


def test_ui_messages_outside_a_node_raise() -> None:
    with pytest.raises(RuntimeError, match="push_ui_message"):
        push_ui_message("card", {})
    with pytest.raises(RuntimeError, match="delete_ui_message"):
        delete_ui_message("m1")
