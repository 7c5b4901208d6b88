"""``engine.pregel.remote.RemoteGraph`` against the studio's API served by Daphne.

The same server as the SDK tests: RemoteGraph drives the ``slow_steps`` test
graph (six steps, one ``custom`` chunk each) and the purchase demo graph (which
pauses for a review), on its own and as a node of a local graph.
"""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.graph import START, StateGraph
from engine.pregel.remote import RemoteGraph
from engine.types import GraphOutput, StateSnapshot
from tests._support.live_server import LiveServer


@pytest.fixture
def remote(server: LiveServer, requester_token: str) -> RemoteGraph:
    return RemoteGraph("slow_steps", url=f"{server.url}/api", api_key=requester_token)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def test_invoke_and_stream_on_a_thread_it_creates(remote: RemoteGraph) -> None:
    config = thread()

    assert remote.invoke({"n": 0}, config) == {"n": 6, "seen": [0, 1, 2, 3, 4, 5]}
    chunks = list(
        remote.stream(
            {"n": 4}, config, stream_mode=["custom", "updates"], subgraphs=True
        )
    )

    assert chunks == [
        ((), "custom", {"progress": 4}),
        ((), "updates", {"step": {"n": 5, "seen": [4]}}),
        ((), "custom", {"progress": 5}),
        ((), "updates", {"step": {"n": 6, "seen": [5]}}),
    ]
    output = remote.invoke({"n": 6}, config, version="v2")
    assert output == GraphOutput(value={"n": 7, "seen": [0, 1, 2, 3, 4, 5, 4, 5, 6]})


def test_a_run_without_a_thread_is_stateless(remote: RemoteGraph) -> None:
    assert list(remote.stream({"n": 5}, stream_mode="custom")) == [{"progress": 5}]


def test_state_history_and_update_state(remote: RemoteGraph) -> None:
    config = thread()
    remote.invoke({"n": 3}, config)

    state = remote.get_state(config)
    assert isinstance(state, StateSnapshot)
    assert state.values == {"n": 6, "seen": [3, 4, 5]}
    assert state.next == ()
    history = list(remote.get_state_history(config))
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]  # type: ignore[index]
    assert history[0].config == state.config
    assert history[0].parent_config == history[1].config

    updated = remote.update_state(config, {"n": 100}, as_node="step")

    assert remote.get_state(updated).values["n"] == 100
    assert remote.get_state(history[2].config).values == {"n": 4, "seen": [3]}


async def test_ainvoke_astream_and_async_state(remote: RemoteGraph) -> None:
    config = thread()

    assert await remote.ainvoke({"n": 5}, config) == {"n": 6, "seen": [5]}
    chunks = [c async for c in remote.astream({"n": 5}, config, stream_mode="values")]
    assert chunks[-1] == {"n": 6, "seen": [5, 5]}
    state = await remote.aget_state(config)
    assert state.values["seen"] == [5, 5]
    assert len([s async for s in remote.aget_state_history(config, limit=2)]) == 2
    await remote.aupdate_state(config, {"n": 0})
    assert (await remote.aget_state(config)).values["n"] == 0


def test_get_graph_draws_the_remote_graph(remote: RemoteGraph) -> None:
    drawing = remote.get_graph()

    assert set(drawing.nodes) == {"__start__", "step", "__end__"}
    assert {(e.source, e.target) for e in drawing.edges} >= {
        ("__start__", "step"),
        ("step", "__end__"),
    }


class Steps(TypedDict, total=False):
    n: int
    seen: list[int]


def test_as_a_node_it_streams_into_the_parents_namespace(remote: RemoteGraph) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("remote", remote)
    builder.add_edge(START, "remote")
    parent = builder.compile()

    chunks = list(
        parent.stream(
            {"n": 4}, thread(), stream_mode=["custom", "values"], subgraphs=True
        )
    )

    custom = [(ns, data) for ns, mode, data in chunks if mode == "custom"]
    assert [data for _, data in custom] == [{"progress": 4}, {"progress": 5}]
    assert all(len(ns) == 1 and ns[0].startswith("remote:") for ns, _ in custom)
    assert chunks[-1] == ((), "values", {"n": 6, "seen": [4, 5]})


class Purchase(TypedDict, total=False):
    request_id: str
    approval_version: int
    amount_minor: int
    vendor: str
    category: str
    status: str


def test_as_a_node_a_remote_interrupt_pauses_the_parent(
    server: LiveServer, requester_token: str
) -> None:
    purchase = RemoteGraph(
        "purchase", url=f"{server.url}/api", api_key=requester_token, name="approval"
    )
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Purchase)
    builder.add_node(purchase)
    builder.add_edge(START, "approval")
    parent = builder.compile(checkpointer=InMemorySaver())
    config = thread()
    request = {
        "request_id": "REMOTE-1",
        "approval_version": 1,
        "amount_minor": 1_000,
        "vendor": "Acme",
        "category": "office",
    }

    result = parent.invoke(request, config)

    [paused] = result["__interrupt__"]
    assert paused.value["request_id"] == "REMOTE-1"
    assert parent.get_state(config).next == ("approval",)
    remote_state = purchase.get_state(config)
    assert remote_state.next == ("human_review",)
    assert remote_state.interrupts[0].id == paused.id
