"""The metadata of ``stream_mode="messages"`` parts, and which messages are streamed.

As LangGraph 1.2.24 (observed): a part's metadata holds the run config's
metadata (``lc_agent_name``...), the task's ``langgraph_*`` keys, the node's own
metadata and the thread id; a streamed chunk's (a model run's) also has the
run's ``tags``, and a chat model's tokens the model run's callback metadata
(LangChain's: the model's ``ls_*`` parameters, ``lc_versions``, the config's
``configurable`` scalars such as ``checkpoint_ns``). A message the node was given in its input is not streamed again
when the node returns it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk

from engine.checkpoint.memory import InMemorySaver
from engine.config import get_message_writer
from engine.graph import START, MessagesState, StateGraph

CONFIG: Any = {
    "configurable": {"thread_id": "t", "user_id": "u1"},
    "tags": ["t1"],
    "metadata": {"lc_agent_name": "bob"},
}


def reply(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage("hi", id="m1")]}


def test_a_returned_messages_metadata() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("model", reply, metadata={"nodemeta": 1})
    builder.add_edge(START, "model")
    graph = builder.compile(checkpointer=InMemorySaver())

    ((message, metadata),) = graph.stream(
        {"messages": []}, CONFIG, stream_mode="messages"
    )

    assert message.content == "hi"
    assert metadata == {
        "lc_agent_name": "bob",
        "nodemeta": 1,
        "thread_id": "t",
        "langgraph_step": 1,
        "langgraph_node": "model",
        "langgraph_triggers": ("branch:to:model",),
        "langgraph_path": ("__pregel_pull", "model"),
        "langgraph_checkpoint_ns": metadata["langgraph_checkpoint_ns"],
    }
    assert metadata["langgraph_checkpoint_ns"].startswith("model:")


def test_a_streamed_chunk_also_carries_the_runs_tags() -> None:
    def model(state: MessagesState) -> dict[str, Any]:
        get_message_writer()(AIMessageChunk("hel", id="m2"))
        return {"messages": [AIMessage("hello", id="m2")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    graph = builder.compile().with_config(tags=["ctag"])

    parts = list(graph.stream({"messages": []}, CONFIG, stream_mode="messages"))

    ((chunk, metadata),) = parts  # the returned message was streamed already
    assert chunk.content == "hel"
    assert metadata["tags"] == ["ctag", "t1"]
    assert metadata["lc_agent_name"] == "bob"


def test_get_config_sees_the_nodes_metadata() -> None:
    seen: list[Any] = []

    def node(state: MessagesState, config: Any) -> dict[str, Any]:
        seen.append(config["metadata"])
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("node", node, metadata={"team": "x"})
    builder.add_edge(START, "node")

    builder.compile().invoke({"messages": []}, {"metadata": {"lc_agent_name": "a"}})

    assert seen[0]["team"] == "x" and seen[0]["lc_agent_name"] == "a"


def test_messages_a_node_was_given_are_not_streamed_again() -> None:
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    inner.add_node("inner", reply)
    inner.add_edge(START, "inner")
    outer: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    outer.add_node("model", reply)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "model")
    outer.add_edge("model", "sub")

    parts = list(
        outer.compile().stream(
            {"messages": [("user", "hi")]},
            CONFIG,
            stream_mode="messages",
            subgraphs=True,
        )
    )

    # the subgraph returns the whole conversation, which it was given
    assert [(ns, part[0].id) for ns, part in parts] == [((), "m1")]


def test_a_chat_models_tokens_carry_its_runs_callback_metadata() -> None:
    from langchain_core.language_models.fake_chat_models import (  # noqa: PLC0415
        GenericFakeChatModel,
    )

    chat = GenericFakeChatModel(messages=iter([AIMessage("hello there", id="m3")]))

    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("model", model, metadata={"nodemeta": 1})
    builder.add_edge(START, "model")
    graph = builder.compile(checkpointer=InMemorySaver())

    parts = list(graph.stream({"messages": []}, CONFIG, stream_mode="messages"))

    assert "".join(chunk.content for chunk, _ in parts) == "hello there"
    for _, metadata in parts:
        assert metadata["ls_provider"] == "genericfakechatmodel"
        assert metadata["ls_model_type"] == "chat"
        assert "langchain-core" in metadata["lc_versions"]
        assert metadata["checkpoint_ns"] == metadata["langgraph_checkpoint_ns"]
        assert metadata["langgraph_node"] == "model"
        assert metadata["nodemeta"] == 1
        assert metadata["lc_agent_name"] == "bob"
        assert metadata["tags"] == ["t1"]
