"""add_messages: append, replace by id, remove, remove all, id assignment.

The plain-dict path is what runs when langchain-core is absent (it is optional);
the tests force it by hiding langchain-core from the reducer. Results match
LangGraph 1.2's ``add_messages`` message for message (role, content, id).
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest

import engine.graph.message as message_module
from engine.errors import InvalidUpdateError
from engine.graph import START, MessagesState, StateGraph, add_messages
from engine.graph.message import REMOVE_ALL_MESSAGES, RemoveMessage


@pytest.fixture
def plain_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the reducer as if langchain-core were not installed."""
    monkeypatch.setattr(message_module, "_lc", lambda: None)


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
    monkeypatch.undo()  # use langchain-core, if installed
    messages = pytest.importorskip("langchain_core.messages")

    merged = add_messages(
        [messages.HumanMessage("hi", id="1"), msg("assistant", "hello", "2")],
        [messages.AIMessage("edited", id="2"), messages.RemoveMessage(id="1")],
    )

    assert [(type(m).__name__, m.content, m.id) for m in merged] == [
        ("AIMessage", "edited", "2")
    ]
