"""ToolCallTransformer: ``run.tool_calls`` of a v3 run, from the ``tools`` stream mode."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine.prebuilt._tool_call_stream import ToolCallStream
from engine.stream._types import ProtocolEvent, StreamTransformer
from engine.stream.stream_channel import StreamChannel

__all__ = ("ToolCallTransformer",)


def _answer_content(output: Any) -> Any:
    """A tool message's content (LangChain message, its serialized form, or the
    engine's dict message); anything else (a ``Command``...) as it is."""
    if isinstance(output, dict):
        if output.get("role") == "tool" and "content" in output:
            return output["content"]
        ids = output.get("id")
        if (
            output.get("type") == "constructor"
            and isinstance(ids, list)
            and ids
            and ids[-1] == "ToolMessage"
        ):
            kwargs = output.get("kwargs")
            return kwargs.get("content") if isinstance(kwargs, dict) else output
        return output
    if getattr(output, "type", None) == "tool" and hasattr(output, "tool_call_id"):
        return output.content
    return output


class ToolCallTransformer(StreamTransformer):
    """``run.tool_calls``: one :class:`ToolCallStream` per tool call at this scope.

    Opt in with ``compile(transformers=[ToolCallTransformer])`` or
    ``stream_events(..., version="v3", transformers=[ToolCallTransformer])``; the
    run then streams the ``tools`` mode (see :mod:`engine.prebuilt._tool_events`).
    A ``tool-started`` event adds a handle, deltas feed it, ``tool-finished``
    and ``tool-error`` end it. The ``tools`` events themselves stay in the main
    event log (for clients that rebuild the handles elsewhere); the handles are
    live objects, so ``run.tool_calls`` is never put on the wire. A subgraph's
    calls belong to that subgraph's handle, not to its parent's ``tool_calls``.
    Calls still open when the run ends are closed (without output), or failed
    with the run's error.
    """

    _native = True
    required_stream_modes = ("tools",)

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._log: StreamChannel[ToolCallStream] = StreamChannel()
        self._open: dict[str, ToolCallStream] = {}
        self._scope_list = list(scope)
        self._is_async = False
        self._pump_fn: Callable[[], bool] | None = None
        self._apump_fn: Callable[[], Awaitable[bool]] | None = None

    def init(self) -> dict[str, Any]:
        return {"tool_calls": self._log}

    def _on_register(self, mux: Any) -> None:
        self._is_async = bool(mux.is_async)

    def _bind_pump(self, fn: Callable[[], bool]) -> None:
        self._pump_fn = fn

    def _bind_apump(self, fn: Callable[[], Awaitable[bool]]) -> None:
        self._apump_fn = fn

    def _open_call(self, data: dict[str, Any], tool_call_id: str) -> None:
        handle = ToolCallStream(
            tool_call_id, data.get("tool_name", ""), data.get("input")
        )
        handle._bind(is_async=self._is_async)
        deltas = handle.output_deltas
        deltas._request_more = self._pump_fn
        deltas._arequest_more = self._apump_fn
        self._open[tool_call_id] = handle
        self._log.push(handle)

    def process(self, event: ProtocolEvent) -> bool:
        if event["method"] != "tools":
            return True
        params = event["params"]
        if params["namespace"] != self._scope_list:
            return True
        data = params["data"]
        tool_call_id = data.get("tool_call_id") if isinstance(data, dict) else None
        if tool_call_id is None:
            return True
        kind = data.get("event")
        if kind == "tool-started":
            self._open_call(data, tool_call_id)
        elif kind == "tool-output-delta":
            if (handle := self._open.get(tool_call_id)) is not None:
                handle._push_delta(data.get("delta"))
        elif kind in ("tool-finished", "tool-error"):
            if (handle := self._open.pop(tool_call_id, None)) is None:
                return True
            if kind == "tool-finished":
                handle._finish(_answer_content(data.get("output")))
            else:
                handle._fail(data.get("message", ""))
        return True

    def finalize(self) -> None:
        for handle in self._open.values():
            handle._finish(None)
        self._open.clear()

    def fail(self, err: BaseException) -> None:
        message = str(err)
        for handle in self._open.values():
            handle._fail(message)
        self._open.clear()
