"""The ``tools`` stream mode: what the ToolNode reports about each tool call.

When a run streams ``"tools"`` (``stream(stream_mode="tools")``, or a v3 run
with :class:`~engine.prebuilt.ToolCallTransformer`), every tool call the
ToolNode makes is reported at the namespace of the graph it runs in, keyed by
the call's ``tool_call_id``:

- ``{"event": "tool-started", "tool_call_id", "tool_name", "input"}`` once the
  arguments are ready (``input`` is the model's arguments, without injected ones);
- ``{"event": "tool-output-delta", "tool_call_id", "delta"}`` for each
  :meth:`ToolRuntime.emit_output_delta <engine.prebuilt.ToolRuntime.emit_output_delta>`
  call made by the tool;
- ``{"event": "tool-finished", "tool_call_id", "output"}`` with the tool's answer
  (the tool message, or the ``Command`` it returned);
- ``{"event": "tool-error", "tool_call_id", "message"}`` when the tool raised
  (``message`` is ``str(error)``), whether or not the ToolNode then answers the
  error for the model.

A tool paused by ``interrupt()`` reports nothing more: it runs again, and starts
again, on resume. Calls to unknown tools and calls a ``wrap_tool_call`` wrapper
answers itself never reach a tool and report nothing. LangGraph produces the
same events from LangChain's tool callbacks, so there any LangChain tool invoked
inside a node reports them; here the ToolNode does (``create_agent`` and
``create_react_agent`` run their tools through one).

Without ``"tools"`` in the run's stream modes nothing is built per call beyond
one lookup.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from engine._internal._scope import current_scope

__all__ = ("ToolCallReport", "emit_output_delta", "reporting_tool_call")

ToolCallWriter = Callable[[Any], None]

_current_writer: ContextVar[ToolCallWriter | None] = ContextVar(
    "engine_tool_call_writer", default=None
)
"""The ``tool-output-delta`` writer of the tool call running in this context."""

_MODE = "tools"


class ToolCallReport:
    """Emits the ``tools`` events of one tool call."""

    __slots__ = ("_sink", "_ns", "tool_call_id")

    def __init__(
        self, sink: Callable[[Any], None], ns: tuple[str, ...], tool_call_id: str
    ) -> None:
        self._sink = sink
        self._ns = ns
        self.tool_call_id = tool_call_id

    def _emit(self, payload: dict[str, Any]) -> None:
        self._sink((self._ns, _MODE, payload))

    def started(self, tool_name: str, input: Any) -> None:
        self._emit(
            {
                "event": "tool-started",
                "tool_call_id": self.tool_call_id,
                "tool_name": tool_name,
                "input": input,
            }
        )

    def delta(self, delta: Any) -> None:
        self._emit(
            {
                "event": "tool-output-delta",
                "tool_call_id": self.tool_call_id,
                "delta": delta,
            }
        )

    def finished(self, output: Any) -> None:
        self._emit(
            {
                "event": "tool-finished",
                "tool_call_id": self.tool_call_id,
                "output": output,
            }
        )

    def failed(self, error: BaseException) -> None:
        self._emit(
            {
                "event": "tool-error",
                "tool_call_id": self.tool_call_id,
                "message": str(error),
            }
        )


def _report_for(call: dict[str, Any]) -> ToolCallReport | None:
    scope = current_scope()
    if scope is None or scope.stream_sink is None:
        return None
    sink, modes = scope.stream_sink
    if _MODE not in modes:
        return None
    # the graph the tool runs in: the task's namespace without the task itself
    ns = tuple(scope.checkpoint_ns.split("|")[:-1]) if scope.checkpoint_ns else ()
    call_id = call.get("id") or str(uuid.uuid4())
    return ToolCallReport(sink, ns, str(call_id))


@contextmanager
def reporting_tool_call(
    call: dict[str, Any], tool_name: str, input: Any
) -> Iterator[ToolCallReport | None]:
    """Report one tool call on the ``tools`` stream, when the run streams it.

    Emits ``tool-started`` on entry; the body reports the end itself
    (``report.finished(output)`` or ``report.failed(error)``), since only it knows
    the answer it builds. While the body runs, :func:`emit_output_delta` writes
    this call's deltas. Yields None (and does nothing) when the run does not
    stream ``tools``.
    """
    report = _report_for(call)
    if report is None:
        yield None
        return
    token = _current_writer.set(report.delta)
    report.started(tool_name, input)
    try:
        yield report
    finally:
        # a reset from another context fails; the writer then dies with that context
        with contextlib.suppress(ValueError):
            _current_writer.reset(token)


def emit_output_delta(delta: Any) -> None:
    """Stream ``delta`` as the running tool call's ``tool-output-delta``; a no-op
    outside a reported tool call (the run does not stream ``tools``)."""
    writer = _current_writer.get()
    if writer is not None:
        writer(delta)
