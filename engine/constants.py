"""Public graph constants (``START``, ``END``, ``TAG_HIDDEN``...), as in ``langgraph.constants``."""

from __future__ import annotations

import sys

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINTER,
    END,
    START,
    TASKS,
)

__all__ = (
    "CONF",
    "CONFIG_KEY_CHECKPOINTER",
    "END",
    "START",
    "TAG_HIDDEN",
    "TAG_NOSTREAM",
    "TASKS",
)

TAG_HIDDEN = sys.intern("langsmith:hidden")
"""Tag that hides a node from tracing and some streams."""
TAG_NOSTREAM = sys.intern("nostream")
"""Tag that keeps a model's tokens out of ``stream_mode="messages"``."""
