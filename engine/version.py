"""The engine's version, at LangGraph's address (``langgraph.version``)."""

from __future__ import annotations

from engine import __version__

__all__ = ("__version__",)
