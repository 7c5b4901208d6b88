"""Agents compiled to graphs (LangChain 1.x's ``langchain.agents``): :func:`create_agent`.

A model, tools, middleware and a response format become a ``StateGraph`` run by
the engine, so checkpoints, interrupts, streaming and time travel work on every
agent. See :mod:`engine.agents.factory` for the graph's shape and
:mod:`engine.agents.middleware` for middleware.
"""

from __future__ import annotations

from engine.agents.factory import create_agent
from engine.agents.middleware.types import AgentState

__all__ = ("AgentState", "create_agent")
