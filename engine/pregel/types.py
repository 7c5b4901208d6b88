"""Types of the Pregel runtime, at LangGraph's address (``langgraph.pregel.types``).

They live in :mod:`engine.types`; this module re-exports them for code that
imports them from here.
"""

from __future__ import annotations

from engine.pregel._algo import PregelExecutableTask
from engine.types import (
    All,
    CachePolicy,
    PregelTask,
    RetryPolicy,
    StateSnapshot,
    StateUpdate,
    StreamMode,
    StreamWriter,
    default_retry_on,
)

__all__ = (
    "All",
    "CachePolicy",
    "PregelExecutableTask",
    "PregelTask",
    "RetryPolicy",
    "StateSnapshot",
    "StateUpdate",
    "StreamMode",
    "StreamWriter",
    "default_retry_on",
)
