"""Following a run from an async view: its stored stream events, then its end.

Served from the ``RunEvent`` table, never from the worker's memory, so a client
that reconnects (``Last-Event-ID``) gets every event after the last one it saw,
nothing twice, even after a worker restart. Waiting does not hold a thread: the
follower sleeps on the channel layer group of the run's thread (the worker
publishes there after each stored batch) and reads the table when woken, or
every :data:`POLL_SECONDS` in case a publish was lost (the layer is
at-most-once; the table is the truth).

Used by ``studio.api.sse`` for SSE, ``runs.wait`` and ``runs.join``.

Each read gives its database connection back (to the pool, in scale-out: see
``studio.settings``) before the follower sleeps: a stream that kept it for its
whole life took one Postgres connection per open stream, and a hundred streams
used up Postgres's default ``max_connections``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import close_old_connections

from studio.groups import thread_group
from studio.models import Run, RunEvent, Thread
from studio.services.api_runs import result_of
from studio.services.run_log import STREAM
from studio.services.runs import ACTIVE, cancel_run, delete_thread_data

__all__ = (
    "BATCH",
    "FINISH_WAIT_SECONDS",
    "POLL_SECONDS",
    "Ended",
    "StreamEvent",
    "cancel_if_active",
    "finish",
    "follow",
    "watch",
)

POLL_SECONDS = 1.0
"""The longest a follower sleeps without reading the table (lost wake-ups)."""
BATCH = 500
"""Events read per query."""


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One stored stream event: its ``RunEvent`` id, the SSE event name, the data."""

    id: int
    event: str
    data: Any


@dataclass(frozen=True, slots=True)
class Ended:
    """The run is over and every event was sent (``status`` None: deleted)."""

    status: str | None
    error: dict[str, Any] | None


def _matches(name: str, modes: frozenset[str] | None) -> bool:
    if modes is None:
        return True
    base = name.split("|", 1)[0].split("/", 1)[0]
    return base in modes


def _read(
    run_id: str, after: int
) -> tuple[list[StreamEvent], Mapping[str, Any] | None]:
    # the status first: when it is terminal, the worker had stored every event before
    state = Run.objects.filter(pk=run_id).values("status", "error").first()
    rows = (
        RunEvent.objects.filter(run_id=run_id, kind=STREAM, id__gt=after)
        .order_by("id")
        .values_list("id", "payload")[:BATCH]
    )
    events = [
        StreamEvent(id, str(payload.get("event", "")), payload.get("data"))
        for id, payload in rows
    ]
    return events, state


def _releasing(fn: Any) -> Any:
    """``fn`` as a coroutine that gives its database connection back when done."""

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        finally:
            close_old_connections()

    return sync_to_async(call)


def _status(run_id: str) -> str | None:
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first()


class _Waker:
    """Sleeps until the thread's group hears of a new event, or a timeout."""

    def __init__(self, thread_id: str) -> None:
        self.group = thread_group(thread_id)
        self.layer = get_channel_layer()
        self.channel = ""

    async def __aenter__(self) -> _Waker:
        if self.layer is not None:
            try:
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(self.group, self.channel)
            except Exception:  # Redis is away: the wait below polls the table; a
                pass  # layer that rides out outages joins the group when it is back
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.layer is not None and self.channel:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(self.group, self.channel)

    async def wait(self, timeout: float) -> None:
        if self.layer is None or not self.channel:
            await asyncio.sleep(timeout)
            return
        started = asyncio.get_running_loop().time()
        try:
            await asyncio.wait_for(self.layer.receive(self.channel), timeout)
        except TimeoutError:
            pass
        except Exception:  # the layer failed (Redis is away): wait out the poll
            left = started + timeout - asyncio.get_running_loop().time()
            await asyncio.sleep(max(0.0, left))


async def follow(
    run_id: str,
    thread_id: str,
    *,
    after: int = 0,
    modes: Iterable[str] | None = None,
    poll: float = POLL_SECONDS,
) -> AsyncGenerator[StreamEvent | Ended | None, None]:
    """The run's stream events after ``after``, in order, then :class:`Ended`.

    Yields None each time it waited ``poll`` seconds without news (callers send
    a heartbeat). ``modes`` keeps only events of those modes (``messages-tuple``
    counts as ``messages``).
    """
    wanted = (
        None
        if modes is None
        else frozenset("messages" if m == "messages-tuple" else m for m in modes)
    )
    read = _releasing(_read)
    async with _Waker(thread_id) as waker:
        while True:
            events, state = await read(run_id, after)
            for event in events:
                after = event.id
                if _matches(event.event, wanted):
                    yield event
            if len(events) == BATCH:
                continue
            if state is None:
                yield Ended(None, None)
                return
            if state["status"] not in ACTIVE:
                yield Ended(state["status"], state["error"])
                return
            if not events:
                await waker.wait(poll)
                yield None


async def watch(
    run_id: str, thread_id: str, *, poll: float = POLL_SECONDS
) -> AsyncGenerator[dict[str, Any] | None, None]:
    """None while the run is pending or running (every ``poll`` s at most), then
    its ``runs.wait`` answer (:func:`~studio.services.api_runs.result_of`)."""
    status = _releasing(_status)
    async with _Waker(thread_id) as waker:
        while True:
            current = await status(run_id)
            if current is None:
                yield {
                    "__error__": {"error": "NotFound", "message": "the run was deleted"}
                }
                return
            if current not in ACTIVE:
                yield await sync_to_async(_result)(run_id)
                return
            await waker.wait(poll)
            yield None


def _result(run_id: str) -> dict[str, Any]:
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return {"__error__": {"error": "NotFound", "message": "the run was deleted"}}
    return result_of(run)


def cancel_if_active(run_id: str, user: Any) -> bool:
    """Cancel the run if it is still pending or running (``on_disconnect="cancel"``)."""
    run = Run.objects.filter(pk=run_id, status__in=ACTIVE).first()
    if run is None:
        return False
    try:
        cancel_run(run, user, "interrupt")
    except Exception:  # it finished meanwhile: nothing to cancel
        return False
    return True


FINISH_WAIT_SECONDS = 3.0
"""How long a reader waits for the worker to finish a temporary run's bookkeeping."""


def _temporary(run_id: str, thread_id: str) -> str:
    """``"keep"`` (not temporary, or gone), ``"wait"`` (the worker is not done with
    it), or ``"due"`` (the worker marked it for deletion)."""
    run = Run.objects.filter(pk=run_id).values("kwargs").first()
    if run is None or not (run["kwargs"] or {}).get("temporary"):
        return "keep"
    thread = Thread.objects.filter(pk=thread_id).values("delete_after").first()
    if thread is None:
        return "keep"
    return "wait" if thread["delete_after"] is None else "due"


async def finish(run_id: str, thread_id: str) -> None:
    """After a client got a temporary run's last event: delete its thread now.

    Only once the worker marked it (``Thread.delete_after``, its last step), so
    nothing it still writes is lost; after :data:`FINISH_WAIT_SECONDS` the
    workers' sweep deletes it instead.
    """
    check = sync_to_async(_temporary)
    deadline = asyncio.get_running_loop().time() + FINISH_WAIT_SECONDS
    while True:
        state = await check(run_id, thread_id)
        if state == "keep":
            return
        if state == "due":
            await sync_to_async(delete_thread_data)(thread_id)
            return
        if asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(0.05)
