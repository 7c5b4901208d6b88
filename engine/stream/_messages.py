"""MessagesTransformer: ``run.messages``, one LangChain ``ChatModelStream`` per message.

It reads ``messages`` events at its own scope whose payload is either a
content-block protocol event (a dict with an ``"event"`` key: ``message-start``,
``content-block-*``, ``message-finish``; correlated by the metadata's
``run_id``) or a finished chat message that a node returned (replayed as the
same events). Token chunks of the v1 ``messages`` mode (``AIMessageChunk``)
are ignored, as in LangGraph, and so are tool messages (they belong to the
``tools`` channel and the state).

The handles are langchain-core's ``ChatModelStream``/``AsyncChatModelStream``,
so this projection needs langchain-core; without it ``run.messages`` exists and
stays empty.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine.stream._types import ProtocolEvent, StreamTransformer
from engine.stream.stream_channel import StreamChannel

__all__ = ("MessagesTransformer",)


def _langchain() -> Any:
    try:
        from langchain_core.language_models import (  # noqa: PLC0415
            _compat_bridge,
            chat_model_stream,
        )
        from langchain_core.messages import (  # noqa: PLC0415
            AIMessageChunk,
            BaseMessage,
            ToolMessage,
        )
    except ImportError:  # langchain-core is optional
        return None
    return (
        chat_model_stream.ChatModelStream,
        chat_model_stream.AsyncChatModelStream,
        _compat_bridge.message_to_events,
        BaseMessage,
        AIMessageChunk,
        ToolMessage,
    )


class MessagesTransformer(StreamTransformer):
    """``run.messages``: a chat model stream handle per message, at this scope."""

    _native = True
    required_stream_modes = ("messages",)

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._log: StreamChannel[Any] = StreamChannel()
        self._by_run: dict[str, Any] = {}
        self._ignored_runs: set[str] = set()
        self._pump_fn: Callable[[], bool] | None = None
        self._apump_fn: Callable[[], Awaitable[bool]] | None = None
        self._scope_list = list(scope)
        self._lc: Any = None

    def init(self) -> dict[str, Any]:
        return {"messages": self._log}

    def _bind_pump(self, fn: Callable[[], bool]) -> None:
        self._pump_fn = fn

    def _bind_apump(self, fn: Callable[[], Awaitable[bool]]) -> None:
        self._apump_fn = fn

    def _new_stream(self, node: str | None, message_id: str | None) -> Any:
        sync_cls, async_cls = self._lc[0], self._lc[1]
        if self._apump_fn is not None or self._pump_fn is None:
            stream = async_cls(namespace=[], node=node, message_id=message_id)
            if self._apump_fn is not None:
                stream.set_arequest_more(self._apump_fn)
            return stream
        stream = sync_cls(namespace=[], node=node, message_id=message_id)
        stream.set_request_more(self._pump_fn)
        return stream

    def process(self, event: ProtocolEvent) -> bool:
        if event["method"] != "messages":
            return True
        params = event["params"]
        if params["namespace"] != self._scope_list:
            return True
        if self._lc is None:
            self._lc = _langchain() or False
        if not self._lc:
            return True
        payload, metadata = params["data"]
        metadata = metadata or {}
        node = metadata.get("langgraph_node")
        if isinstance(payload, dict) and "event" in payload:
            self._route_event(payload, str(metadata.get("run_id", "")), node)
            return True
        base, chunk, tool = self._lc[3], self._lc[4], self._lc[5]
        if isinstance(payload, base) and not isinstance(payload, (chunk, tool)):
            stream = self._new_stream(node, payload.id)
            for item in self._lc[2](payload, message_id=payload.id):
                stream.dispatch(item)
            self._log.push(stream)
        return True

    def _route_event(
        self, event: dict[str, Any], run_id: str, node: str | None
    ) -> None:
        kind = event.get("event")
        if kind == "message-start":
            if event.get("role") == "tool":
                self._ignored_runs.add(run_id)
                return
            message_id = event.get("message_id")
            stream = self._new_stream(
                node, str(message_id) if message_id is not None else None
            )
            self._by_run[run_id] = stream
            self._log.push(stream)
            stream.dispatch(event)
        elif run_id in self._ignored_runs:
            if kind == "message-finish":
                self._ignored_runs.discard(run_id)
        elif (stream := self._by_run.get(run_id)) is not None:
            stream.dispatch(event)
            if kind == "message-finish":
                del self._by_run[run_id]

    def finalize(self) -> None:
        self._by_run.clear()
        self._ignored_runs.clear()

    def fail(self, err: BaseException) -> None:
        for stream in self._by_run.values():
            stream.fail(err)
        self._by_run.clear()
        self._ignored_runs.clear()
