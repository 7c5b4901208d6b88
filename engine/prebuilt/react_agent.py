"""create_react_agent: a model that calls tools in a loop until it answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine._internal._constants import END, START
from engine.graph.message import MessagesState
from engine.graph.state import CompiledStateGraph, StateGraph
from engine.prebuilt.chat_model import acall_model, call_model
from engine.prebuilt.tool_node import ToolNode, tools_condition

__all__ = ("create_react_agent",)


def _with_prompt(
    prompt: str | Callable[[Any], list[Any]] | None, state: Any
) -> list[Any]:
    messages = list(state["messages"] if isinstance(state, dict) else state.messages)
    if prompt is None:
        return messages
    if callable(prompt):
        return list(prompt(state))
    return [{"role": "system", "content": prompt}, *messages]


def create_react_agent(
    model: Any,
    tools: Sequence[Any] | ToolNode,
    *,
    prompt: str | Callable[[Any], list[Any]] | None = None,
    state_schema: type[Any] | None = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    name: str | None = None,
    debug: bool = False,
    **kwargs: Any,
) -> CompiledStateGraph:
    """A graph ``agent -> (tools -> agent)* -> END`` over a ``messages`` state.

    The ``agent`` node calls ``model`` with the conversation and the tools'
    schemas; when the answer asks for tools, the ``tools`` node runs them and the
    model is called again with their results.
    """
    if kwargs:
        raise TypeError(
            f"create_react_agent() got unexpected arguments {sorted(kwargs)}"
        )
    tool_node = tools if isinstance(tools, ToolNode) else ToolNode(list(tools))
    tool_list = list(tool_node.tools_by_name.values())

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [call_model(model, _with_prompt(prompt, state), tool_list)]}

    async def aagent(state: Any) -> dict[str, Any]:
        return {
            "messages": [
                await acall_model(model, _with_prompt(prompt, state), tool_list)
            ]
        }

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state_schema or MessagesState)
    builder.add_node("agent", _Dual(agent, aagent))
    if tool_list:
        builder.add_node("tools", tool_node)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges(
            "agent", tools_condition, {"tools": "tools", END: END}
        )
        builder.add_edge("tools", "agent")
    else:
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
    return builder.compile(
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name or "agent",
    )


class _Dual:
    """A node usable from sync (``invoke``) and async (``ainvoke``) runs."""

    def __init__(
        self, sync: Callable[[Any], Any], asynchronous: Callable[[Any], Any]
    ) -> None:
        self.sync = sync
        self.asynchronous = asynchronous
        self.__name__ = "agent"

    def invoke(self, state: Any, config: Any = None) -> Any:
        return self.sync(state)

    async def ainvoke(self, state: Any, config: Any = None) -> Any:
        return await self.asynchronous(state)
