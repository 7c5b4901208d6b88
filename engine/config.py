"""Accessors for the running task's config, store and stream writer (LangGraph's ``langgraph.config``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine._internal._scope import current_scope, require_scope
from engine._internal._typing import RunnableConfig

__all__ = ("get_config", "get_message_writer", "get_store", "get_stream_writer")


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


def get_message_writer() -> Callable[[Any], None]:
    """A function that streams a chat message chunk (``stream_mode="messages"``).

    Model integrations call it once per token chunk; messages whose chunks were
    streamed are not streamed again when the node returns them. A no-op when
    nobody streams messages.
    """
    scope = current_scope()
    if scope is None or scope.message_writer is None:
        return lambda _chunk: None
    return scope.message_writer
