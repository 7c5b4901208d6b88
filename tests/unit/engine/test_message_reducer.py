"""add_messages, MessagesState and push_message, with dicts and with LangChain messages.

The plain-dict path is what runs when langchain-core is absent (it is optional
for the engine); most tests force it by hiding langchain-core from the reducer.
Results match LangGraph 1.2's ``add_messages`` message for message (role,
content, id). The last tests use langchain-core (a test dependency) and check
LangGraph's behaviour with LangChain's message classes.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, TypedDict

import langchain_core.messages as lc
import pytest

import engine.graph.message as message_module
from engine.errors import InvalidUpdateError
from engine.graph import START, MessagesState, StateGraph, add_messages
from engine.graph.message import REMOVE_ALL_MESSAGES, RemoveMessage, push_message


@pytest.fixture
def plain_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the reducer as if langchain-core were not installed."""
    monkeypatch.setattr(message_module, "_lc", lambda: None)


@pytest.fixture
def with_langchain(plain_dicts: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo ``plain_dicts``: langchain-core (a test dependency) is used."""
    monkeypatch.undo()


def msg(role: str, content: str, id: str | None = None) -> dict[str, Any]:
    out = {"role": role, "content": content}
    if id is not None:
        out["id"] = id
    return out


def shape(messages: list[Any]) -> list[tuple[Any, Any, Any]]:
    return [(m["role"], m["content"], m["id"]) for m in messages]


HISTORY = [msg("user", "hi", "1"), msg("assistant", "hello", "2")]


pytestmark = pytest.mark.usefixtures("plain_dicts")


def test_add_messages_appends_new_messages() -> None:
    merged = add_messages(HISTORY, [msg("user", "more", "3")])

    assert shape(merged) == [
        ("user", "hi", "1"),
        ("assistant", "hello", "2"),
        ("user", "more", "3"),
    ]


def test_add_messages_accepts_a_single_message() -> None:
    merged = add_messages(HISTORY, msg("user", "single", "3"))

    assert shape(merged)[-1] == ("user", "single", "3")


def test_add_messages_replaces_a_message_with_the_same_id_in_place() -> None:
    merged = add_messages(HISTORY, [msg("assistant", "edited", "2")])

    assert shape(merged) == [("user", "hi", "1"), ("assistant", "edited", "2")]


def test_add_messages_removes_by_id() -> None:
    merged = add_messages(HISTORY, [RemoveMessage(id="1")])

    assert shape(merged) == [("assistant", "hello", "2")]


def test_add_messages_remove_all_keeps_only_what_follows_it() -> None:
    merged = add_messages(
        HISTORY,
        [
            msg("user", "gone", "8"),
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            msg("user", "fresh", "9"),
        ],
    )

    assert shape(merged) == [("user", "fresh", "9")]
    assert REMOVE_ALL_MESSAGES == "__remove_all__"


def test_add_messages_removing_an_unknown_id_raises_naming_it() -> None:
    with pytest.raises(InvalidUpdateError, match="'zzz'"):
        add_messages(HISTORY, [RemoveMessage(id="zzz")])


def test_add_messages_removing_an_unknown_id_is_a_value_error_like_langgraph() -> None:
    with pytest.raises(ValueError, match="'zzz'"):
        add_messages(HISTORY, [RemoveMessage(id="zzz")])


def test_add_messages_assigns_uuid_ids_to_messages_without_one() -> None:
    (added,) = add_messages([], [msg("user", "no id")])

    assert uuid.UUID(added["id"])
    assert added["content"] == "no id"


def test_add_messages_a_message_added_then_removed_in_one_update_vanishes() -> None:
    merged = add_messages(HISTORY, [msg("user", "x", "5"), RemoveMessage(id="5")])

    assert shape(merged) == shape(HISTORY)


def test_add_messages_the_last_of_two_new_messages_with_one_id_wins() -> None:
    merged = add_messages(HISTORY, [msg("user", "x", "5"), msg("user", "y", "5")])

    assert shape(merged)[2:] == [("user", "y", "5")]


def test_add_messages_remove_then_readd_the_same_id_keeps_its_place() -> None:
    merged = add_messages(HISTORY, [RemoveMessage(id="1"), msg("user", "back", "1")])

    assert shape(merged) == [("user", "back", "1"), ("assistant", "hello", "2")]


def test_add_messages_never_mutates_its_inputs() -> None:
    left = [dict(m) for m in HISTORY]
    right = [msg("user", "new")]

    add_messages(left, right)

    assert left == HISTORY
    assert right == [msg("user", "new")]


def test_add_messages_empty_update_returns_the_history() -> None:
    assert shape(add_messages(HISTORY, [])) == shape(HISTORY)


def test_add_messages_coerces_strings_and_role_tuples() -> None:
    merged = add_messages([], ["hello", ("ai", "hi there")])

    assert [(m["role"], m["content"]) for m in merged] == [
        ("user", "hello"),
        ("assistant", "hi there"),
    ]


def test_add_messages_refuses_what_is_not_a_message() -> None:
    with pytest.raises(InvalidUpdateError, match="chat message"):
        add_messages([], [42])


def test_messages_state_reduces_node_updates() -> None:
    def reply(state: Any) -> dict[str, Any]:
        return {
            "messages": [msg("assistant", f"echo {state['messages'][-1]['content']}")]
        }

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")

    result = builder.compile().invoke({"messages": [msg("user", "ping", "1")]})

    assert [(m["role"], m["content"]) for m in result["messages"]] == [
        ("user", "ping"),
        ("assistant", "echo ping"),
    ]
    assert result["messages"][0]["id"] == "1"
    assert result["messages"][1]["id"]


def test_messages_in_a_custom_state_with_another_reducer() -> None:
    class Chat(TypedDict):
        messages: Annotated[list[Any], add_messages]
        turns: Annotated[int, operator.add]

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Chat)
    builder.add_node(
        "edit", lambda s: {"messages": [msg("user", "edited", "1")], "turns": 1}
    )
    builder.add_edge(START, "edit")

    result = builder.compile().invoke(
        {"messages": [msg("user", "draft", "1")], "turns": 0}
    )

    assert shape(result["messages"]) == [("user", "edited", "1")]
    assert result["turns"] == 1


def test_add_messages_with_langchain_core_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.undo()  # use langchain-core (a test dependency)

    merged = add_messages(
        [lc.HumanMessage("hi", id="1"), msg("assistant", "hello", "2")],
        [lc.AIMessage("edited", id="2"), lc.RemoveMessage(id="1")],
    )

    assert [(type(m).__name__, m.content, m.id) for m in merged] == [
        ("AIMessage", "edited", "2")
    ]


def test_add_messages_needs_both_sides_or_neither() -> None:
    with pytest.raises(ValueError, match="left"):
        add_messages(HISTORY)
    with pytest.raises(ValueError, match="right"):
        add_messages(None, HISTORY)
    reducer = add_messages()
    assert shape(reducer(HISTORY, [msg("user", "x", "3")]))[-1] == ("user", "x", "3")


def test_push_message_writes_a_dict_message_without_langchain_core() -> None:
    def node(state: Any) -> dict[str, Any]:
        push_message({"role": "assistant", "content": "pushed", "id": "p"})
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")

    out = builder.compile().invoke({"messages": [msg("user", "hi", "1")]})

    assert shape(out["messages"]) == [("user", "hi", "1"), ("assistant", "pushed", "p")]


# -- with LangChain's message classes (langchain-core installed) ------------------


@pytest.mark.usefixtures("with_langchain")
def test_langchain_forms_are_coerced_to_langchain_messages() -> None:
    merged = add_messages(
        [],
        [
            "a string",
            ("ai", "a tuple"),
            {"role": "system", "content": "a dict"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "t", "args": {"q": 1}, "id": "c1"}],
            },
            {"role": "tool", "content": "result", "tool_call_id": "c1"},
            lc.AIMessageChunk("a chunk", id="k"),
        ],
    )

    assert [type(m).__name__ for m in merged] == [
        "HumanMessage",
        "AIMessage",
        "SystemMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",  # chunks become whole messages
    ]
    assert merged[3].tool_calls[0]["name"] == "t"
    assert merged[4].tool_call_id == "c1"
    assert all(m.id for m in merged)


@pytest.mark.usefixtures("with_langchain")
def test_a_langchain_message_without_id_gets_one_in_place() -> None:
    message = lc.HumanMessage("no id yet")

    (merged,) = add_messages([], [message])

    assert merged is message
    assert uuid.UUID(message.id)


@pytest.mark.usefixtures("with_langchain")
def test_langchain_remove_all_keeps_what_follows_it() -> None:
    merged = add_messages(
        [lc.HumanMessage("old", id="1")],
        [lc.RemoveMessage(id=REMOVE_ALL_MESSAGES), lc.AIMessage("new", id="2")],
    )

    assert [(m.content, m.id) for m in merged] == [("new", "2")]
    with pytest.raises(ValueError, match="'missing'"):
        add_messages(merged, [lc.RemoveMessage(id="missing")])


@pytest.mark.usefixtures("with_langchain")
def test_add_messages_in_openai_format() -> None:
    reducer = add_messages(format="langchain-openai")
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "1234"},
    }

    (merged,) = reducer(
        [], [{"role": "user", "content": [{"type": "text", "text": "hi"}, image]}]
    )

    assert isinstance(merged, lc.HumanMessage)
    assert merged.content == [
        {"type": "text", "text": "hi"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,1234"}},
    ]
    with pytest.raises(ValueError, match="format"):
        add_messages([], [], format="yaml")


@pytest.mark.usefixtures("with_langchain")
def test_messages_state_holds_langchain_messages() -> None:
    class Chat(MessagesState):
        turns: int

    def reply(state: Any) -> dict[str, Any]:
        return {"messages": [("ai", f"echo {state['messages'][-1].content}")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")

    out = builder.compile().invoke({"messages": "ping", "turns": 0})

    assert [(type(m).__name__, m.content) for m in out["messages"]] == [
        ("HumanMessage", "ping"),
        ("AIMessage", "echo ping"),
    ]


@pytest.mark.usefixtures("with_langchain")
def test_push_message_streams_it_and_writes_it_to_the_state() -> None:
    def node(state: Any) -> dict[str, Any]:
        push_message(lc.AIMessage("pushed", id="p1"))
        push_message(
            {"role": "assistant", "content": "shown only", "id": "p2"}, state_key=None
        )
        return {"messages": [lc.AIMessage("returned", id="r1")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile()

    streamed = [
        (chunk.content, meta["langgraph_node"])
        for chunk, meta in graph.stream({"messages": "hi"}, stream_mode="messages")
    ]

    assert streamed == [
        ("pushed", "node"),
        ("shown only", "node"),
        ("returned", "node"),
    ]
    out = graph.invoke({"messages": "hi"})
    assert [m.content for m in out["messages"]] == ["hi", "pushed", "returned"]


@pytest.mark.usefixtures("with_langchain")
def test_push_message_needs_an_id() -> None:
    def node(state: Any) -> dict[str, Any]:
        push_message(lc.AIMessage("no id"))
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")

    with pytest.raises(ValueError, match="id"):
        builder.compile().invoke({"messages": []})


def test_a_history_message_without_an_id_gets_one_and_can_be_replaced() -> None:
    """The history is read a kind at a time; one message without an id falls
    back to giving each message its id, as before."""
    history = [msg("user", "hi", "1"), msg("assistant", "no id"), msg("user", "x", "3")]

    merged = add_messages(history, [msg("user", "again", "3")])

    assert [m["content"] for m in merged] == ["hi", "no id", "again"]
    assert uuid.UUID(merged[1]["id"])
    assert "id" not in history[1]  # the caller's dict is left as it was


@pytest.mark.usefixtures("with_langchain")
def test_a_history_of_dicts_and_objects_is_merged_by_id() -> None:
    history = [
        lc.HumanMessage(content="hi", id="1"),
        {"role": "assistant", "content": "hello", "id": "2"},
    ]

    merged = add_messages(history, [lc.AIMessage(content="hello again", id="2")])

    assert [(type(m).__name__, m.content, m.id) for m in merged] == [
        ("HumanMessage", "hi", "1"),
        ("AIMessage", "hello again", "2"),
    ]
