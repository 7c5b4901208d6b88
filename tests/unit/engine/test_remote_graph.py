"""RemoteGraph's pure parts, and how it reads a server's events (a fake SDK client).

Expected shapes are LangGraph 1.2's ``RemoteGraph`` (its unit tests and
observed behaviour); the end-to-end tests against the studio are in
``tests/sdk/test_remote_graph.py``.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest
from langgraph_sdk.schema import StreamPart

from engine.errors import GraphInterrupt, ParentCommand
from engine.pregel._remote import (
    command_to_json,
    drawable_from_json,
    interrupt_from_json,
    plan_stream_modes,
    sanitize_config,
    snapshot_from_state,
)
from engine.pregel.remote import RemoteException, RemoteGraph
from engine.types import Command, GraphOutput, Interrupt, Send
from tests._support.python_child import run_python


def fake(parts: list[StreamPart]) -> tuple[RemoteGraph, MagicMock]:
    client = MagicMock()
    client.runs.stream.return_value = parts
    return RemoteGraph("g", sync_client=client), client


PARTS = [
    StreamPart(event="values", data={"v": 1}, id=None),
    StreamPart(event="updates", data={"node": {"v": 1}}, id=None),
    StreamPart(event="updates|child:1", data={"inner": {}}, id=None),
    StreamPart(event="messages", data=[{"content": "hi"}, {"meta": 1}], id=None),
]


def test_sanitize_config_keeps_json_data_and_drops_the_callers_position() -> None:
    config: Any = {
        "recursion_limit": 10,
        "tags": ["a", 1, "b"],
        "metadata": {"ok": (1, 2), "fn": len, "nested": {"x": object(), "y": "z"}},
        "configurable": {
            "user": "u",
            "thread_id": "t",
            "checkpoint_ns": "node:1",
            "checkpoint_id": "c",
            "checkpoint_map": {"": "c"},
            "__engine_task_id": "task",
            "model": object(),
            5: "non-string key",
        },
        "callbacks": [object()],
    }

    assert sanitize_config(config) == {
        "recursion_limit": 10,
        "tags": ["a", "b"],
        "metadata": {"ok": [1, 2], "nested": {"y": "z"}},
        "configurable": {"user": "u", "thread_id": "t"},
    }
    assert sanitize_config({}) == {}


def test_plan_stream_modes_adds_updates_and_the_parents_modes() -> None:
    plan = plan_stream_modes("values", ["messages", "custom", "events"])

    assert plan.sent == ["values", "messages-tuple", "custom", "updates"]
    assert plan.requested == {"values"}
    assert plan.single
    assert plan_stream_modes(None).sent == ["updates"]
    listed = plan_stream_modes(["messages-tuple", "updates"])
    assert listed.requested == {"messages", "updates"}
    assert not listed.single


def test_command_to_json_sends_only_what_is_set() -> None:
    assert command_to_json(Command(resume="yes")) == {"resume": "yes"}
    assert command_to_json(
        Command(update=[("a", 1)], goto=[Send("n", {"x": 1}), "m"], graph="g")
    ) == {
        "graph": "g",
        "update": [["a", 1]],
        "goto": [{"node": "n", "input": {"x": 1}}, "m"],
    }


def test_a_thread_state_becomes_a_snapshot() -> None:
    checkpoint = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c2"}
    state = {
        "values": {"a": 1},
        "next": ["ask"],
        "checkpoint": checkpoint,
        "metadata": {"step": 1},
        "created_at": "2024-01-01T00:00:00+00:00",
        "parent_checkpoint": {**checkpoint, "checkpoint_id": "c1"},
        "tasks": [
            {
                "id": "task",
                "name": "ask",
                "error": None,
                "interrupts": [{"value": "q?", "id": "i1", "when": "during"}],
                "checkpoint": None,
                "state": None,
            }
        ],
    }

    snapshot = snapshot_from_state(state)

    assert snapshot.values == {"a": 1}
    assert snapshot.next == ("ask",)
    assert snapshot.config == {"configurable": {**checkpoint, "checkpoint_map": {}}}
    assert snapshot.parent_config["configurable"]["checkpoint_id"] == "c1"  # type: ignore[index]
    assert snapshot.interrupts == (Interrupt(value="q?", id="i1"),)
    assert snapshot.tasks[0].name == "ask"


def test_an_interrupt_keeps_the_servers_response_schema() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}

    given = interrupt_from_json({"value": "q?", "id": "i1", "response_schema": schema})
    bare = interrupt_from_json({"value": "q?"})

    assert given == Interrupt(value="q?", id="i1", response_schema=schema)
    assert bare == Interrupt(value="q?")  # no id: Interrupt's default, as LangGraph


def test_a_graph_drawing_is_read_from_json() -> None:
    drawing = drawable_from_json(
        {
            "nodes": [
                {"id": "__start__", "type": "schema", "data": "__start__"},
                {"id": "agent", "type": "runnable", "data": {"name": "agent_1"}},
            ],
            "edges": [{"source": "__start__", "target": "agent", "conditional": True}],
        }
    )

    assert drawing.nodes["agent"].name == "agent_1"
    assert drawing.nodes["__start__"].name == "__start__"
    assert drawing.edges[0].conditional


def test_stream_shapes_chunks_as_langgraph_does() -> None:
    remote, client = fake(PARTS)
    config = {"configurable": {"thread_id": "t"}}

    assert list(remote.stream({}, config, stream_mode="values")) == [{"v": 1}]
    assert list(remote.stream({}, config)) == [{"node": {"v": 1}}]
    assert list(remote.stream({}, config, stream_mode="messages")) == [
        ({"content": "hi"}, {"meta": 1})
    ]
    assert list(remote.stream({}, config, stream_mode=["updates"], subgraphs=True)) == [
        ((), "updates", {"node": {"v": 1}}),
        (("child:1",), "updates", {"inner": {}}),
    ]
    assert list(remote.stream({}, config, stream_mode=["values"])) == [PARTS[0]]
    kwargs = client.runs.stream.call_args.kwargs
    assert kwargs["thread_id"] == "t"
    assert kwargs["config"]["configurable"] == {}
    assert kwargs["if_not_exists"] == "create"
    assert kwargs["stream_mode"] == ["values", "updates"]


def test_invoke_returns_the_last_values_and_v2_returns_graph_output() -> None:
    remote, _ = fake(
        [
            StreamPart(event="values", data={"v": 1}, id=None),
            StreamPart(
                event="values",
                data={"v": 2, "__interrupt__": [{"value": "q", "id": "i"}]},
                id=None,
            ),
        ]
    )

    assert remote.invoke({})["v"] == 2
    assert remote.invoke({}, version="v2") == GraphOutput(
        value={"v": 2}, interrupts=(Interrupt(value="q", id="i"),)
    )
    empty, _ = fake([])
    assert empty.invoke({}) is None


def test_a_command_input_is_sent_as_the_runs_command() -> None:
    remote, client = fake([])

    remote.invoke(Command(resume="yes"), {"configurable": {"thread_id": "t"}})

    kwargs = client.runs.stream.call_args.kwargs
    assert kwargs["input"] is None
    assert kwargs["command"] == {"resume": "yes"}


def test_an_interrupt_raises_only_when_called_from_a_graph() -> None:
    paused = StreamPart(
        event="updates", data={"__interrupt__": [{"value": "q?", "id": "i1"}]}, id=None
    )
    remote, _ = fake([paused])

    assert list(remote.stream({}, {"configurable": {"thread_id": "t"}})) == [
        paused.data
    ]
    nested = {"configurable": {"thread_id": "t", "checkpoint_ns": "node:1"}}
    with pytest.raises(GraphInterrupt) as raised:
        list(remote.stream({}, nested))
    assert raised.value.interrupts == (Interrupt(value="q?", id="i1"),)


def test_error_and_parent_command_events_raise() -> None:
    remote, _ = fake([StreamPart(event="error", data={"error": "Boom"}, id=None)])
    with pytest.raises(RemoteException) as failed:
        remote.invoke({})
    assert failed.value.args[0] == {"error": "Boom"}

    remote, _ = fake(
        [
            StreamPart(
                event="command", data={"graph": "__parent__", "goto": "x"}, id=None
            )
        ]
    )
    with pytest.raises(ParentCommand) as bubbled:
        remote.invoke({})
    assert bubbled.value.command.goto == "x"


def test_with_config_merges_into_a_copy() -> None:
    remote = RemoteGraph(
        "g", config={"configurable": {"foo": "bar", "thread_id": "t1"}}, name="n"
    )

    copied = remote.with_config({"configurable": {"hello": "world"}})

    assert copied is not remote
    assert copied.name == "n"
    assert copied.config == {
        "configurable": {"foo": "bar", "thread_id": "t1", "hello": "world"}
    }


def test_missing_clients_and_unsupported_calls_say_what_to_do() -> None:
    remote = RemoteGraph("g")

    with pytest.raises(ValueError, match="provide `url` or `sync_client`"):
        remote.invoke({})
    with pytest.raises(NotImplementedError, match="update_state"):
        remote.bulk_update_state({}, [])
    with pytest.raises(NotImplementedError, match=r"stream\(\)"):
        remote.stream_events({})


def test_state_methods_address_the_configs_checkpoint() -> None:
    client = MagicMock()
    client.threads.update_state.return_value = {
        "checkpoint": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c9"}
    }
    remote = RemoteGraph("g", sync_client=client)

    config = remote.update_state(
        {"configurable": {"thread_id": "t", "checkpoint_id": "c1"}}, {"a": 1}, "node"
    )

    assert config["configurable"]["checkpoint_id"] == "c9"
    kwargs = client.threads.update_state.call_args.kwargs
    assert kwargs["checkpoint"] == {"thread_id": "t", "checkpoint_id": "c1"}
    assert kwargs["as_node"] == "node"


def test_the_sdk_is_imported_only_to_make_a_client_from_url() -> None:
    script = """
import sys
sys.modules["langgraph_sdk"] = None
from engine.pregel.remote import RemoteGraph
RemoteGraph("g", sync_client=object())
try:
    RemoteGraph("g", url="http://localhost")
except ImportError as exc:
    print(exc)
"""
    assert "needs the langgraph-sdk package" in run_python(script)


def test_the_node_name_is_the_given_name_or_the_assistant() -> None:
    assert RemoteGraph("g").name == "g"
    assert RemoteGraph("g", name="review").name == "review"
