"""Server-Sent Events for runs, and the waiting JSON answers, as async streams.

Views (``studio.api.runs``) authenticate, validate and queue in a short sync
call, then return one of these responses; the waiting happens in an async
iterator, so under Daphne no thread is held while a client waits or streams
(Django's ASGI handler iterates the body on the event loop; table reads go
through ``sync_to_async``). Under WSGI Django would buffer the whole body: serve
the studio with Daphne.

SSE (:func:`sse_response`), as the reference server sends it:

- ``Content-Type: text/event-stream; charset=utf-8``,
  ``Location: /threads/{tid}/runs/{rid}/stream`` and
  ``Content-Location: /threads/{tid}/runs/{rid}``, relative to the API root:
  httpx appends a Location to the client's base URL, so ``/api/...`` would
  become ``/api/api/...`` on the SDK's reconnect;
- first ``event: metadata`` with ``{"run_id", "attempt"}`` (not on a reconnect
  with ``Last-Event-ID``: the client has it);
- then the run's stored stream events, in order, each
  ``id: <RunEvent id>\\nevent: <name>\\ndata: <json>\\n\\n``. The reference sends
  ids only for ``stream_resumable`` runs; here every event has one, because
  every event is stored, so any client can reconnect with ``Last-Event-ID`` and
  get only what came after;
- ``event: error`` with ``{"error", "message"}`` when the run failed;
- then the stream closes, once the run is terminal and every event was sent
  (no ``end`` event, like the reference: the SDK then sees a terminal run and
  stops). A comment line (``: heartbeat``) goes out after
  :data:`HEARTBEAT_SECONDS` of silence, to keep proxies from closing it.

When the stream ends early (the client went away) and the run asked for
``on_disconnect="cancel"`` (or the join stream for ``cancel_on_disconnect``),
the run is cancelled. A temporary run's thread is deleted once its last event
was sent.

``runs.wait`` / ``runs.join`` (:func:`wait_response`) answer 200 JSON once the
run is terminal, after whitespace heartbeats (``\\n``, which JSON parsers skip)
while it runs, as the reference does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from studio.services.run_stream import (
    Ended,
    cancel_if_active,
    finish,
    follow,
    watch,
)

__all__ = (
    "HEARTBEAT_SECONDS",
    "frame",
    "json_after_wait",
    "locations",
    "sse_response",
    "wait_response",
)

HEARTBEAT_SECONDS = 15.0
"""Silence after which a heartbeat goes out (an SSE comment, or a JSON space)."""

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"


def locations(thread_id: str, run_id: str) -> tuple[str, str]:
    """``(run URL, stream URL)``, relative to the API root (see the module doc)."""
    run = f"/threads/{thread_id}/runs/{run_id}"
    return run, f"{run}/stream"


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)


def frame(event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE frame (JSON has no raw newlines, so ``data`` is one line)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {_dumps(data)}\n\n".encode()


def sse_response(
    *,
    run_id: str,
    thread_id: str,
    user: Any,
    attempt: int = 1,
    after: int = 0,
    modes: Iterable[str] | None = None,
    cancel_on_disconnect: bool = False,
) -> StreamingHttpResponse:
    """The run's events as SSE, from the event after ``after`` (see the module doc)."""
    response = StreamingHttpResponse(
        _events(
            run_id,
            thread_id,
            user=user,
            attempt=attempt,
            after=after,
            modes=modes,
            cancel_on_disconnect=cancel_on_disconnect,
        ),
        content_type=SSE_CONTENT_TYPE,
    )
    run_url, stream_url = locations(thread_id, run_id)
    response["Location"] = stream_url
    response["Content-Location"] = run_url
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response


async def _events(
    run_id: str,
    thread_id: str,
    *,
    user: Any,
    attempt: int,
    after: int,
    modes: Iterable[str] | None,
    cancel_on_disconnect: bool,
) -> AsyncIterator[bytes]:
    ended = False
    try:
        if not after:
            yield frame("metadata", {"run_id": run_id, "attempt": max(1, attempt)})
        quiet = time.monotonic()
        events = follow(run_id, thread_id, after=after, modes=modes)
        async with contextlib.aclosing(events):
            async for item in events:
                if item is None:
                    if time.monotonic() - quiet >= HEARTBEAT_SECONDS:
                        quiet = time.monotonic()
                        yield b": heartbeat\n\n"
                    continue
                if isinstance(item, Ended):
                    ended = True
                    if item.status == "error" and item.error:
                        yield frame("error", item.error)
                    break
                quiet = time.monotonic()
                yield frame(item.event, item.data, item.id)
    finally:
        await _after_stream(run_id, thread_id, user, ended, cancel_on_disconnect)


async def _after_stream(
    run_id: str, thread_id: str, user: Any, ended: bool, cancel: bool
) -> None:
    """Cancel an abandoned run (when asked) or delete a temporary one's thread.

    Shielded: it runs even while the client's request is being cancelled.
    """
    if ended:
        await asyncio.shield(finish(run_id, thread_id))
    elif cancel:
        await asyncio.shield(sync_to_async(cancel_if_active)(run_id, user))


def wait_response(
    *,
    run_id: str,
    thread_id: str,
    user: Any,
    cancel_on_disconnect: bool = False,
    location: str = "join",
) -> StreamingHttpResponse:
    """200 JSON: the run's ``runs.wait`` answer, once it is terminal.

    ``Location`` is ``/threads/{tid}/runs/{rid}/join``, where the SDK asks again
    if the body was cut off.
    """
    response = StreamingHttpResponse(
        _wait(run_id, thread_id, user=user, cancel=cancel_on_disconnect),
        content_type="application/json",
    )
    run_url, _ = locations(thread_id, run_id)
    response["Location"] = f"{run_url}/{location}"
    response["Content-Location"] = run_url
    response["Cache-Control"] = "no-store"
    return response


async def _wait(
    run_id: str, thread_id: str, *, user: Any, cancel: bool
) -> AsyncIterator[bytes]:
    ended = False
    try:
        quiet = time.monotonic()
        results = watch(run_id, thread_id)
        async with contextlib.aclosing(results):
            async for result in results:
                if result is None:
                    if time.monotonic() - quiet >= HEARTBEAT_SECONDS:
                        quiet = time.monotonic()
                        yield b"\n"
                    continue
                ended = True
                yield _dumps(result).encode()
    finally:
        await _after_stream(run_id, thread_id, user, ended, cancel)


def json_after_wait(
    run_id: str, thread_id: str, answer: Any, status: int = 200
) -> StreamingHttpResponse:
    """200 JSON produced by ``answer(run_id)`` (a sync callable) once the run is terminal."""
    response = StreamingHttpResponse(
        _answer_after(run_id, thread_id, answer),
        content_type="application/json",
        status=status,
    )
    response["Cache-Control"] = "no-store"
    return response


async def _answer_after(
    run_id: str, thread_id: str, answer: Any
) -> AsyncIterator[bytes]:
    quiet = time.monotonic()
    results = watch(run_id, thread_id)
    async with contextlib.aclosing(results):
        async for result in results:
            if result is None:
                if time.monotonic() - quiet >= HEARTBEAT_SECONDS:
                    quiet = time.monotonic()
                    yield b"\n"
                continue
            yield _dumps(await sync_to_async(answer)(run_id)).encode()
