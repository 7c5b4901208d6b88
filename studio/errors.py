"""Errors a person can act on. Engine failures are translated here and nowhere else."""

from __future__ import annotations

from engine.errors import (
    EmptyInputError,
    GraphRecursionError,
    InvalidUpdateError,
    NodeTimeoutError,
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
    "StudioError",
    "ThreadNotFound",
    "from_engine",
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


def from_engine(exc: Exception) -> RunFailed:
    return RunFailed(str(exc), engine_error=type(exc).__name__)
