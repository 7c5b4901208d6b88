"""Errors a person can act on. Engine failures are translated here and nowhere else."""

from __future__ import annotations

from engine.errors import (
    EmptyInputError,
    GraphRecursionError,
    InvalidUpdateError,
    NodeTimeoutError,
    SerializationError,
)

__all__ = (
    "ENGINE_USER_ERRORS",
    "CheckpointNotFound",
    "Conflict",
    "Forbidden",
    "GraphNotFound",
    "GraphUnavailable",
    "InvalidInput",
    "NotFound",
    "RunFailed",
    "StoredStateUnreadable",
    "StudioError",
    "ThreadNotFound",
    "from_engine",
    "from_storage",
)

ENGINE_USER_ERRORS = (
    GraphRecursionError,
    InvalidUpdateError,
    NodeTimeoutError,
    EmptyInputError,
)


class StudioError(Exception):
    """Carries what the UI needs: a stable code, an HTTP status, a title and a message."""

    code: str = "studio_error"
    http_status: int = 409
    title: str = "That did not work"

    def __init__(self, message: str, **detail: object) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class InvalidInput(StudioError):
    code = "invalid_input"
    http_status = 422
    title = "Please check your input"


class Conflict(StudioError):
    code = "conflict"
    http_status = 409
    title = "Conflict"


class RunFailed(Conflict):
    code = "run_failed"
    title = "The run failed"


class Forbidden(StudioError):
    """Signed in and allowed to see the thing, but not to do this to it."""

    code = "forbidden"
    http_status = 403
    title = "Not allowed"


class NotFound(StudioError):
    code = "not_found"
    http_status = 404
    title = "Not found"


class GraphNotFound(NotFound):
    code = "graph_not_found"
    title = "No such graph"


class GraphUnavailable(StudioError):
    """A registered graph cannot be imported, compiled or drawn: an operator's problem.

    503, not 500: nothing is wrong with the request, and the page names the
    ``STUDIO_GRAPHS`` entry and the reason so the operator can fix it.
    """

    code = "graph_unavailable"
    http_status = 503
    title = "Graph unavailable"


class ThreadNotFound(NotFound):
    code = "thread_not_found"
    title = "No such thread"


class CheckpointNotFound(NotFound):
    code = "checkpoint_not_found"
    title = "No such checkpoint"


class StoredStateUnreadable(Conflict):
    """A stored checkpoint the engine refuses to read: corrupt, or tampered with
    (pickle, a class that is not allowed). Nothing was loaded or run; the thread
    needs an operator, and the request may be retried once it is repaired."""

    code = "stored_state_unreadable"
    title = "Stored state unreadable"


def from_storage(exc: Exception) -> StudioError | None:
    """``exc`` as the error a person sees when it is the engine refusing stored
    data (``SerializationError``); None for anything else."""
    if not isinstance(exc, SerializationError):
        return None
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return StoredStateUnreadable(
        f"This thread's stored state cannot be read, so it is not shown: {reason}",
        engine_error=type(exc).__name__,
    )


def from_engine(exc: Exception) -> RunFailed:
    return RunFailed(str(exc), engine_error=type(exc).__name__)
