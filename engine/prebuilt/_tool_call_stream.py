"""ToolCallStream: the live handle of one tool call in a v3 run (``run.tool_calls``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from engine.stream.stream_channel import StreamChannel

__all__ = ("ToolCallStream",)


class ToolCallStream:
    """One tool call as its ``tools`` events arrive; built by ToolCallTransformer.

    ``tool_call_id``, ``tool_name`` and ``input`` are known from the start;
    iterate the handle (``for``, or ``async for`` in an async run) for the
    deltas the tool streamed with ``ToolRuntime.emit_output_delta``, in order;
    the iteration ends when the call ends. Then ``completed`` is True and either
    ``output`` holds the answer (a tool message's content) or ``error`` the
    failure's message.
    """

    def __init__(
        self, tool_call_id: str, tool_name: str, input: dict[str, Any] | None = None
    ) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.input = input
        self._output_deltas: StreamChannel[Any] = StreamChannel()
        self.output: Any = None
        """The call's answer once it finished (None while running or after an error)."""
        self.error: str | None = None
        """The failure's message once it failed (None otherwise)."""
        self.completed = False
        """The call finished or failed."""

    @property
    def output_deltas(self) -> StreamChannel[Any]:
        """The streamed deltas, in order; closed when the call ends."""
        return self._output_deltas

    def _bind(self, *, is_async: bool) -> None:
        self._output_deltas._bind(is_async=is_async)

    def _push_delta(self, delta: Any) -> None:
        self._output_deltas.push(delta)

    def _finish(self, output: Any) -> None:
        self.output = output
        self.completed = True
        self._output_deltas.close()

    def _fail(self, message: str) -> None:
        self.error = message
        self.completed = True
        self._output_deltas.close()

    def __iter__(self) -> Iterator[Any]:
        """The deltas (sync runs; an async run's handle raises TypeError)."""
        return iter(self._output_deltas)

    def __aiter__(self) -> AsyncIterator[Any]:
        """The deltas (async runs; a sync run's handle raises TypeError)."""
        return self._output_deltas.__aiter__()

    def __repr__(self) -> str:
        if not self.completed:
            status = "running"
        else:
            status = "failed" if self.error is not None else "completed"
        return (
            f"ToolCallStream(tool_call_id={self.tool_call_id!r}, "
            f"tool_name={self.tool_name!r}, status={status})"
        )
