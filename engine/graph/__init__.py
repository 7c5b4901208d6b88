"""StateGraph and friends: the builder API (mirrors ``langgraph.graph``)."""

from __future__ import annotations

from engine._internal._constants import END, START
from engine.graph.message import MessagesState, add_messages
from engine.graph.state import CompiledStateGraph, StateGraph

__all__ = (
    "END",
    "START",
    "CompiledStateGraph",
    "MessagesState",
    "StateGraph",
    "add_messages",
)
