"""Type variables for annotating graphs, at LangGraph's address (``langgraph.typing``).

``StateGraph[StateT, ContextT, InputT, OutputT]``: the state, the run context
(default ``None``), and the input and output schemas (default: the state).
"""

from __future__ import annotations

from typing_extensions import TypeVar

__all__ = (
    "ContextT",
    "InputT",
    "OutputT",
    "StateT",
    "StateT_co",
    "StateT_contra",
)

StateT = TypeVar("StateT")
"""The graph's state schema."""

StateT_co = TypeVar("StateT_co", covariant=True)

StateT_contra = TypeVar("StateT_contra", contravariant=True)

ContextT = TypeVar("ContextT", default=None)
"""The run's context schema (``invoke(..., context=...)``); ``None`` by default."""

InputT = TypeVar("InputT", default=StateT)
"""The graph's input schema; the state schema by default."""

OutputT = TypeVar("OutputT", default=StateT)
"""The graph's output schema; the state schema by default."""
