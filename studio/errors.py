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
    "Conflict",
    "GraphNotFound",
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


class NotFound(StudioError):
    code = "not_found"
    http_status = 404
    title = "Not found"


class GraphNotFound(NotFound):
    code = "graph_not_found"
    title = "No such graph"


class ThreadNotFound(NotFound):
    code = "thread_not_found"
    title = "No such thread"


def from_engine(exc: Exception) -> RunFailed:
    return RunFailed(str(exc), engine_error=type(exc).__name__)
