"""Prebuilt graphs and nodes: tool execution and a tool-calling agent (``langgraph.prebuilt``)."""

from __future__ import annotations

from engine.prebuilt._tool_call_transformer import ToolCallTransformer
from engine.prebuilt.chat_agent_executor import create_react_agent
from engine.prebuilt.chat_model import (
    ChatModel,
    ScriptedChatModel,
    acall_model,
    call_model,
)
from engine.prebuilt.tool_node import (
    InjectedState,
    InjectedStore,
    ToolNode,
    ToolRuntime,
    tools_condition,
)
from engine.prebuilt.tool_validator import ValidationNode
from engine.prebuilt.tools import Tool, as_tool, tool

__all__ = (
    "ChatModel",
    "InjectedState",
    "InjectedStore",
    "ScriptedChatModel",
    "Tool",
    "ToolCallTransformer",
    "ToolNode",
    "ToolRuntime",
    "ValidationNode",
    "acall_model",
    "as_tool",
    "call_model",
    "create_react_agent",
    "tool",
    "tools_condition",
)
