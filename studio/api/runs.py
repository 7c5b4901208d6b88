"""The API's runs resource: the Agent Server protocol's runs, for ``langgraph-sdk``.

Paths (relative to ``/api/``), as the reference server answers them:

- ``POST /threads/{tid}/runs`` -> 200 Run (background); ``.../runs/wait`` ->
  200 the final values (``__interrupt__`` at an interrupt, ``{"__error__":
  {"error", "message"}}`` when it failed), ``Location: .../runs/{rid}/join``;
  ``.../runs/stream`` -> SSE (``studio.api.sse``).
- ``GET /threads/{tid}/runs?limit=10&offset=0&status=`` -> Runs, newest first;
  ``GET .../runs/{rid}`` -> Run; ``DELETE .../runs/{rid}`` -> 204 (409 while
  it is pending or running).
- ``GET .../runs/{rid}/join`` -> like wait; ``GET .../runs/{rid}/stream`` -> the
  stored events as SSE, after ``Last-Event-ID`` when sent (``stream_mode`` and
  ``cancel_on_disconnect`` query parameters as the SDK sends them).
- ``POST .../runs/{rid}/cancel?wait=0|1&action=interrupt|rollback`` -> 202 and
  no body (``wait=0``), the Run once it stopped (``wait=1``); 404 for a run
  that already finished, as the reference does.
- Stateless: ``POST /runs``, ``/runs/wait``, ``/runs/stream`` run on a new thread
  of the caller's, deleted after the run unless ``on_completion="keep"``.

A ``command.resume`` to a thread waiting for a reviewer (a governed graph's
console interrupt) is a decision of the reviewer console
(``studio.services.api_runs``): the answer is the run it queued, or, when the
decision was only the first of two levels, **202** with ``{"detail": message,
"decision": {...}}`` (no run exists yet), for ``create``, ``wait`` and
``stream`` alike.

Every path that creates a run (the three under ``/threads/{tid}/runs`` and the
three stateless ones) takes an ``Idempotency-Key`` header (1-255 visible ASCII
characters): the same key from the same user (identified by the token or the
session, never by the body) with the same thread and body answers the run that
key created first (its Run, its values, or its stream from the start) and
queues nothing; two such requests at once make one run (the key is unique per
user in the database). The same key with another body or thread is 422, and a
key names only its own user's runs.

Errors are ``{"detail": ...}``: 401, 403, 404 (also for threads and runs of
other users), 409 (``multitask_strategy="reject"`` on a busy thread: nothing
is stored), 413, 422 (a malformed body, an unknown key, a reserved
``configurable`` key). Views parse, call ``studio.services``, answer; runs
execute in workers, never here.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.urls import URLPattern

from studio.api.http import api_view, read_json_object
from studio.api.routes import Route, register
from studio.api.run_schemas import (
    Run,
    RunCancelQuery,
    RunCreate,
    RunJoinStreamQuery,
    RunListQuery,
)
from studio.api.schemas import JsonObject
from studio.api.sse import json_after_wait, locations, sse_response, wait_response
from studio.errors import InvalidInput
from studio.services import api_runs

__all__ = (
    "run_cancel",
    "run_delete",
    "run_get",
    "run_join",
    "run_join_stream",
    "runs_create",
    "runs_list",
    "runs_stream",
    "runs_wait",
    "stateless_runs",
    "stateless_stream",
    "stateless_wait",
    "urlpatterns",
)


IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
"""An ``Idempotency-Key``: 1 to 255 visible ASCII characters (a UUID, say)."""


def _idempotency_key(request: HttpRequest) -> str:
    """The request's ``Idempotency-Key`` header ("" without one).

    Raises:
        InvalidInput (422): an empty or malformed key.
    """
    if "Idempotency-Key" not in request.headers:
        return ""
    key = request.headers["Idempotency-Key"].strip()
    if not IDEMPOTENCY_KEY.match(key):
        raise InvalidInput(
            "Idempotency-Key: send 1 to 255 visible ASCII characters (a UUID, say)."
        )
    return key


def _queued(
    request: HttpRequest, thread_id: str | None, *, streaming: bool
) -> tuple[RunCreate, api_runs.Created]:
    """Validate the body and queue the run: ``(body, Created)``.

    With an ``Idempotency-Key`` header, the run the same user already created with
    that key for the same thread and body is the answer (nothing new is queued).
    """
    key = _idempotency_key(request)
    raw = read_json_object(request)
    body = RunCreate.model_validate(raw)
    spec = body.to_spec(thread_id)
    sent = api_runs.idempotency(key, thread_id, raw) if key else None
    created = api_runs.create_run(
        request.user, thread_id, spec, streaming=streaming, idempotency=sent
    )
    return body, created


def _decision_only(created: api_runs.Created) -> JsonResponse:
    """202: a reviewer's first-level approval was recorded; no run exists yet."""
    return JsonResponse(
        {"detail": created.message, "decision": created.decision}, status=202
    )


def _create(request: HttpRequest, thread_id: str | None) -> HttpResponseBase:
    _, created = _queued(request, thread_id, streaming=False)
    if created.run is None:
        return _decision_only(created)
    run = created.run
    response = JsonResponse(api_runs.run_json(run))
    response["Content-Location"] = locations(run.thread_id, run.run_id)[0]
    return response


def _wait(request: HttpRequest, thread_id: str | None) -> HttpResponseBase:
    body, created = _queued(request, thread_id, streaming=False)
    if created.run is None:
        return _decision_only(created)
    run = created.run
    return wait_response(
        run_id=run.run_id,
        thread_id=run.thread_id,
        user=request.user,
        cancel_on_disconnect=body.on_disconnect == "cancel" and not created.decided,
    )


def _stream(request: HttpRequest, thread_id: str | None) -> HttpResponseBase:
    body, created = _queued(request, thread_id, streaming=True)
    if created.run is None:
        return _decision_only(created)
    run = created.run
    return sse_response(
        run_id=run.run_id,
        thread_id=run.thread_id,
        user=request.user,
        attempt=run.attempt,
        cancel_on_disconnect=body.on_disconnect == "cancel" and not created.decided,
    )


@api_view("POST")
def runs_create(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """Create a background run on the thread."""
    return _create(request, thread_id)


@api_view("GET")
def runs_list(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """The thread's runs, newest first."""
    query = RunListQuery.model_validate(request.GET.dict())
    rows = api_runs.list_runs(
        request.user,
        thread_id,
        limit=query.limit,
        offset=query.offset,
        status=query.status,
    )
    return JsonResponse(rows, safe=False)


@api_view("POST")
def runs_wait(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """Create a run and answer its final values once it finished."""
    return _wait(request, thread_id)


@api_view("POST")
def runs_stream(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """Create a run and stream it as SSE."""
    return _stream(request, thread_id)


@api_view("POST")
def stateless_runs(request: HttpRequest) -> HttpResponseBase:
    """A background run on a new (temporary, unless ``on_completion="keep"``) thread."""
    return _create(request, None)


@api_view("POST")
def stateless_wait(request: HttpRequest) -> HttpResponseBase:
    return _wait(request, None)


@api_view("POST")
def stateless_stream(request: HttpRequest) -> HttpResponseBase:
    return _stream(request, None)


@api_view("GET")
def run_get(request: HttpRequest, thread_id: str, run_id: str) -> HttpResponseBase:
    run = api_runs.find_run(request.user, thread_id, run_id)
    return JsonResponse(api_runs.run_json(run))


@api_view("DELETE")
def run_delete(request: HttpRequest, thread_id: str, run_id: str) -> HttpResponseBase:
    """Delete a finished run and its events (204)."""
    api_runs.delete_run(request.user, thread_id, run_id)
    return HttpResponse(status=204)


@api_view("GET")
def run_join(request: HttpRequest, thread_id: str, run_id: str) -> HttpResponseBase:
    """The run's final values once it finished (the shape of ``runs.wait``)."""
    run = api_runs.find_run(request.user, thread_id, run_id)
    return wait_response(run_id=run.run_id, thread_id=run.thread_id, user=request.user)


@api_view("GET")
def run_join_stream(
    request: HttpRequest, thread_id: str, run_id: str
) -> HttpResponseBase:
    """The run's stored events as SSE, after ``Last-Event-ID`` when it is sent.

    ``cancel_on_disconnect`` needs the right to cancel the run (403 for a
    reviewer who may only read the thread).
    """
    run = api_runs.find_run(request.user, thread_id, run_id)
    query = RunJoinStreamQuery.model_validate(
        {
            **request.GET.dict(),
            # the SDK sends an empty stream_mode= when it has none to ask for
            "stream_mode": [m for m in request.GET.getlist("stream_mode") if m] or None,
        }
    )
    if query.cancel_on_disconnect:
        api_runs.check_may_cancel(request.user, thread_id)
    return sse_response(
        run_id=run.run_id,
        thread_id=run.thread_id,
        user=request.user,
        attempt=run.attempt,
        after=_last_event_id(request),
        modes=query.stream_mode,
        cancel_on_disconnect=query.cancel_on_disconnect,
    )


def _last_event_id(request: HttpRequest) -> int:
    raw = (request.headers.get("Last-Event-ID") or "").strip()
    if not raw:
        return 0
    if not raw.isdigit():
        raise InvalidInput(
            "Last-Event-ID: send the id of the last event you received (a number)."
        )
    return int(raw)


@api_view("POST")
def run_cancel(request: HttpRequest, thread_id: str, run_id: str) -> HttpResponseBase:
    """Stop a pending or running run: 202 (``wait=0``) or the stopped Run (``wait=1``)."""
    query = RunCancelQuery.model_validate(request.GET.dict())
    run = api_runs.cancel(request.user, thread_id, run_id, query.action)
    if not query.wait:
        return HttpResponse(status=202)
    if run.is_terminal:  # stopped already (a pending run): no need to wait
        return JsonResponse(api_runs.run_json(run))
    return json_after_wait(run.run_id, run.thread_id, api_runs.run_json_of)


_IDEMPOTENT = ("Idempotency-Key",)
_RUN = "/threads/{thread_id}/runs/{run_id}"
_RUN_ERRORS = (401, 404)
_CREATE_ERRORS = (401, 403, 404, 409, 413, 422)
_KEEP_NOTE = (
    " A resume to a thread waiting for a reviewer goes through the decision "
    "protocol: 202 with the decision when it was a first-level approval."
)
_STATELESS_NOTE = (
    " It runs on a new thread of yours, deleted after the run unless "
    'on_completion="keep".'
)


def _route(
    method: Any, path: str, view: Any, name: str, summary: str, **more: Any
) -> Route:
    return Route(
        method, path, view, name=name, summary=summary, tag="runs", raw=True, **more
    )


urlpatterns: list[URLPattern] = register(
    # literal paths first: /runs/wait would match /runs/{run_id}
    _route(
        "POST",
        "/threads/{thread_id}/runs/wait",
        runs_wait,
        "run-wait",
        "Create a run and wait for its final values",
        body=RunCreate,
        headers=_IDEMPOTENT,
        response=JsonObject,
        errors=_CREATE_ERRORS,
        statuses={202: "A first-level approval: no run yet."},
        description="200 with the values filtered by the output schema, plus "
        '__interrupt__ at an interrupt, or {"__error__": {error, message}} when '
        "the run failed. Location: /threads/{thread_id}/runs/{run_id}/join."
        + _KEEP_NOTE,
    ),
    _route(
        "POST",
        "/threads/{thread_id}/runs/stream",
        runs_stream,
        "run-stream-create",
        "Create a run and stream it (SSE)",
        body=RunCreate,
        headers=_IDEMPOTENT,
        media_type="text/event-stream",
        errors=_CREATE_ERRORS,
        statuses={202: "A first-level approval: no run yet."},
        description="Events: metadata {run_id, attempt}, then one event per chunk "
        "of the stream modes (mode, or mode|namespace for subgraphs), each with "
        "an id: (resume with Last-Event-ID on .../runs/{run_id}/stream); error "
        "{error, message} if the run failed. Location and Content-Location are "
        "relative to /api." + _KEEP_NOTE,
    ),
    _route(
        "POST",
        "/threads/{thread_id}/runs",
        runs_create,
        "run-create",
        "Create a background run",
        body=RunCreate,
        headers=_IDEMPOTENT,
        response=Run,
        errors=_CREATE_ERRORS,
        statuses={202: "A first-level approval: no run yet."},
        description="multitask_strategy=reject on a busy thread is 409 and "
        "stores nothing." + _KEEP_NOTE,
    ),
    _route(
        "GET",
        "/threads/{thread_id}/runs",
        runs_list,
        "run-list",
        "List the thread's runs, newest first",
        query=RunListQuery,
        response=list[Run],
        errors=(401, 404, 422),
    ),
    _route(
        "GET", _RUN, run_get, "run-get", "Get a run", response=Run, errors=_RUN_ERRORS
    ),
    _route(
        "DELETE",
        _RUN,
        run_delete,
        "run-delete",
        "Delete a finished run",
        status=204,
        errors=(401, 403, 404, 409),
    ),
    _route(
        "GET",
        f"{_RUN}/join",
        run_join,
        "run-join",
        "Wait for a run's final values",
        response=JsonObject,
        errors=_RUN_ERRORS,
    ),
    _route(
        "GET",
        f"{_RUN}/stream",
        run_join_stream,
        "run-stream-join",
        "Stream a run's stored events (SSE)",
        query=RunJoinStreamQuery,
        media_type="text/event-stream",
        errors=(401, 403, 404, 422),
        description="All of them, or those after the Last-Event-ID header.",
    ),
    _route(
        "POST",
        f"{_RUN}/cancel",
        run_cancel,
        "run-cancel",
        "Cancel a pending or running run",
        query=RunCancelQuery,
        response=Run,
        status=202,
        statuses={200: "wait=1: the run once it stopped."},
        errors=(401, 403, 404, 422),
        description="202 with no body for wait=0; 404 for a run that already finished.",
    ),
    _route(
        "POST",
        "/runs/wait",
        stateless_wait,
        "stateless-run-wait",
        "Run on a new thread and wait for its final values",
        body=RunCreate,
        headers=_IDEMPOTENT,
        response=JsonObject,
        errors=_CREATE_ERRORS,
        description=_STATELESS_NOTE.strip(),
    ),
    _route(
        "POST",
        "/runs/stream",
        stateless_stream,
        "stateless-run-stream",
        "Run on a new thread and stream it (SSE)",
        body=RunCreate,
        headers=_IDEMPOTENT,
        media_type="text/event-stream",
        errors=_CREATE_ERRORS,
        description=_STATELESS_NOTE.strip(),
    ),
    _route(
        "POST",
        "/runs",
        stateless_runs,
        "stateless-run-create",
        "Run on a new thread in the background",
        body=RunCreate,
        headers=_IDEMPOTENT,
        response=Run,
        errors=_CREATE_ERRORS,
        description=_STATELESS_NOTE.strip(),
    ),
)
