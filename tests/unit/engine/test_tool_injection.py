"""ToolNode injects the graph state, the store and a ToolRuntime into tools.

As documented for ``langgraph.prebuilt``: a parameter annotated
``Annotated[dict, InjectedState]`` receives the state, ``InjectedState("foo")``
its ``foo`` key, ``Annotated[..., InjectedStore()]`` the graph's store, and a
parameter typed ``ToolRuntime`` all of it plus the call's id. The model never
sees these parameters in the tool's schema.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from engine.graph import START, StateGraph
from engine.prebuilt import (
    InjectedState,
    InjectedStore,
    ToolNode,
    ToolRuntime,
    tool,
)
from engine.prebuilt.tools import as_tool
from engine.store.memory import InMemoryStore


class Chat(TypedDict):
    messages: Annotated[list[Any], operator.add]
    user: str


def state_tool(x: int, state: Annotated[dict, InjectedState]) -> str:
    """Count the messages."""
    return f"{x}:{len(state['messages'])}:{state['user']}"


def user_tool(x: int, user: Annotated[str, InjectedState("user")]) -> str:
    """Greet the user."""
    return f"hello {user} {x + 1}"


def store_tool(key: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Remember a key."""
    store.put(("notes",), key, {"v": 1})
    return "saved"


def runtime_tool(x: int, runtime: ToolRuntime) -> str:
    """Everything at once."""
    return (
        f"{runtime.tool_call_id}:{runtime.state['user']}:"
        f"{runtime.store is not None}:{runtime.config['configurable']['thread']}"
    )


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {"name": name, "args": args, "id": f"c{i}"}
        for i, (name, args) in enumerate(pairs)
    ]
    return {"role": "assistant", "content": "", "tool_calls": tool_calls}


def run(tools: list[Any], message: dict[str, Any], **compile_kwargs: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Chat)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "tools")
    graph = builder.compile(**compile_kwargs)
    config = {"configurable": {"thread": "th"}}
    result = graph.invoke({"messages": [message], "user": "ann"}, config)
    return [m["content"] for m in result["messages"][1:]]


def test_injected_state_passes_the_whole_state_or_one_key() -> None:
    message = calls(("state_tool", {"x": 1}), ("user_tool", {"x": 1}))

    assert run([state_tool, user_tool], message) == ["1:1:ann", "hello ann 2"]


def test_injected_store_passes_the_graphs_store() -> None:
    store = InMemoryStore()

    contents = run([store_tool], calls(("store_tool", {"key": "k"})), store=store)

    assert contents == ["saved"]
    assert store.get(("notes",), "k").value == {"v": 1}


def test_a_tool_runtime_parameter_gets_the_call_the_state_and_the_store() -> None:
    contents = run(
        [runtime_tool], calls(("runtime_tool", {"x": 1})), store=InMemoryStore()
    )

    assert contents == ["c0:ann:True:th"]


def test_injected_parameters_are_hidden_from_the_model() -> None:
    for func, visible in [
        (state_tool, {"x"}),
        (user_tool, {"x"}),
        (store_tool, {"key"}),
        (runtime_tool, {"x"}),
    ]:
        assert set(as_tool(func).parameters["properties"]) == visible
        assert set(tool(func).parameters["properties"]) == visible


def test_a_value_the_model_sends_for_an_injected_parameter_is_replaced() -> None:
    message = calls(("user_tool", {"x": 1, "user": "mallory"}))

    assert run([user_tool], message) == ["hello ann 2"]


async def test_the_async_path_injects_too() -> None:
    node = ToolNode([user_tool])
    state = {"messages": [calls(("user_tool", {"x": 2}))], "user": "bo"}

    result = await node.ainvoke(state)

    assert result["messages"][0]["content"] == "hello bo 3"


def test_outside_a_graph_the_store_is_none() -> None:
    node = ToolNode([store_tool, state_tool])
    state = {"messages": [calls(("state_tool", {"x": 1}))], "user": "cy"}

    assert node.invoke(state)["messages"][0]["content"] == "1:1:cy"
