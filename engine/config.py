"""Accessors for the running task's config, store and stream writer (LangGraph's ``langgraph.config``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine._internal._scope import current_scope, require_scope
from engine._internal._typing import RunnableConfig

__all__ = ("get_config", "get_store", "get_stream_writer")


def get_config() -> RunnableConfig:
    """The config of the running task (thread id, checkpoint ns, tags, metadata...)."""
    config: RunnableConfig = require_scope("get_config()").config
    return config


def get_store() -> Any:
    """The store given to ``compile(store=...)`` or the entrypoint, or ``None``."""
    return require_scope("get_store()").runtime.store


def get_stream_writer() -> Callable[[Any], None]:
    """A function that writes chunks to the ``custom`` stream (a no-op outside a run)."""
    scope = current_scope()
    if scope is None:
        return lambda _chunk: None
    return scope.stream_writer
