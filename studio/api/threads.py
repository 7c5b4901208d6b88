"""The threads resource: threads, their state and history (``studio.services.thread_api``,
``studio.services.thread_state_api``).

Permissions are the pages': another user's thread is 404 on every address; the
reviewers of a governed thread read it (get, state, history, search) but get
403 when they try to change it (patch, delete, copy, update state).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from studio.api import schemas
from studio.api.routes import Route, register
from studio.services import thread_api, thread_state_api

__all__ = ("urlpatterns",)

_READ_ERRORS = (401, 404, 422)
_CHANGE_ERRORS = (401, 403, 404, 409, 422)


def thread_create(request: HttpRequest, *, body: schemas.ThreadCreate) -> Any:
    return thread_api.create(request.user, **body.model_dump())


def thread_search(request: HttpRequest, *, body: schemas.ThreadSearch) -> JsonResponse:
    found, more = thread_api.search(request.user, **body.model_dump())
    response = JsonResponse(found, safe=False)
    if more:
        response["X-Pagination-Next"] = str(body.offset + body.limit)
    return response


def thread_count(request: HttpRequest, *, body: schemas.ThreadCount) -> int:
    return thread_api.count(request.user, **body.model_dump())


def thread_get(request: HttpRequest, thread_id: str) -> Any:
    return thread_api.get(request.user, thread_id)


def thread_patch(
    request: HttpRequest, thread_id: str, *, body: schemas.ThreadPatch
) -> Any:
    return thread_api.patch(request.user, thread_id, body.metadata)


def thread_delete(request: HttpRequest, thread_id: str) -> None:
    thread_api.delete(request.user, thread_id)


def thread_copy(request: HttpRequest, thread_id: str) -> Any:
    return thread_api.copy(request.user, thread_id)


def thread_state(
    request: HttpRequest, thread_id: str, *, query: schemas.StateQuery
) -> Any:
    return thread_state_api.state(request.user, thread_id, subgraphs=query.subgraphs)


def thread_state_at(
    request: HttpRequest,
    thread_id: str,
    checkpoint_id: str,
    *,
    query: schemas.StateQuery,
) -> Any:
    return thread_state_api.state(
        request.user, thread_id, checkpoint_id=checkpoint_id, subgraphs=query.subgraphs
    )


def thread_state_at_checkpoint(
    request: HttpRequest, thread_id: str, *, body: schemas.StateAtCheckpoint
) -> Any:
    return thread_state_api.state(
        request.user,
        thread_id,
        checkpoint=body.checkpoint.model_dump(),
        subgraphs=body.subgraphs,
    )


def thread_update_state(
    request: HttpRequest, thread_id: str, *, body: schemas.StateUpdate
) -> Any:
    return thread_state_api.update_state(request.user, thread_id, **body.model_dump())


def thread_history(
    request: HttpRequest, thread_id: str, *, body: schemas.HistoryRequest
) -> Any:
    return thread_state_api.history(request.user, thread_id, **body.model_dump())


urlpatterns = register(
    Route(
        "POST",
        "/threads",
        thread_create,
        name="thread-create",
        summary="Create a thread",
        tag="threads",
        body=schemas.ThreadCreate,
        response=schemas.Thread,
        errors=(401, 404, 409, 422),
        description="An existing thread_id is 409 (if_exists=raise, the default) "
        "or, with if_exists=do_nothing, the existing thread when it is yours "
        "(409 otherwise). metadata.graph_id or graph_id binds the thread to a "
        "graph (404 when unknown); without one, the first run binds it.",
    ),
    Route(
        "POST",
        "/threads/search",
        thread_search,
        name="thread-search",
        summary="Search your threads",
        tag="threads",
        body=schemas.ThreadSearch,
        response=list[schemas.Thread],
        errors=(401, 422),
        description="metadata and values match by containment; X-Pagination-Next "
        "gives the next offset when there are more.",
    ),
    Route(
        "POST",
        "/threads/count",
        thread_count,
        name="thread-count",
        summary="Count your threads",
        tag="threads",
        body=schemas.ThreadCount,
        response=int,
        errors=(401, 422),
    ),
    Route(
        "GET",
        "/threads/{thread_id}",
        thread_get,
        name="thread-get",
        summary="Get a thread",
        tag="threads",
        response=schemas.Thread,
        errors=(401, 404),
    ),
    Route(
        "PATCH",
        "/threads/{thread_id}",
        thread_patch,
        name="thread-patch",
        summary="Merge metadata into a thread's",
        tag="threads",
        body=schemas.ThreadPatch,
        response=schemas.Thread,
        errors=(401, 403, 404, 422),
    ),
    Route(
        "DELETE",
        "/threads/{thread_id}",
        thread_delete,
        name="thread-delete",
        summary="Delete a thread, its runs, events and checkpoints",
        tag="threads",
        status=204,
        errors=(401, 403, 404, 409),
        description="409 while a run is pending or running, and for a thread "
        "reviewers decided on (the approval ledger keeps it).",
    ),
    Route(
        "POST",
        "/threads/{thread_id}/copy",
        thread_copy,
        name="thread-copy",
        summary="Copy a thread with its checkpoints",
        tag="threads",
        response=schemas.Thread,
        errors=(401, 403, 404, 409),
        description="409 for a governed thread (a request id names one request) "
        "and while a run is pending or running.",
    ),
    Route(
        "POST",
        "/threads/{thread_id}/state/checkpoint",
        thread_state_at_checkpoint,
        name="thread-state-checkpoint",
        summary="Get a thread's state at a checkpoint (given in the body)",
        tag="threads",
        body=schemas.StateAtCheckpoint,
        response=schemas.ThreadState,
        errors=_READ_ERRORS,
    ),
    Route(
        "GET",
        "/threads/{thread_id}/state",
        thread_state,
        name="thread-state",
        summary="Get a thread's current state",
        tag="threads",
        query=schemas.StateQuery,
        response=schemas.ThreadState,
        errors=_READ_ERRORS,
    ),
    Route(
        "POST",
        "/threads/{thread_id}/state",
        thread_update_state,
        name="thread-update-state",
        summary="Update a thread's state as a node",
        tag="threads",
        body=schemas.StateUpdate,
        response=schemas.StateUpdateResult,
        errors=(400, *_CHANGE_ERRORS),
        description="400 for an update the engine refuses (an ambiguous update "
        "without as_node after a parallel step); 403 for a reviewer, and for "
        "everyone when a governed graph forbids the write (as a console node, or "
        "of a protected key); 409 while a run is pending or running.",
    ),
    Route(
        "GET",
        "/threads/{thread_id}/state/{checkpoint_id}",
        thread_state_at,
        name="thread-state-at",
        summary="Get a thread's state at a checkpoint",
        tag="threads",
        query=schemas.StateQuery,
        response=schemas.ThreadState,
        errors=_READ_ERRORS,
    ),
    Route(
        "POST",
        "/threads/{thread_id}/history",
        thread_history,
        name="thread-history",
        summary="List a thread's past states, newest first",
        tag="threads",
        body=schemas.HistoryRequest,
        response=list[schemas.ThreadState],
        errors=_READ_ERRORS,
    ),
)
