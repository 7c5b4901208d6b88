"""Exceptions raised by the engine. A leaf module: imports nothing else from the engine.

Names and bases follow LangGraph so that ``except`` clauses port unchanged. Two
deliberate differences, both safer:

* Control-flow signals (:class:`GraphBubbleUp`: interrupts and parent commands)
  derive from :class:`BaseException`, so a bare ``except Exception`` in user code
  cannot swallow a pause. The runtime also notices an ``interrupt()`` whose signal
  was caught and re-raises it when the node returns.
* Errors a person can act on carry an :class:`ErrorCode` in their message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

__all__ = (
    "CheckpointConflictError",
    "CheckpointNotFoundError",
    "EmptyChannelError",
    "EmptyInputError",
    "ErrorCode",
    "GraphBubbleUp",
    "GraphDrained",
    "GraphInterrupt",
    "GraphRecursionError",
    "GraphValidationError",
    "InvalidResumeError",
    "InvalidUpdateError",
    "NodeCancelledError",
    "NodeError",
    "NodeInterrupt",
    "NodeTimeoutError",
    "ParentCommand",
    "SchemaMigrationError",
    "SerializationError",
    "TaskNotFound",
    "ThreadBusyError",
    "ThreadLeaseLostError",
    "UnknownInterruptError",
    "create_error_message",
    "error_message",
    "is_invalid_resume",
)


class ErrorCode(Enum):
    """Stable codes for errors a user can fix; shown at the end of the message."""

    GRAPH_RECURSION_LIMIT = "GRAPH_RECURSION_LIMIT"
    INVALID_CONCURRENT_GRAPH_UPDATE = "INVALID_CONCURRENT_GRAPH_UPDATE"
    INVALID_GRAPH_NODE_RETURN_VALUE = "INVALID_GRAPH_NODE_RETURN_VALUE"
    MULTIPLE_SUBGRAPHS = "MULTIPLE_SUBGRAPHS"
    INVALID_CHAT_HISTORY = "INVALID_CHAT_HISTORY"
    INVALID_GRAPH = "INVALID_GRAPH"
    INVALID_STATE = "INVALID_STATE"
    INVALID_RESUME = "INVALID_RESUME"
    CHECKPOINT_CONFLICT = "CHECKPOINT_CONFLICT"
    CHECKPOINT_NOT_FOUND = "CHECKPOINT_NOT_FOUND"
    THREAD_BUSY = "THREAD_BUSY"
    THREAD_LEASE_LOST = "THREAD_LEASE_LOST"
    MISSING_CHECKPOINTER = "MISSING_CHECKPOINTER"
    SCHEMA_VERSION = "SCHEMA_VERSION"
    UNSAFE_SERIALIZATION = "UNSAFE_SERIALIZATION"


def error_message(message: str, code: ErrorCode) -> str:
    """Append the error code to a message, the way every coded engine error ends."""
    return f"{message}\n(error code: {code.value})"


def create_error_message(*, message: str, error_code: ErrorCode) -> str:
    """LangGraph-compatible spelling of :func:`error_message`."""
    return error_message(message, error_code)


class GraphBubbleUp(BaseException):
    """Base of the control-flow signals that travel up through nodes.

    Not an :class:`Exception`: ``except Exception`` in user code does not catch it.
    """


class GraphDrained(GraphBubbleUp):
    """The run stopped early because its ``RunControl`` asked it to drain.

    Raised at the first step boundary after ``RunControl.request_drain()``: the
    steps that finished are saved, no further task started, and invoking the
    thread again (``graph.invoke(None, config)``) carries on from there.
    ``reason`` is what ``request_drain`` was given.
    """

    def __init__(self, reason: str = "shutdown") -> None:
        super().__init__(f"Graph drained: {reason}")
        self.reason = reason


class GraphInterrupt(GraphBubbleUp):
    """A node paused the run (``interrupt()``) or a static breakpoint was hit.

    ``args[0]`` is the sequence of :class:`engine.types.Interrupt` raised.
    """

    def __init__(self, interrupts: Sequence[Any] = ()) -> None:
        super().__init__(tuple(interrupts))

    @property
    def interrupts(self) -> tuple[Any, ...]:
        value = self.args[0] if self.args else ()
        return tuple(value)


class NodeInterrupt(GraphInterrupt):
    """Deprecated LangGraph spelling: raise ``interrupt(value)`` instead."""

    def __init__(self, value: Any, id: str | None = None) -> None:
        from engine.types import Interrupt  # noqa: PLC0415 - leaf module, avoid cycle

        if id is None:
            super().__init__([Interrupt(value)])
        else:
            super().__init__([Interrupt(value, id)])


class ParentCommand(GraphBubbleUp):
    """Carries a ``Command(graph=Command.PARENT)`` from a subgraph to its parent."""

    def __init__(self, command: Any) -> None:
        super().__init__(command)

    @property
    def command(self) -> Any:
        return self.args[0]


class GraphRecursionError(RecursionError):
    """The run exceeded ``recursion_limit`` super-steps. Raise the limit in the config::

    graph.invoke(inputs, {"recursion_limit": 100})
    """


class InvalidUpdateError(Exception):
    """A node or a caller tried to write state in a way its channels refuse."""


class GraphValidationError(ValueError):
    """The graph definition is invalid; the message names the node or edge at fault."""


class EmptyInputError(Exception):
    """A graph was invoked with empty input and there was nothing to resume."""


class EmptyChannelError(Exception):
    """A channel was read before it was ever written."""


class TaskNotFound(Exception):
    """A task id does not exist in the current step."""


class InvalidResumeError(ValueError):
    """``Command(resume=...)`` did not match the thread's state (nothing was written)."""


class UnknownInterruptError(InvalidResumeError):
    """A resume names interrupts that are not pending (nothing was written)."""

    def __init__(
        self,
        message: str,
        *,
        reason: Literal["not_pending", "empty_map", "ambiguous"],
        interrupt_ids: Sequence[str] = (),
        pending_ids: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.interrupt_ids = tuple(interrupt_ids)
        self.pending_ids = tuple(pending_ids)


class CheckpointNotFoundError(LookupError):
    """A config named a ``checkpoint_id`` that the saver does not hold."""


class CheckpointConflictError(RuntimeError):
    """Another writer advanced the thread since this run read it (one writer per thread)."""


class ThreadBusyError(CheckpointConflictError):
    """Another run holds the thread's lease: this run was refused before it ran anything.

    Not in LangGraph, which lets both runs go on and forks the thread. A
    :class:`CheckpointConflictError`, so code that already handles "another
    writer got there first" handles this too; unlike a conflict found while
    saving, nothing of this run happened, so retrying it (or passing
    ``on_busy="wait"``) is always safe. ``holder`` names the run holding the
    thread and ``expires_at`` (a UTC ``datetime``) when its lease ends unless
    renewed.
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str = "",
        checkpoint_ns: str = "",
        holder: str | None = None,
        expires_at: Any = None,
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.holder = holder
        self.expires_at = expires_at


class ThreadLeaseLostError(CheckpointConflictError):
    """A run lost its lease on the thread (it expired and another run took it over).

    Raised by the saver when such a run tries to save (nothing of that save is
    stored) and by the run itself before it starts another step, so a paused or
    stalled process never writes after another one took the thread over.
    """


class SchemaMigrationError(ValueError):
    """A checkpoint was saved under a state schema version this graph cannot read."""


class SerializationError(ValueError):
    """A value cannot be stored, or stored data names a type that is not allowed to load."""


@dataclass(frozen=True, slots=True)
class NodeError:
    """What a node's ``error_handler`` receives about the failure it handles."""

    node: str
    """Name of the node whose attempts all failed."""

    error: BaseException
    """The last exception raised by the node."""


class NodeCancelledError(Exception):
    """A node body raised ``asyncio.CancelledError`` itself (treated as a failure)."""

    def __init__(self, node: str, message: str | None = None) -> None:
        super().__init__(message or f"Node {node!r} raised asyncio.CancelledError")
        self.node = node


class NodeTimeoutError(Exception):
    """A node attempt ran past its ``TimeoutPolicy``. Not a ``TimeoutError``: retryable."""

    def __init__(
        self,
        node: str,
        elapsed: float,
        *,
        kind: Literal["idle", "run"],
        timeout: float | None = None,
        run_timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        if timeout is None:  # LangGraph's signature: the limit that fired, by kind
            timeout = idle_timeout if kind == "idle" else run_timeout
        what = "without progress" if kind == "idle" else "in total"
        super().__init__(
            f"Node {node!r} timed out after {elapsed:.3f}s ({kind}_timeout={timeout}s {what})"
        )
        self.node = node
        self.elapsed = elapsed
        self.kind = kind
        self.timeout = timeout
        self.run_timeout = run_timeout
        self.idle_timeout = idle_timeout


_INVALID_RESUME_FLAG = "_engine_invalid_resume"


def _mark_invalid_resume(error: BaseException) -> None:
    """Tag ``error`` as a resume value refused by ``interrupt(response_schema=...)``."""
    setattr(error, _INVALID_RESUME_FLAG, True)


def is_invalid_resume(error: BaseException) -> bool:
    """True when ``error`` says a resume value did not match the interrupt's schema.

    ``interrupt(value, response_schema=Model)`` validates its answer and raises
    pydantic's ``ValidationError`` when it does not fit; nothing of that answer is
    kept, so the same interrupt can be answered again. Code that handles errors
    broadly (a tool node turning failures into messages) uses this to let such a
    failure reach the caller instead.
    """
    return getattr(error, _INVALID_RESUME_FLAG, False) is True
